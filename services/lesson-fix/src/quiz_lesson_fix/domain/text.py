"""A text block's words: its two stored shapes, the tiptap document, and the markup.

Facts (FACTS A; the lesson tool's `packages/core/src/lessonText.js`):

- A text block stores plain `text` (one paragraph per line) or `content`, a tiptap document
  `{type: "doc", content: [{type: "paragraph", content: [run | footnote…]}…]}`. When `content`
  is a document it wins.
- Only three marks exist (bold, italic, underline), one block node (the paragraph) and one
  inline node (the footnote `{sourceId, locator, note}`). Anything else keeps only its words;
  neighbouring runs with the same marks merge; marks are stored in that fixed order.
- The markup an assistant reads and writes: `**bold**`, `*italic*`, `<u>underline</u>`,
  `^[note]`, `^[@id]`, `^[@id, locator]`, `^[@id, locator | note]`, `^[@id | note]`; one line
  is one paragraph; a backslash makes the next character literal. Parsing forgives: an odd
  `**`/`*` leaves its last one literal, an unpaired `<u>`/`</u>` and a `^[` that never closes
  are literal, brackets nest inside a footnote, a citation of an invalid id is a note holding
  what was written, and a footnote with neither source nor note is dropped.

Internally a paragraph is a list of `Run` and `Note`; `to_document` gives the stored shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from quiz_lesson_fix.domain.jsval import (
    js_collapse_space,
    js_string,
    js_trim,
    utf16_len,
    utf16_prefix,
)

TEXT_MARKS: tuple[str, ...] = ("bold", "italic", "underline")
LOCATOR_LIMIT = 200
NOTE_LIMIT = 2000
_MAX_DEPTH = 20
_SOURCE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_LINE_BREAKS = re.compile(r"[\r\n]+")
_NEWLINES = re.compile(r"\r\n?")
_INLINE_TYPES = frozenset({"text", "footnote", "hardBreak"})


@dataclass(frozen=True, slots=True)
class Run:
    """Words with the same marks (marks in TEXT_MARKS order)."""

    text: str
    marks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Note:
    """A footnote: a citation (`source_id`, `locator`), a `note`, or both."""

    source_id: str | None
    locator: str
    note: str


Inline = Run | Note
Paragraph = list[Inline]


def is_source_id(value: Any) -> bool:
    """Whether `value` can name a source: 1–64 of A-Z a-z 0-9 _ - (sources.js)."""
    return isinstance(value, str) and _SOURCE_ID.fullmatch(value) is not None


def _one_line(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    return utf16_prefix(js_trim(js_collapse_space(value)), limit)


def normalize_footnote(attrs: Any) -> Note | None:
    """A footnote's attributes cleaned, or None when it says nothing (no source, no note)."""
    attrs = attrs if isinstance(attrs, dict) else {}
    source_id = attrs.get("sourceId")
    source_id = source_id if is_source_id(source_id) else None
    locator = _one_line(attrs.get("locator"), LOCATOR_LIMIT) if source_id else ""
    note = _one_line(attrs.get("note"), NOTE_LIMIT)
    if not source_id and not note:
        return None
    return Note(source_id, locator, note)


def _marks_of(node: Mapping[str, Any]) -> tuple[str, ...]:
    marks = node.get("marks")
    if not isinstance(marks, list):
        return ()
    present = {
        m if isinstance(m, str) else (m.get("type") if isinstance(m, dict) else None) for m in marks
    }
    return tuple(mark for mark in TEXT_MARKS if mark in present)


def _append_text(out: Paragraph, text: str, marks: tuple[str, ...]) -> None:
    last = out[-1] if out else None
    if isinstance(last, Run) and last.marks == marks:
        out[-1] = Run(last.text + text, marks)
    else:
        out.append(Run(text, marks))


def _collect_inline(node: Any, out: Paragraph, depth: int = 0) -> None:
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return
    kind = node.get("type")
    if kind == "text":
        raw = node.get("text")
        text = _LINE_BREAKS.sub(" ", raw) if isinstance(raw, str) else ""
        if text:
            _append_text(out, text, _marks_of(node))
        return
    if kind == "footnote":
        note = normalize_footnote(node.get("attrs"))
        if note is not None:
            out.append(note)
        return
    if kind == "hardBreak":
        _append_text(out, " ", ())
        return
    children = node.get("content")
    if isinstance(children, list):
        for child in children:
            _collect_inline(child, out, depth + 1)


def _collect_paragraphs(node: Any, out: list[Paragraph], depth: int = 0) -> None:
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return
    children = node.get("content")
    children = children if isinstance(children, list) else []
    if node.get("type") == "paragraph" or any(
        isinstance(child, dict) and child.get("type") in _INLINE_TYPES for child in children
    ):
        inline: Paragraph = []
        for child in children:
            _collect_inline(child, inline)
        out.append(inline)
        return
    for child in children:
        _collect_paragraphs(child, out, depth + 1)


def parse_document(value: Any) -> list[Paragraph] | None:
    """A tiptap document as normalised paragraphs, or None when `value` is not a document."""
    if not isinstance(value, dict) or value.get("type") != "doc":
        return None
    paragraphs: list[Paragraph] = []
    children = value.get("content")
    for child in children if isinstance(children, list) else []:
        _collect_paragraphs(child, paragraphs)
    return paragraphs or [[]]


def plain_paragraphs(text: str) -> list[Paragraph]:
    """Plain text as paragraphs: one per line, unformatted."""
    return [[Run(line)] if line else [] for line in _NEWLINES.sub("\n", text).split("\n")]


def block_paragraphs(block: Mapping[str, Any]) -> list[Paragraph]:
    """A text block's paragraphs, whichever shape it is stored in (`content` wins)."""
    parsed = parse_document(block.get("content"))
    if parsed is not None:
        return parsed
    text = block.get("text")
    return plain_paragraphs("" if text is None else js_string(text))


def to_document(paragraphs: Iterable[Paragraph]) -> dict[str, Any]:
    """Paragraphs in the stored shape (a run without marks has no `marks` key)."""
    content: list[dict[str, Any]] = []
    for paragraph in paragraphs:
        if not paragraph:
            content.append({"type": "paragraph"})
            continue
        nodes: list[dict[str, Any]] = []
        for node in paragraph:
            if isinstance(node, Run):
                run: dict[str, Any] = {"type": "text", "text": node.text}
                if node.marks:
                    run["marks"] = [{"type": mark} for mark in node.marks]
                nodes.append(run)
            else:
                nodes.append(
                    {
                        "type": "footnote",
                        "attrs": {
                            "sourceId": node.source_id,
                            "locator": node.locator,
                            "note": node.note,
                        },
                    }
                )
        content.append({"type": "paragraph", "content": nodes})
    return {"type": "doc", "content": content or [{"type": "paragraph"}]}


def normalize_document(value: Any) -> dict[str, Any] | None:
    """A document in its exact stored shape (normalizeTextContent), or None."""
    parsed = parse_document(value)
    return None if parsed is None else to_document(parsed)


def paragraphs_plain(paragraphs: Iterable[Paragraph]) -> str:
    """The text runs only, paragraphs joined by newlines (no formatting, no footnotes)."""
    return "\n".join(
        "".join(node.text for node in paragraph if isinstance(node, Run))
        for paragraph in paragraphs
    )


def is_plain(paragraphs: Iterable[Paragraph]) -> bool:
    """Whether nothing in the paragraphs needs a document: no mark, no footnote."""
    return all(
        isinstance(node, Run) and not node.marks for paragraph in paragraphs for node in paragraph
    )


def footnotes(paragraphs: Iterable[Paragraph]) -> list[Note]:
    """The footnotes, in reading order."""
    return [node for paragraph in paragraphs for node in paragraph if isinstance(node, Note)]


@dataclass(frozen=True, slots=True)
class Span:
    """A run of formatted text with nothing plain inside it (trimmed; marks in order)."""

    text: str
    marks: tuple[str, ...]


def formatted_spans(paragraphs: Iterable[Paragraph]) -> tuple[list[Span], int]:
    """The formatted spans and the UTF-16 length of all text (textBlockFormattedSpans).

    A footnote between two formatted runs does not end the span; a plain run does.
    """
    spans: list[Span] = []
    total = 0
    for paragraph in paragraphs:
        text = ""
        marks: set[str] = set()
        open_span = False
        for node in paragraph:
            if not isinstance(node, Run):
                continue
            total += utf16_len(node.text)
            if not node.marks:
                if open_span:
                    _finish_span(spans, text, marks)
                text, marks, open_span = "", set(), False
                continue
            open_span = True
            text += node.text
            marks.update(node.marks)
        if open_span:
            _finish_span(spans, text, marks)
    return spans, total


def _finish_span(spans: list[Span], text: str, marks: set[str]) -> None:
    trimmed = js_trim(text)
    if trimmed:
        spans.append(Span(trimmed, tuple(mark for mark in TEXT_MARKS if mark in marks)))


def text_block(block: Mapping[str, Any], paragraphs: list[Paragraph]) -> dict[str, Any]:
    """The block holding these paragraphs in the smaller shape: `text` when plain.

    Keeps the block's other fields (its id and type); for whole-block writers.
    """
    rest = {k: v for k, v in block.items() if k not in ("text", "content")}
    if is_plain(paragraphs):
        return {**rest, "text": paragraphs_plain(paragraphs)}
    return {**rest, "content": to_document(paragraphs)}


def text_block_document(block: Mapping[str, Any], paragraphs: list[Paragraph]) -> dict[str, Any]:
    """The block holding these paragraphs as a `content` document, always (as the editor does)."""
    rest = {k: v for k, v in block.items() if k not in ("text", "content")}
    return {**rest, "content": to_document(paragraphs)}


# ---- Markup ---------------------------------------------------------------------------------

_MARK_SYNTAX = {"bold": ("**", "**"), "italic": ("*", "*"), "underline": ("<u>", "</u>")}
_U_TAG = re.compile(r"<(/?u>)", re.IGNORECASE)
_NOTE_SPECIALS = re.compile(r"[\\\[\]|]")
# `.` of a JavaScript regex: anything but a line terminator.
_UNESCAPE = re.compile(r"\\([^\n\r\u2028\u2029])")


def _escape_text(text: str) -> str:
    text = text.replace("\\", "\\\\").replace("*", "\\*").replace("^[", "\\^[")
    return _U_TAG.sub(r"\\<\1", text)


def _escape_note(text: str) -> str:
    return _NOTE_SPECIALS.sub(lambda m: "\\" + m.group(0), text)


def _footnote_markup(note: Note) -> str:
    if not note.source_id:
        body = _escape_note(note.note)
        return f"^[\\{body}]" if body.startswith("@") else f"^[{body}]"
    body = f"@{note.source_id}"
    if note.locator:
        body += f", {_escape_note(note.locator)}"
    if note.note:
        body += f" | {_escape_note(note.note)}"
    return f"^[{body}]"


def _paragraph_markup(paragraph: Paragraph) -> str:
    out: list[str] = []
    opened: list[str] = []

    def close(keep: tuple[str, ...]) -> None:
        # Innermost first, so the output nests the way Markdown reads.
        for mark in reversed(opened):
            if mark not in keep:
                out.append(_MARK_SYNTAX[mark][1])
        opened[:] = [mark for mark in opened if mark in keep]

    for node in paragraph:
        if isinstance(node, Note):
            close(())
            out.append(_footnote_markup(node))
            continue
        close(node.marks)
        for mark in node.marks:
            if mark not in opened:
                out.append(_MARK_SYNTAX[mark][0])
                opened.append(mark)
        out.append(_escape_text(node.text))
    close(())
    return "".join(out)


def paragraphs_markup(paragraphs: Iterable[Paragraph]) -> str:
    """Paragraphs as markup, escaped so that reading it back gives the same paragraphs."""
    return "\n".join(_paragraph_markup(paragraph) for paragraph in paragraphs)


def block_markup(block: Mapping[str, Any]) -> str:
    """A text block as markup, whichever shape it is stored in."""
    return paragraphs_markup(block_paragraphs(block))


@dataclass(slots=True)
class _Token:
    kind: str  # text | footnote | bold | italic | u-open | u-close
    text: str = ""
    note: Note | None = None


def _closing_bracket(line: str, start: int) -> int:
    depth = 0
    i = start
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 1
        elif ch == "[":
            depth += 1
        elif ch == "]":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return -1


def _split_unescaped(text: str, ch: str) -> tuple[str, str | None]:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 1
        elif text[i] == ch:
            return text[:i], text[i + 1 :]
        i += 1
    return text, None


def _unescape(text: str) -> str:
    return _UNESCAPE.sub(r"\1", text)


def _parse_footnote_body(body: str) -> Note | None:
    trimmed = js_trim(body)
    if trimmed.startswith("@"):
        head, note = _split_unescaped(trimmed[1:], "|")
        ident, locator = _split_unescaped(head, ",")
        source_id = js_trim(_unescape(ident))
        if is_source_id(source_id):
            return normalize_footnote(
                {
                    "sourceId": source_id,
                    "locator": js_trim(_unescape(locator or "")),
                    "note": js_trim(_unescape(note or "")),
                }
            )
    return normalize_footnote({"sourceId": None, "locator": "", "note": _unescape(trimmed)})


def _tokenize(line: str) -> list[_Token]:
    tokens: list[_Token] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            tokens.append(_Token("text", "".join(text)))
            text.clear()

    i, size = 0, len(line)
    while i < size:
        ch = line[i]
        if ch == "\\" and i + 1 < size:
            text.append(line[i + 1])
            i += 2
            continue
        if ch == "^" and i + 1 < size and line[i + 1] == "[":
            end = _closing_bracket(line, i + 2)
            if end != -1:
                flush()
                tokens.append(
                    _Token(
                        "footnote",
                        line[i : end + 1],
                        _parse_footnote_body(line[i + 2 : end]),
                    )
                )
                i = end + 1
                continue
        if line.startswith("**", i):
            flush()
            tokens.append(_Token("bold", "**"))
            i += 2
            continue
        if ch == "*":
            flush()
            tokens.append(_Token("italic", "*"))
            i += 1
            continue
        if ch == "<":
            lower = line[i : i + 4].lower()
            if lower.startswith("<u>"):
                flush()
                tokens.append(_Token("u-open", line[i : i + 3]))
                i += 3
                continue
            if lower == "</u>":
                flush()
                tokens.append(_Token("u-close", line[i : i + 4]))
                i += 4
                continue
        text.append(ch)
        i += 1
    flush()
    return tokens


def _resolve_unpaired(tokens: list[_Token]) -> None:
    for kind in ("bold", "italic"):
        at = [i for i, token in enumerate(tokens) if token.kind == kind]
        if len(at) % 2 == 1:
            tokens[at[-1]].kind = "text"
    pending = -1
    for i, token in enumerate(tokens):
        if token.kind == "u-open":
            if pending != -1:
                tokens[pending].kind = "text"
            pending = i
        elif token.kind == "u-close":
            if pending == -1:
                token.kind = "text"
            pending = -1
    if pending != -1:
        tokens[pending].kind = "text"


def _parse_line(line: str) -> Paragraph:
    tokens = _tokenize(line)
    _resolve_unpaired(tokens)
    marks: set[str] = set()
    out: Paragraph = []
    for token in tokens:
        if token.kind == "text":
            if token.text:
                _append_text(out, token.text, tuple(m for m in TEXT_MARKS if m in marks))
        elif token.kind == "footnote":
            if token.note is not None:
                out.append(token.note)
        elif token.kind == "u-open":
            marks.add("underline")
        elif token.kind == "u-close":
            marks.discard("underline")
        elif token.kind in marks:
            marks.discard(token.kind)
        else:
            marks.add(token.kind)
    return out


def parse_markup(markup: str) -> list[Paragraph]:
    """Markup as paragraphs (markupToContent), forgiving as FACTS A describes."""
    return [_parse_line(line) for line in _NEWLINES.sub("\n", markup).split("\n")]
