"""Quick fixes: the findings a script fixes without judgement (FACTS C; lessonFixes.js).

Each fix is a list of operations (`replace_block`, `move_block`) for `apply_operations`, or
None when there is nothing left to do (the finding went stale):

- W_FORMAT_BOLD / W_FORMAT_UNDERLINE: that mark off every span of the section's text;
- W_FORMAT_CAPS: all marks off the spans of ALL-CAPS words;
- E_FORMAT_HEAVY: all formatting off the section's text;
- E_FORMAT_LONG_EMPHASIS / E_FORMAT_LONG_ITALIC: bold and underline (or italic) off that span;
- W_VAKT_NOT_LAST: the VAKT blocks moved to the section's end, in their order;
- W_ORANGE_ORDER: the orange questions keep their places, the `multiple` ones take the first;
- E_ORANGE_PARTIAL_LIST: the item the passage's list goes on to (`params.next`) accepted too.

Spans are grouped the way the checks group them (formatted runs with nothing plain between),
so a fix lines up with the finding it answers. Footnotes are never touched.

No route serves these yet: the editor makes quick fixes itself (seed 003, "Some things the
lesson checks find can be fixed by a script"), and the service's routes carry only the checks
and Fix with AI. Serving them would take a contract of its own in `quiz_contracts.lesson`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from quiz_contracts.lesson import Finding
from quiz_lesson_fix.domain.jsval import js_string, js_trim
from quiz_lesson_fix.domain.normalise import is_caps_span
from quiz_lesson_fix.domain.text import (
    TEXT_MARKS,
    Paragraph,
    Run,
    block_paragraphs,
    to_document,
)

SpanPick = Callable[[str, tuple[str, ...]], bool]
QuickFix = Callable[[Mapping[str, Any], Finding], list[dict[str, Any]] | None]


def _section(doc: Mapping[str, Any], section_id: str | None) -> Mapping[str, Any] | None:
    for section in doc.get("sections") or []:
        if isinstance(section, dict) and section_id and section.get("id") == section_id:
            return section
    return None


def _blocks(section: Mapping[str, Any]) -> list[Any]:
    blocks = section.get("blocks")
    return blocks if isinstance(blocks, list) else []


def _strip_group(
    nodes: Paragraph, group: list[int], marks: tuple[str, ...], pick: SpanPick
) -> bool:
    """Take `marks` off one span (the runs at `group`) if `pick` chooses it; True if changed."""
    runs = [node for i in group if isinstance(node := nodes[i], Run)]
    text = js_trim("".join(run.text for run in runs))
    present = tuple(m for m in TEXT_MARKS if any(m in run.marks for run in runs))
    if not text or not pick(text, present):
        return False
    changed = False
    for i, run in zip(group, runs, strict=True):
        kept = tuple(m for m in run.marks if m not in marks)
        if kept != run.marks:
            nodes[i] = Run(run.text, kept)
            changed = True
    return changed


def _without_marks(
    paragraphs: list[Paragraph], marks: tuple[str, ...], pick: SpanPick
) -> list[Paragraph] | None:
    """The paragraphs with `marks` taken off the spans `pick` chooses; None if none changed."""
    changed = False
    out: list[Paragraph] = []
    for paragraph in paragraphs:
        nodes = list(paragraph)
        group: list[int] = []
        for i, node in enumerate(nodes):
            if not isinstance(node, Run):
                continue  # a footnote does not end a span
            if node.marks:
                group.append(i)
            elif group:
                changed = _strip_group(nodes, group, marks, pick) or changed
                group = []
        if group:
            changed = _strip_group(nodes, group, marks, pick) or changed
        out.append(nodes)
    return out if changed else None


def _strip_formatting(marks: tuple[str, ...], pick: SpanPick | None = None) -> QuickFix:
    def fix(doc: Mapping[str, Any], finding: Finding) -> list[dict[str, Any]] | None:
        section = _section(doc, finding.sectionId)
        if section is None:
            return None
        choose = pick or (lambda text, present: True)
        operations = []
        for block in _blocks(section):
            if not isinstance(block, dict) or block.get("type") != "text":
                continue
            stripped = _without_marks(block_paragraphs(block), marks, choose)
            if stripped is None:
                continue
            operations.append(
                {
                    "op": "replace_block",
                    "blockId": block.get("id"),
                    "block": {"type": "text", "content": to_document(stripped)},
                }
            )
        return operations or None

    return fix


def _strip_span(marks: tuple[str, ...]) -> QuickFix:
    def fix(doc: Mapping[str, Any], finding: Finding) -> list[dict[str, Any]] | None:
        target = finding.params.get("text")
        return _strip_formatting(marks, lambda text, present: text == target)(doc, finding)

    return fix


def _reorder(section: Mapping[str, Any], desired: list[Any]) -> list[dict[str, Any]] | None:
    """`move_block` operations that turn the section's block order into `desired`."""
    current = list(_blocks(section))
    if all(a is b for a, b in zip(current, desired, strict=True)):
        return None
    operations = []
    for i, block in enumerate(desired):
        if current[i] is block:
            continue
        j = next(k for k in range(i + 1, len(current)) if current[k] is block)
        current.insert(i, current.pop(j))
        operations.append({"op": "move_block", "blockId": block.get("id"), "index": i})
    return operations


def _vakt_last(doc: Mapping[str, Any], finding: Finding) -> list[dict[str, Any]] | None:
    section = _section(doc, finding.sectionId)
    if section is None:
        return None
    blocks = _blocks(section)

    def is_vakt(b: Any) -> bool:
        return isinstance(b, dict) and b.get("type") == "vakt"

    return _reorder(
        section, [b for b in blocks if not is_vakt(b)] + [b for b in blocks if is_vakt(b)]
    )


def _orange_order(doc: Mapping[str, Any], finding: Finding) -> list[dict[str, Any]] | None:
    section = _section(doc, finding.sectionId)
    if section is None:
        return None
    blocks = _blocks(section)

    def kind(b: Any) -> Any:
        return (
            b.get("questionType") if isinstance(b, dict) and b.get("type") == "question" else None
        )

    orange = [b for b in blocks if kind(b) in ("multiple", "multiple_open")]
    ordered = iter(
        [b for b in orange if kind(b) == "multiple"]
        + [b for b in orange if kind(b) == "multiple_open"]
    )
    desired = [next(ordered) if kind(b) in ("multiple", "multiple_open") else b for b in blocks]
    return _reorder(section, desired)


def _accept_next_item(doc: Mapping[str, Any], finding: Finding) -> list[dict[str, Any]] | None:
    item = js_trim(js_string(finding.params.get("next") or ""))
    section = _section(doc, finding.sectionId)
    if not item or section is None:
        return None
    block = next(
        (b for b in _blocks(section) if isinstance(b, dict) and b.get("id") == finding.blockId),
        None,
    )
    if block is None or not isinstance(block.get("answers"), list):
        return None
    answers = [
        a if isinstance(a, str) else (a.get("text") if isinstance(a, dict) else "")
        for a in block["answers"]
    ]
    texts = [js_trim(a) for a in answers if isinstance(a, str) and js_trim(a)]
    if any(t.lower() == item.lower() for t in texts):
        return None
    return [
        {
            "op": "replace_block",
            "blockId": block.get("id"),
            "block": {
                "type": "question",
                "questionType": block.get("questionType"),
                "prompt": block.get("prompt"),
                "answers": [*texts, item],
            },
        }
    ]


QUICK_FIXES: dict[str, QuickFix] = {
    "W_FORMAT_BOLD": _strip_formatting(("bold",)),
    "W_FORMAT_UNDERLINE": _strip_formatting(("underline",)),
    "W_FORMAT_CAPS": _strip_formatting(TEXT_MARKS, lambda text, present: is_caps_span(text)),
    "E_FORMAT_HEAVY": _strip_formatting(TEXT_MARKS),
    "E_FORMAT_LONG_EMPHASIS": _strip_span(("bold", "underline")),
    "E_FORMAT_LONG_ITALIC": _strip_span(("italic",)),
    "W_VAKT_NOT_LAST": _vakt_last,
    "W_ORANGE_ORDER": _orange_order,
    "E_ORANGE_PARTIAL_LIST": _accept_next_item,
}
QUICK_FIX_CODES: tuple[str, ...] = tuple(QUICK_FIXES)


def quick_fix_operations(doc: Mapping[str, Any], finding: Finding) -> list[dict[str, Any]] | None:
    """The operations of a finding's quick fix, or None (no quick fix, or nothing to do)."""
    fix = QUICK_FIXES.get(finding.code)
    return fix(doc, finding) if fix is not None else None
