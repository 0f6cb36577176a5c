"""The lesson checks: every code of FACTS B, with the lesson tool's levels, triggers and keys.

`validate_lesson(doc)` is `validateLesson` of the tool (packages/core/src/lessonChecks.js):
findings `{level, code, key: "<CODE>:<identity>", section, sectionId, blockId, itemId, params,
message}` in the tool's order, errors then warnings. Keys and params are the tool's, so a key
the editor shows is a key found here; the messages are ours, written for a model to act on:
they name the section, the offending value and the fix.

Scoping rules (FACTS B): `multiple_open` answers are suggestions and stay out of every
lesson-wide pool (reuse, collision, recall); the tight-list checks, grounding, the prompt
check and the blank check apply to `multiple` only; a question listing the same answer twice
is never a reuse and skips the list check; a topic word whose own question expects a number
may appear in any prompt.

Cost: one pass per section builds its passage (normalised once), sentences and vocabulary
lazily; lesson-wide collisions use dictionaries and one joined string, never a pair scan.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from quiz_contracts.lesson import Finding, FindingLevel
from quiz_lesson_fix.domain.jsval import JS_SPACE, js_split_space, js_string, js_trim, utf16_len
from quiz_lesson_fix.domain.normalise import (
    CONJUNCTIONS,
    LIST_SEPARATORS,
    ListPassage,
    Phrases,
    Sentence,
    caps_vocabulary,
    is_caps_span,
    is_single_word,
    js_sorted,
    normalize_text,
    numeric_key,
    pair_key,
    words_of,
)
from quiz_lesson_fix.domain.text import (
    Paragraph,
    Span,
    block_paragraphs,
    footnotes,
    formatted_spans,
    paragraphs_plain,
)

# The default shape (apps/mcp/src/standards.md and the constants of lessonChecks.js).
SECTION_COUNT = 6
SPELLING_WORDS_PER_SECTION = 4
SPELLING_MIN_LETTERS = 6
SPELLING_MAX_LETTERS = 9
QUESTION_ORDER = (
    ("single",) * 3 + ("number",) * 2 + ("multiple",) * 2 + ("background",) + ("open",) * 7
)
TIGHT_OPENS = 4
EXTENDED_OPENS = 3
ORANGE_MIN_ANSWERS = 2
ORANGE_MAX_ANSWERS = 4
MAX_LIST_GAP_WORDS = 4
MAX_ITEM_WORDS = 2
TIGHT_OPEN_MAX_WORDS = 12
FORMAT_MAX_SPANS = 3
FORMAT_MAX_SHARE = 0.1
FORMAT_MAX_EMPHASIS_WORDS = 4
FORMAT_MAX_ITALIC_WORDS = 10

ORANGE_TIGHT = "multiple"
ORANGE_LOOSE = "multiple_open"
ORANGE_TYPES = frozenset({ORANGE_TIGHT, ORANGE_LOOSE})

_ORANGE_BLANK = re.compile(r"_{3,}")
# English stems, matched as the tool matches them: ASCII word boundaries, ASCII case folding.
_RETIRED_STEM = re.compile(
    rf"\bwords?{JS_SPACE}+that{JS_SPACE}+comes?{JS_SPACE}+to{JS_SPACE}+mind\b",
    re.IGNORECASE | re.ASCII,
)
_EXTENDED_STEM = re.compile(
    r"in your own words|defend your (?:answer|thinking|choice)|"
    r"explain your (?:thinking|answer|reasoning|choice)|explain why|explain how|"
    r"why do you think|describe (?:how|why|what)",
    re.IGNORECASE | re.ASCII,
)
_TIGHT_STEM = re.compile(
    rf"^{JS_SPACE}*name{JS_SPACE}+"
    r"(?:a|an|one|some|something|someone|a kind|a type|a place|a way)\b",
    re.IGNORECASE | re.ASCII,
)
_WYR_STEM = re.compile(r"^would you rather\b", re.IGNORECASE | re.ASCII)
_WYR_OR_IDIOMS = re.compile(
    r"\b(?:more or less|sooner or later|whether or not|give or take|rain or shine|"
    r"one way or another|or so)\b",
    re.IGNORECASE | re.ASCII,
)
_WYR_SEPARATOR = re.compile(r"\bor\b", re.IGNORECASE | re.ASCII)


@dataclass(frozen=True, slots=True)
class CheckCode:
    """What a check code is: its level, what fires it, its key identity, and how it is fixed."""

    code: str
    level: FindingLevel
    fix: Literal["ai", "quick"] | None
    trigger: str
    key: str


def _code(code: str, fix: Literal["ai", "quick"] | None, trigger: str, key: str) -> CheckCode:
    return CheckCode(code, "error" if code.startswith("E_") else "warning", fix, trigger, key)


CHECK_CODES: dict[str, CheckCode] = {
    c.code: c
    for c in (
        _code(
            "E_GROUNDING_SINGLE",
            "ai",
            "A `single` answer is not contained (whole words) in its section's passage.",
            "qid:NORM",
        ),
        _code(
            "E_GROUNDING_MULTIPLE",
            "ai",
            "A `multiple` answer of several words is not in the passage.",
            "qid:NORM",
        ),
        _code(
            "E_ORANGE_PARAPHRASED",
            "ai",
            "A one-word `multiple` answer is not in the passage.",
            "qid:NORM",
        ),
        _code(
            "E_ORANGE_ANSWER_IN_PROMPT",
            "ai",
            "A `multiple` prompt contains (whole words) one or more of its own answers.",
            "qid:sorted norms joined by |",
        ),
        _code(
            "E_ORANGE_NOT_A_LIST",
            "ai",
            "All answers of a `multiple` question are distinct single words found in the "
            "passage (at least 2), but no sentence holds them as one series.",
            "qid:sorted distinct norms",
        ),
        _code(
            "E_ORANGE_PARTIAL_LIST",
            "quick",
            "Same preconditions; a series holds all the answers but goes on to one more "
            "item (params.next), and no sentence holds a complete one.",
            "qid:sorted distinct norms",
        ),
        _code(
            "E_GROUNDING_NUMBER_FILL",
            "ai",
            "A `number` question without steps whose answer is not in the passage.",
            "qid:NORM",
        ),
        _code("E_BACKGROUND_IN_TEXT", "ai", "A `background` answer is in the passage.", "qid:NORM"),
        _code(
            "E_ANSWER_REVEALED_CROSS",
            "ai",
            "A prompt (not open, wyr or multiple_open) contains a `single` or `multiple` "
            "answer of another question of its section.",
            "qid:sorted leaked norms",
        ),
        _code(
            "W_ANSWER_REVEALED_OPEN",
            "ai",
            "The same, in the prompt of an open, wyr or multiple_open question.",
            "qid:sorted leaked norms",
        ),
        _code(
            "E_RETIRED_STEM", "ai", 'An `open` prompt says "word(s) that come(s) to mind".', "qid"
        ),
        _code(
            "E_SPELLING_LENGTH",
            "ai",
            "A spelling word has fewer than 6 or more than 9 letters.",
            "sectionId:NORM",
        ),
        _code(
            "E_SPELLING_DUPLICATE",
            "ai",
            "The same spelling word twice in a section or in two sections.",
            "pair(sec1,sec2)|NORM or sectionId|NORM",
        ),
        _code(
            "E_SPELLING_COLLISION",
            "ai",
            "A spelling word is inside (raw substring of norms) an answer anywhere in the "
            "lesson (multiple_open suggestions excepted).",
            "pair(sectionId,qid)|WORD|ANSWER",
        ),
        _code(
            "E_ANSWER_WORD_REUSED",
            "ai",
            "The same `single`/`multiple` answer answers two questions, or a one-word "
            "answer is a word of another question's multi-word answer.",
            "pair(q1,q2)|NORM or pair(q1,q2)|WORD|LONG",
        ),
        _code(
            "E_NUMBER_DUPLICATE",
            "ai",
            "Two `number` answers of the lesson share a numeric key.",
            "pair(q1,q2)|key",
        ),
        _code(
            "E_FORMAT_HEAVY",
            "quick",
            "A section's text has more than 3 formatted spans, or more than a tenth of its "
            "characters formatted.",
            "sorted marks:NORM of all spans",
        ),
        _code(
            "E_FORMAT_LONG_EMPHASIS",
            "quick",
            "A bold or underlined span of more than 4 words.",
            "marks:NORM of the span",
        ),
        _code(
            "E_FORMAT_LONG_ITALIC",
            "quick",
            "An italic-only span of more than 10 words.",
            "marks:NORM of the span",
        ),
        _code(
            "E_UNKNOWN_SOURCE",
            None,
            "A footnote cites a source id that is not in the lesson's sources.",
            "sourceId",
        ),
        _code(
            "W_ORANGE_MULTIWORD",
            "ai",
            "An answer of either orange kind is more than one word.",
            "qid:NORM",
        ),
        _code(
            "W_ORANGE_ANSWER_COUNT",
            "ai",
            "`multiple` with fewer than 2 or more than 4 answers; `multiple_open` with none.",
            "qid",
        ),
        _code(
            "W_ORANGE_NO_BLANK",
            "ai",
            "A `multiple` prompt without a run of 3 or more underscores.",
            "qid",
        ),
        _code(
            "W_ORANGE_ORDER",
            "quick",
            "A `multiple_open` question comes before the section's last `multiple` one.",
            "sectionId",
        ),
        _code(
            "W_WYR_SHAPE",
            "ai",
            'A wyr prompt does not start with "Would you rather", or has no or several '
            '"or" once the idioms are set aside.',
            "qid",
        ),
        _code(
            "W_QUESTION_SHAPE",
            None,
            "The section's question kinds (both orange kinds as `multiple`) are not the "
            "15-question default order.",
            "sectionId",
        ),
        _code("W_NO_QUESTION", None, "The section has no question.", "sectionId"),
        _code(
            "W_OPEN_SPLIT",
            "ai",
            "Exactly 7 `open` questions, not 4 tight then 3 extended.",
            "sectionId",
        ),
        _code(
            "W_NUMBER_NO_STEPS",
            "ai",
            "2 or more `number` questions and none has steps.",
            "sectionId",
        ),
        _code(
            "W_SPELLING_COUNT", None, "The section's spelling words are not exactly 4.", "sectionId"
        ),
        _code(
            "W_SPELLING_IN_CAPS",
            "ai",
            "A spelling word is ALL-CAPS vocabulary of its section's passage.",
            "sectionId:NORM",
        ),
        _code(
            "W_VAKT_NOT_LAST",
            "quick",
            "A VAKT block is followed by a block that is not VAKT.",
            "sectionId",
        ),
        _code("W_FORMAT_BOLD", "quick", "Any bold span in the section.", "sorted spans"),
        _code("W_FORMAT_UNDERLINE", "quick", "Any underlined span in the section.", "sorted spans"),
        _code(
            "W_FORMAT_CAPS",
            "quick",
            "A formatted span of capitals (2 in a row), spaces, apostrophes and hyphens.",
            "sorted spans",
        ),
        _code(
            "W_SECTION_COUNT", None, "The lesson does not have 6 sections.", "<count>; no section"
        ),
    )
}


@dataclass(frozen=True, slots=True)
class _SectionRun:
    """What the checks made of one section, reusable while the section is the same object.

    `raw` is the section as read; `first` the findings of its own checks run before the
    lesson-wide ones (questions, leaks, shape, spelling), `vakt` and `formatting` those run after,
    `answers` its contribution to the lesson-wide answer pool.
    """

    raw: Any
    ctx: _Section
    first: list[Finding]
    answers: list[_Answer]
    vakt: list[Finding]
    formatting: list[Finding]


@dataclass(frozen=True)
class CheckResult:
    """`validateLesson`'s result: errors and warnings, each in check order."""

    errors: list[Finding]
    warnings: list[Finding]
    # Per section, in order: what `validate_lesson(..., reuse=this)` may take over.
    sections: tuple[_SectionRun, ...] = field(default=(), repr=False, compare=False)

    @property
    def findings(self) -> list[Finding]:
        """Errors, then warnings."""
        return [*self.errors, *self.warnings]

    def find(self, key: str) -> Finding | None:
        """The finding with this key, or None."""
        return next((f for f in self.findings if f.key == key), None)


# ---- Reading the lesson ---------------------------------------------------------------------


def _truthy_id(value: Any) -> str | None:
    """An id as the tool reads `x || null`: "", 0, false and null are no id."""
    if value.__class__ is str:  # the common case, first
        return value or None
    if value is None or value is False or value == 0:
        return None
    return js_string(value)


def _items_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        text = item.get("text")
        return text if isinstance(text, str) else ""
    return ""


def answers_of(block: Mapping[str, Any]) -> list[str]:
    """A question's answers, trimmed: its `answers` list for the orange kinds, else `answer`."""
    if block.get("questionType") in ORANGE_TYPES:
        items = block.get("answers")
        if not isinstance(items, list):
            return []
        texts = [js_trim(_items_text(a)) for a in items]
        return [t for t in texts if t]
    answer = block.get("answer")
    if answer is None or answer == "":
        return []
    text = js_trim(answer if answer.__class__ is str else js_string(answer))
    return [text] if text else []


def has_steps(block: Mapping[str, Any]) -> bool:
    """A number question with steps is the word problem."""
    steps = block.get("steps")
    return isinstance(steps, list) and len(steps) > 0


def _answer_id(block: Mapping[str, Any], answer: str) -> str | None:
    items = block.get("answers")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and js_trim(_items_text(item)) == answer:
            return _truthy_id(item.get("id"))
    return None


def _letter_count(word: str) -> int:
    return len(word) if word.isalpha() else sum(1 for ch in word if ch.isalpha())


def _word_count(text: str) -> int:
    trimmed = js_trim(text)
    return len(js_split_space(trimmed)) if trimmed else 0


def open_kind(prompt: str) -> Literal["tight", "extended"]:
    """How an open question reads: extended stems first, then tight stems, then length."""
    if _EXTENDED_STEM.search(prompt):
        return "extended"
    if _TIGHT_STEM.search(prompt):
        return "tight"
    return "extended" if _word_count(prompt) > TIGHT_OPEN_MAX_WORDS else "tight"


def wyr_separators(prompt: str) -> int:
    """How many "or"s join one option to the next, once the idioms are set aside."""
    return len(_WYR_SEPARATOR.findall(_WYR_OR_IDIOMS.sub(" ", prompt)))


_EXCUSED_PROMPTS = {
    "open": "this open (pink) prompt",
    "wyr": "this would-you-rather (grape) prompt",
    ORANGE_LOOSE: "this multiple_open (orange) prompt",
}


def _about(q: _Question, item_id: Any = None, **params: Any) -> dict[str, Any]:
    """Where a question's finding points, and its params (the question's number first)."""
    return {"block_id": q.block_id, "item_id": item_id, "params": {"question": q.number, **params}}


def _quoted(values: list[str]) -> str:
    return ", ".join(f'"{v}"' for v in values)


@dataclass(slots=True)
class _Spelling:
    word: str
    block_id: str | None
    item_id: str | None


class _Question:
    """A question block as the checks read it: its identity, answers and their norms."""

    __slots__ = (
        "_prompt_norm",
        "answers",
        "block",
        "block_id",
        "id",
        "kind",
        "norms",
        "number",
        "prompt",
    )

    def __init__(self, block: Mapping[str, Any], qi: int, section_id: str) -> None:
        self.block = block
        self.kind = block.get("questionType")
        self.block_id = block.get("id")
        self.id = _truthy_id(self.block_id) or f"{section_id}#q{qi}"
        self.number = qi + 1
        self.answers = answers_of(block)
        self.norms = [normalize_text(a) for a in self.answers] if self.answers else []
        prompt = block.get("prompt")
        self.prompt = prompt if isinstance(prompt, str) else ""
        self._prompt_norm: str | None = None

    @property
    def prompt_norm(self) -> str:
        if self._prompt_norm is None:
            self._prompt_norm = normalize_text(self.prompt)
        return self._prompt_norm


class _Recall:
    """An answer the speller must retrieve, as a prompt could leak it."""

    __slots__ = ("answer", "first_word", "norm", "owner", "padded")

    def __init__(self, answer: str, norm: str, owner: _Question) -> None:
        self.answer = answer
        self.norm = norm
        self.owner = owner
        self.padded = f" {norm} "
        self.first_word = norm.split(" ", 1)[0]


@dataclass(slots=True)
class _Answer:
    text: str
    norm: str
    question_id: str
    question_type: Any
    section: int
    label: str
    block_id: str | None
    number: int

    @property
    def where(self) -> str:
        return f"{self.label}, question {self.number}"


class _Section:
    """What every check of one section reads, computed once."""

    __slots__ = (
        "_caps",
        "_list_passage",
        "blocks",
        "id",
        "label",
        "number",
        "passage",
        "plain",
        "questions",
        "section_id",
        "spelling",
        "text_blocks",
        "vakt",
    )

    def __init__(self, index: int, section: Mapping[str, Any]) -> None:
        self.number = index + 1
        self.section_id = _truthy_id(section.get("id"))
        self.id = self.section_id or f"section#{index}"
        name = section.get("name")
        name = js_trim(name) if isinstance(name, str) else ""
        self.label = f'Section {self.number} "{name}"' if name else f"Section {self.number}"
        blocks = section.get("blocks")
        self.blocks: list[Any] = blocks if isinstance(blocks, list) else []
        self.text_blocks: list[tuple[Mapping[str, Any], list[Paragraph]]] = []
        self.questions: list[_Question] = []
        self.spelling: list[_Spelling] = []
        self.vakt: list[int] = []
        self._list_passage: ListPassage | None = None
        self._caps: set[str] | None = None
        plains = []
        for at, block in enumerate(self.blocks):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "question":
                self.questions.append(_Question(block, len(self.questions), self.id))
            elif kind == "text":
                paragraphs = block_paragraphs(block)
                self.text_blocks.append((block, paragraphs))
                plains.append(paragraphs_plain(paragraphs))
            elif kind == "spelling":
                words = block.get("words")
                block_id = _truthy_id(block.get("id"))
                for w in words if isinstance(words, list) else []:
                    word = js_trim(_items_text(w))
                    if word:
                        item_id = None if isinstance(w, str) else _truthy_id(w.get("id"))
                        self.spelling.append(_Spelling(word, block_id, item_id))
            elif kind == "vakt":
                self.vakt.append(at)
        self.plain = " ".join(plains)
        self.passage = Phrases(normalize_text(self.plain))

    @property
    def list_passage(self) -> ListPassage:
        if self._list_passage is None:
            self._list_passage = ListPassage(self.plain)
        return self._list_passage

    @property
    def caps(self) -> set[str]:
        if self._caps is None:
            self._caps = caps_vocabulary(self.plain)
        return self._caps


# ---- The list check -------------------------------------------------------------------------


def _list_separated(tokens: list[str], start: int, end: int) -> bool:
    separated = False
    words = 0
    for token in tokens[start + 1 : end]:
        if token in LIST_SEPARATORS:
            separated = True
        else:
            words += 1
            if words > MAX_LIST_GAP_WORDS:
                return False
    return separated


def find_list_run(tokens: list[str], options: list[str]) -> list[tuple[str, int]] | None:
    """The first run of option hits, each list-separated from the last, covering every option."""
    wanted = set(options)
    hits = [(token, at) for at, token in enumerate(tokens) if token in wanted]
    run: list[tuple[str, int]] = []

    def covers_all() -> bool:
        return len({token for token, _ in run}) == len(wanted)

    for i, hit in enumerate(hits):
        if i > 0 and _list_separated(tokens, hits[i - 1][1], hit[1]):
            run.append(hit)
            continue
        if run and covers_all():
            return run
        run = [hit]
    return run if run and covers_all() else None


def next_list_item(sentence: Sentence, at: int) -> str | None:
    """The item a series goes on to after token `at`, as the passage wrote it, or None."""
    tokens = sentence.tokens
    tail = tokens[at + 1 : at + 4 + MAX_LIST_GAP_WORDS]
    if not tail or tail[0] not in LIST_SEPARATORS:
        return None
    conjunction = next((i for i, token in enumerate(tail) if token in CONJUNCTIONS), -1)
    if conjunction == -1:
        return None
    start = at + 2 + conjunction
    end = start
    while end < len(tokens) and tokens[end] not in LIST_SEPARATORS:
        end += 1
    if not 0 < end - start <= MAX_ITEM_WORDS:
        return None
    return " ".join(sentence.raw[start:end])


# ---- The checker ----------------------------------------------------------------------------


class _Checker:
    def __init__(self, doc: Mapping[str, Any], reuse: CheckResult | None = None) -> None:
        sections = doc.get("sections") if isinstance(doc, dict) else None
        self.doc = doc
        self.raw_sections: list[Any] = sections if isinstance(sections, list) else []
        # A section that is the very object an earlier run read, at the same place, is not read
        # again: its context and its own findings are taken over (checkFix's "after").
        runs = reuse.sections if reuse is not None else ()
        self.reused: list[_SectionRun | None] = [
            runs[i] if i < len(runs) and runs[i].raw is raw and isinstance(raw, dict) else None
            for i, raw in enumerate(self.raw_sections)
        ]
        self.sections = [
            run.ctx if run is not None else _Section(i, raw if isinstance(raw, dict) else {})
            for i, (raw, run) in enumerate(zip(self.raw_sections, self.reused, strict=True))
        ]
        self.findings: list[Finding] = []
        self.all_answers: list[_Answer] = []

    def report(
        self,
        level: FindingLevel,
        code: str,
        key: str,
        section: int | None,
        message: str,
        *,
        block_id: Any = None,
        item_id: Any = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        section_id = self.sections[section - 1].section_id if section else None
        self.findings.append(
            Finding.model_construct(
                level=level,
                code=code,
                key=f"{code}:{key}",
                section=section,
                sectionId=section_id,
                blockId=_truthy_id(block_id),
                itemId=_truthy_id(item_id),
                params=params or {},
                message=message,
            )
        )

    def error(self, code: str, key: str, section: int | None, message: str, **kw: Any) -> None:
        self.report("error", code, key, section, message, **kw)

    def warn(self, code: str, key: str, section: int | None, message: str, **kw: Any) -> None:
        self.report("warning", code, key, section, message, **kw)

    def _own(self, i: int, phase: str, check: Callable[[], None]) -> list[Finding]:
        """One section's findings of one phase: taken over from a reused run, or checked."""
        run = self.reused[i]
        if run is not None:
            found: list[Finding] = getattr(run, phase)
            self.findings.extend(found)
            return found
        start = len(self.findings)
        check()
        return self.findings[start:]

    def _first_checks(self, ctx: _Section) -> None:
        self.check_questions(ctx)
        self.check_leaks(ctx)
        self.check_shape(ctx)
        self.check_spelling(ctx)

    def run(self) -> CheckResult:
        first: list[list[Finding]] = []
        answers: list[list[_Answer]] = []
        for i, ctx in enumerate(self.sections):
            pooled = len(self.all_answers)
            reused = self.reused[i]
            if reused is not None:
                self.all_answers.extend(reused.answers)
            first.append(self._own(i, "first", partial(self._first_checks, ctx)))
            answers.append(self.all_answers[pooled:])
        self.check_spelling_duplicates_and_collisions()
        self.check_answer_reuse()
        self.check_number_duplicates()
        vakt = [
            self._own(i, "vakt", partial(self.check_vakt, ctx))
            for i, ctx in enumerate(self.sections)
        ]
        formatting = [
            self._own(i, "formatting", partial(self.check_formatting, ctx))
            for i, ctx in enumerate(self.sections)
        ]
        self.check_citations()
        if len(self.raw_sections) != SECTION_COUNT:
            count = len(self.raw_sections)
            self.warn(
                "W_SECTION_COUNT",
                str(count),
                None,
                f"The lesson has {count} section(s); the default is {SECTION_COUNT}. That is "
                "fine if the author asked for another length; otherwise add or remove sections "
                f"to reach {SECTION_COUNT}.",
                params={"count": count, "expected": SECTION_COUNT},
            )
        return CheckResult(
            [f for f in self.findings if f.level == "error"],
            [f for f in self.findings if f.level == "warning"],
            tuple(
                _SectionRun(raw, ctx, first[i], answers[i], vakt[i], formatting[i])
                for i, (raw, ctx) in enumerate(zip(self.raw_sections, self.sections, strict=True))
            ),
        )

    # -- per question --------------------------------------------------------------------------

    def check_questions(self, ctx: _Section) -> None:
        for q in ctx.questions:
            self.check_question(ctx, q)

    def check_question(self, ctx: _Section, q: _Question) -> None:
        kind = q.kind
        where = f"{ctx.label}, question {q.number}"

        if kind != ORANGE_LOOSE:
            block_id = _truthy_id(q.block_id)
            for answer, norm in zip(q.answers, q.norms, strict=True):
                self.all_answers.append(
                    _Answer(answer, norm, q.id, kind, ctx.number, ctx.label, block_id, q.number)
                )

        if kind in ORANGE_TYPES:
            for answer, norm in zip(q.answers, q.norms, strict=True):
                if is_single_word(norm):
                    continue
                self.warn(
                    "W_ORANGE_MULTIWORD",
                    f"{q.id}:{norm}",
                    ctx.number,
                    f'{where}: the answer "{answer}" is more than one word. An orange answer is '
                    "spelled letter by letter on a letterboard, so keep it to the single word "
                    "that carries the meaning.",
                    **_about(q, _answer_id(q.block, answer), answer=answer),
                )

        if kind == "single":
            for answer, norm in zip(q.answers, q.norms, strict=True):
                if norm in ctx.passage:
                    continue
                self.error(
                    "E_GROUNDING_SINGLE",
                    f"{q.id}:{norm}",
                    ctx.number,
                    f'{where}: the answer "{answer}" is not in {ctx.label}\'s passage. A single '
                    "(green) answer must appear word for word in its own section's text: "
                    f'reword the passage so it says "{answer}", or change the answer to words '
                    "the passage already uses.",
                    **_about(q, answer=answer),
                )
        elif kind == ORANGE_LOOSE:
            if not q.answers:
                self.warn(
                    "W_ORANGE_ANSWER_COUNT",
                    q.id,
                    ctx.number,
                    f"{where}: this multiple_open (orange) question suggests no answer. Give at "
                    "least one suggestion, so whoever scores the speller knows what would count "
                    "(other answers may still be right).",
                    **_about(q, count=0, open=True),
                )
        elif kind == ORANGE_TIGHT:
            self.check_tight_orange(ctx, q, where)
        elif kind == "number":
            if not has_steps(q.block):
                for answer, norm in zip(q.answers, q.norms, strict=True):
                    if norm in ctx.passage:
                        continue
                    self.error(
                        "E_GROUNDING_NUMBER_FILL",
                        f"{q.id}:{norm}",
                        ctx.number,
                        f"{where}: the answer {answer} is not in {ctx.label}'s passage. A "
                        "fill-in-the-blank number question asks for a number the passage "
                        "states: write that number into the passage, or change the answer to "
                        "one it gives. If this is meant to be the word problem, put its worked "
                        "solution in `steps`.",
                        **_about(q, answer=answer),
                    )
        elif kind == "background":
            for answer, norm in zip(q.answers, q.norms, strict=True):
                if norm not in ctx.passage:
                    continue
                self.error(
                    "E_BACKGROUND_IN_TEXT",
                    f"{q.id}:{norm}",
                    ctx.number,
                    f'{where}: the background answer "{answer}" is in {ctx.label}\'s passage. A '
                    "background (blue) question needs knowledge from outside the lesson: ask "
                    "for something the passage does not say, or turn it into a single (green) "
                    "question.",
                    **_about(q, answer=answer),
                )
        elif kind == "open":
            if _RETIRED_STEM.search(q.prompt):
                self.error(
                    "E_RETIRED_STEM",
                    q.id,
                    ctx.number,
                    f'{where}: the stem "…word that comes to mind…" is retired. Ask a tight '
                    'open question about an everyday category instead, such as "Name something '
                    'found in a kitchen" or "Name a color of a crayon".',
                    **_about(q),
                )
        elif kind == "wyr":
            prompt = js_trim(q.prompt)
            separators = wyr_separators(prompt)
            if not _WYR_STEM.search(prompt) or separators == 0:
                self.warn(
                    "W_WYR_SHAPE",
                    q.id,
                    ctx.number,
                    f"{where}: this would-you-rather prompt does not read as a choice. Start it "
                    'with "Would you rather" and offer two options joined by one "or", e.g. '
                    '"Would you rather ride a train or sail a boat?".',
                    **_about(q, ors=separators),
                )
            elif separators > 1:
                self.warn(
                    "W_WYR_SHAPE",
                    q.id,
                    ctx.number,
                    f'{where}: this would-you-rather prompt chains {separators} "or"s, which '
                    "reads as a run-on. Offer two options, or a short list joined by a single "
                    '"or" ("Would you rather visit Paris, Rome, or Lisbon?").',
                    **_about(q, ors=separators),
                )

    def check_tight_orange(self, ctx: _Section, q: _Question, where: str) -> None:
        answers = q.answers
        count = len(answers)
        if count < ORANGE_MIN_ANSWERS or count > ORANGE_MAX_ANSWERS:
            self.warn(
                "W_ORANGE_ANSWER_COUNT",
                q.id,
                ctx.number,
                f"{where}: this multiple (orange) question accepts {count} answer(s). Accept "
                f"{ORANGE_MIN_ANSWERS} to {ORANGE_MAX_ANSWERS}: the items of one list the "
                "passage states, so the speller has a real choice without hunting.",
                **_about(
                    q, count=count, open=False, min=ORANGE_MIN_ANSWERS, max=ORANGE_MAX_ANSWERS
                ),
            )
        for answer, norm in zip(answers, q.norms, strict=True):
            if norm in ctx.passage:
                continue
            if is_single_word(norm):
                self.error(
                    "E_ORANGE_PARAPHRASED",
                    f"{q.id}:{norm}",
                    ctx.number,
                    f'{where}: the accepted answer "{answer}" is not a word of {ctx.label}\'s '
                    "passage. A multiple (orange) question retrieves the items of a list the "
                    "passage states, so accept only the passage's own words: no synonym or "
                    "paraphrase, and no general knowledge (that is a background question). If "
                    "the question asks for the speller's own word (a synonym, a definition), "
                    "make it a multiple_open question, whose answers are suggestions only.",
                    **_about(q, _answer_id(q.block, answer), answer=answer),
                )
            else:
                self.error(
                    "E_GROUNDING_MULTIPLE",
                    f"{q.id}:{norm}",
                    ctx.number,
                    f'{where}: the accepted answer "{answer}" is not in {ctx.label}\'s passage. '
                    "Use the passage's own wording, ideally one concrete word the speller can "
                    "find in the text.",
                    **_about(q, _answer_id(q.block, answer), answer=answer),
                )

        prompt = Phrases(q.prompt_norm)
        given = [a for a, norm in zip(answers, q.norms, strict=True) if norm in prompt]
        if given:
            key = "|".join(js_sorted(normalize_text(a) for a in given))
            self.error(
                "E_ORANGE_ANSWER_IN_PROMPT",
                f"{q.id}:{key}",
                ctx.number,
                f"{where}: the prompt already contains its accepted answer"
                f"{'' if len(given) == 1 else 's'} ({_quoted(given)}), so there is nothing left "
                "to recall. Quote the passage's sentence with the list replaced by a blank "
                'instead: "The river carries ______. Name one thing it carries."',
                **_about(q, answers=given, count=len(given)),
            )
        if not _ORANGE_BLANK.search(q.prompt):
            self.warn(
                "W_ORANGE_NO_BLANK",
                q.id,
                ctx.number,
                f"{where}: the prompt has no blank. Quote the passage's sentence with its list "
                'blanked out as ______ ("The blast threw out ______. Name one."), so the speller '
                "knows which of the section's lists is meant.",
                **_about(q),
            )

        options = [n for n in q.norms if is_single_word(n) and n in ctx.passage]
        distinct = list(dict.fromkeys(options))
        if len(distinct) < ORANGE_MIN_ANSWERS or len(distinct) != count:
            return
        key = "|".join(js_sorted(distinct))
        partial: str | None = None
        for sentence in ctx.list_passage.sentences_with_all(distinct):
            run = find_list_run(sentence.tokens, distinct)
            if run is None:
                continue
            item = next_list_item(sentence, run[-1][1])
            if item is None:
                return
            if partial is None:
                partial = item
        if partial is not None:
            self.error(
                "E_ORANGE_PARTIAL_LIST",
                f"{q.id}:{key}",
                ctx.number,
                f"{where}: the passage's list goes on past the accepted answers "
                f'{_quoted(answers)} to "{partial}". Accept every item of the list the prompt '
                f'blanks out (add "{partial}" to the answers), or take "{partial}" out of the '
                "list in the passage; otherwise a speller who names it is marked wrong.",
                **_about(q, answers=answers, next=partial),
            )
        else:
            self.error(
                "E_ORANGE_NOT_A_LIST",
                f"{q.id}:{key}",
                ctx.number,
                f"{where}: the accepted answers {_quoted(answers)} are in {ctx.label}'s passage "
                "but never together as one list. A multiple (orange) question retrieves a "
                'series the passage states: write them into one sentence as a list ("It threw '
                'out rock, gas, and ash"), then quote that sentence with the list blanked out. '
                'Two words of one phrase ("the Pacific Ocean") are not a list. A question about '
                "the speller's own words belongs to multiple_open instead.",
                **_about(q, answers=answers),
            )

    # -- one prompt must not hand over another question's answer --------------------------------

    def check_leaks(self, ctx: _Section) -> None:
        # Recall answers: what the speller must retrieve (single and multiple answers only).
        recall = [
            _Recall(answer, norm, q)
            for q in ctx.questions
            if q.kind in ("single", ORANGE_TIGHT)
            for answer, norm in zip(q.answers, q.norms, strict=True)
            if norm
        ]
        if not recall:
            return
        # Every word of a prompt's norm is a substring of the upper-cased prompt unless a
        # thousands comma was dropped. So an answer whose first word is in none of the section's
        # upper-cased prompts leaks nowhere: one search per answer spares most prompts.
        prompts = "\0".join(q.prompt.upper() for q in ctx.questions)
        commas = "," in prompts
        recall = [e for e in recall if commas or e.first_word in prompts]
        if not recall:
            return
        for q in ctx.questions:
            if "," not in q.prompt:
                upper = q.prompt.upper()
                candidates = [e for e in recall if e.first_word in upper and e.owner.id != q.id]
            else:
                candidates = [e for e in recall if e.owner.id != q.id]
            if not candidates:
                continue
            haystack = f" {q.prompt_norm} "
            leaked: list[_Recall] = []
            seen: set[str] = set()
            for entry in candidates:
                if entry.norm in seen or entry.padded not in haystack:
                    continue
                seen.add(entry.norm)
                leaked.append(entry)
            if leaked:
                self.report_leak(ctx, q, leaked)

    def report_leak(self, ctx: _Section, q: _Question, leaked: list[_Recall]) -> None:
        named = ", ".join(f'"{e.answer}" (the answer to question {e.owner.number})' for e in leaked)
        key = f"{q.id}:{'|'.join(js_sorted(e.norm for e in leaked))}"
        detail: dict[str, Any] = {
            "block_id": q.block_id,
            "params": {
                "question": q.number,
                "questionType": q.kind,
                "leaks": [{"answer": e.answer, "question": e.owner.number} for e in leaked],
            },
        }
        if q.kind in _EXCUSED_PROMPTS:
            self.warn(
                "W_ANSWER_REVEALED_OPEN",
                key,
                ctx.number,
                f"{ctx.label}, question {q.number}: {_EXCUSED_PROMPTS[q.kind]} names {named}, so "
                "the speller can read that answer off it. Keep it only if the question has to "
                "name that word (its subject, or the word a synonym is asked for); otherwise "
                "reword the prompt around it.",
                **detail,
            )
        else:
            self.error(
                "E_ANSWER_REVEALED_CROSS",
                key,
                ctx.number,
                f"{ctx.label}, question {q.number}: the prompt names {named}, so the speller can "
                "copy it instead of recalling it. Reword this prompt around that word, e.g. "
                '"the British Isles" where the other answer is BRITAIN.',
                **detail,
            )

    # -- section shape ---------------------------------------------------------------------------

    def check_shape(self, ctx: _Section) -> None:
        questions = ctx.questions
        if not questions:
            self.warn(
                "W_NO_QUESTION",
                ctx.id,
                ctx.number,
                f"{ctx.label} has no question. Each section ends with its own questions about "
                "its own passage: add them, or move them here from a separate quiz section.",
            )
        else:
            shape = [q.kind for q in questions]
            slots = tuple(ORANGE_TIGHT if t in ORANGE_TYPES else t for t in shape)
            if slots != QUESTION_ORDER:
                order = ", ".join("" if t is None else js_string(t) for t in shape)
                self.warn(
                    "W_QUESTION_SHAPE",
                    ctx.id,
                    ctx.number,
                    f"{ctx.label} has {len(shape)} question(s) in the order {order}. The default "
                    f"is {len(QUESTION_ORDER)}: 3 single, 2 number, 2 orange (multiple or "
                    f"multiple_open), 1 background, then {TIGHT_OPENS} tight and "
                    f"{EXTENDED_OPENS} extended open questions.",
                    block_id=questions[0].block_id,
                    params={"count": len(shape)},
                )
            orange = [q for q in questions if q.kind in ORANGE_TYPES]
            first_loose = next((i for i, q in enumerate(orange) if q.kind == ORANGE_LOOSE), -1)
            last_tight = max(
                (i for i, q in enumerate(orange) if q.kind == ORANGE_TIGHT), default=-1
            )
            if first_loose != -1 and last_tight > first_loose:
                self.warn(
                    "W_ORANGE_ORDER",
                    ctx.id,
                    ctx.number,
                    f"{ctx.label}: a multiple_open question comes before a multiple one. Ask the "
                    "tight orange question (multiple, a list the passage states) first and the "
                    "loose one (multiple_open) after it.",
                    block_id=orange[first_loose].block_id,
                )
            opens = [q for q in questions if q.kind == "open"]
            if len(opens) == TIGHT_OPENS + EXTENDED_OPENS:
                kinds = [open_kind(q.prompt) for q in opens]
                if any(k != "tight" for k in kinds[:TIGHT_OPENS]) or any(
                    k != "extended" for k in kinds[TIGHT_OPENS:]
                ):
                    self.warn(
                        "W_OPEN_SPLIT",
                        ctx.id,
                        ctx.number,
                        f"{ctx.label}: its {len(opens)} open (pink) questions do not read as "
                        f"{TIGHT_OPENS} tight ones followed by {EXTENDED_OPENS} extended ones. "
                        f'Make the first {TIGHT_OPENS} quick recall from everyday life ("Name '
                        f'something found in a hospital"), and the last {EXTENDED_OPENS} ask '
                        'for a full sentence ("In your own words, explain…", "…Defend your '
                        'answer.").',
                        block_id=opens[0].block_id,
                        params={"tight": TIGHT_OPENS, "extended": EXTENDED_OPENS},
                    )
            numbers = [q for q in questions if q.kind == "number"]
            if len(numbers) >= 2 and not any(has_steps(q.block) for q in numbers):
                self.warn(
                    "W_NUMBER_NO_STEPS",
                    ctx.id,
                    ctx.number,
                    f"{ctx.label}: none of its number (purple) questions has steps. The second "
                    "one is the word problem: put its worked solution in `steps`, one step per "
                    "item, rather than in the prompt.",
                    block_id=numbers[1].block_id,
                )
        if len(ctx.spelling) != SPELLING_WORDS_PER_SECTION:
            first = next(
                (b for b in ctx.blocks if isinstance(b, dict) and b.get("type") == "spelling"),
                None,
            )
            self.warn(
                "W_SPELLING_COUNT",
                ctx.id,
                ctx.number,
                f"{ctx.label} has {len(ctx.spelling)} spelling word(s); the default is exactly "
                f"{SPELLING_WORDS_PER_SECTION} per section.",
                block_id=first.get("id") if first is not None else None,
                params={"count": len(ctx.spelling), "expected": SPELLING_WORDS_PER_SECTION},
            )

    def check_spelling(self, ctx: _Section) -> None:
        for entry in ctx.spelling:
            word = entry.word
            letters = _letter_count(word)
            norm = normalize_text(word)
            if letters < SPELLING_MIN_LETTERS or letters > SPELLING_MAX_LETTERS:
                self.error(
                    "E_SPELLING_LENGTH",
                    f"{ctx.id}:{norm}",
                    ctx.number,
                    f'{ctx.label}: the spelling word "{word}" has {letters} letters; spelling '
                    f"words have {SPELLING_MIN_LETTERS} to {SPELLING_MAX_LETTERS}. Replace it "
                    "with a word of that length on the section's theme.",
                    block_id=entry.block_id,
                    item_id=entry.item_id,
                    params={
                        "word": word,
                        "letters": letters,
                        "min": SPELLING_MIN_LETTERS,
                        "max": SPELLING_MAX_LETTERS,
                    },
                )
            if norm in ctx.caps:
                self.warn(
                    "W_SPELLING_IN_CAPS",
                    f"{ctx.id}:{norm}",
                    ctx.number,
                    f'{ctx.label}: the spelling word "{word}" is also ALL-CAPS vocabulary of '
                    "the passage. The warm-up words are a separate list: pick another word on "
                    "the same theme.",
                    block_id=entry.block_id,
                    item_id=entry.item_id,
                    params={"word": word},
                )

    # -- lesson-wide collisions ------------------------------------------------------------------

    def check_spelling_duplicates_and_collisions(self) -> None:
        seen: dict[str, tuple[_Section, _Spelling]] = {}
        for ctx in self.sections:
            for entry in ctx.spelling:
                norm = normalize_text(entry.word)
                first = seen.get(norm)
                if first is not None and first[0].number != ctx.number:
                    self.error(
                        "E_SPELLING_DUPLICATE",
                        f"{pair_key(first[0].id, ctx.id)}|{norm}",
                        ctx.number,
                        f'The spelling word "{entry.word}" is used in both section '
                        f"{first[0].number} and section {ctx.number}. Give {ctx.label} a "
                        "spelling word of its own.",
                        block_id=entry.block_id,
                        item_id=entry.item_id,
                        params={"word": entry.word, "otherSection": first[0].number},
                    )
                elif first is not None:
                    self.error(
                        "E_SPELLING_DUPLICATE",
                        f"{ctx.id}|{norm}",
                        ctx.number,
                        f'{ctx.label} lists the spelling word "{entry.word}" twice. Replace one '
                        "of them with another word on the section's theme.",
                        block_id=entry.block_id,
                        item_id=entry.item_id,
                        params={"word": entry.word},
                    )
                else:
                    seen[norm] = (ctx, entry)
        if not seen:
            return
        # One string of every answer's norm: a spelling word is found with one C-level search
        # per occurrence instead of one test per (word, answer) pair. "\0" never is in a norm.
        answers = self.all_answers
        starts: list[int] = []
        parts: list[str] = []
        offset = 0
        for answer in answers:
            starts.append(offset)
            parts.append(answer.norm)
            offset += len(answer.norm) + 1
        joined = "\0".join(parts)
        for norm, (ctx, entry) in seen.items():
            if norm:
                hits: list[int] = []
                at = joined.find(norm)
                while at != -1:
                    owner = bisect_right(starts, at) - 1
                    if not hits or hits[-1] != owner:
                        hits.append(owner)
                    at = joined.find(norm, starts[owner] + len(answers[owner].norm) + 1)
            else:
                hits = list(range(len(answers)))  # "".includes("") holds for every answer
            for i in hits:
                answer = answers[i]
                self.error(
                    "E_SPELLING_COLLISION",
                    f"{pair_key(ctx.id, answer.question_id)}|{norm}|{answer.norm}",
                    ctx.number,
                    f'Section {ctx.number}\'s spelling word "{entry.word}" is inside the answer '
                    f'"{answer.text}" ({answer.where}), so the warm-up gives that answer away. '
                    "Change the spelling word to another on the theme, or change the answer.",
                    block_id=entry.block_id,
                    item_id=entry.item_id,
                    params={
                        "word": entry.word,
                        "answer": answer.text,
                        "otherSection": answer.section,
                        "otherQuestion": answer.number,
                    },
                )

    def check_answer_reuse(self) -> None:
        reusable = [a for a in self.all_answers if a.question_type in ("single", ORANGE_TIGHT)]
        by_answer: dict[str, _Answer] = {}
        for answer in reusable:
            if not answer.norm:
                continue
            seen = by_answer.get(answer.norm)
            if seen is None:
                by_answer[answer.norm] = answer
                continue
            if seen.question_id == answer.question_id:
                continue
            self.error(
                "E_ANSWER_WORD_REUSED",
                f"{pair_key(seen.question_id, answer.question_id)}|{answer.norm}",
                answer.section,
                f'The answer "{answer.text}" answers two questions ({seen.where} and '
                f"{answer.where}). An answer word belongs to one question in the whole lesson: "
                "give this question a different word (and ground it in its passage).",
                block_id=answer.block_id,
                params={
                    "answer": answer.text,
                    "question": answer.number,
                    "otherSection": seen.section,
                    "otherQuestion": seen.number,
                },
            )
        # Words of the multi-word answers, each pointing at the answers holding it (once each).
        containing: dict[str, list[int]] = {}
        for i, other in enumerate(reusable):
            words = words_of(other.norm)
            if len(words) < 2:
                continue
            for word in dict.fromkeys(words):
                containing.setdefault(word, []).append(i)
        for norm, answer in by_answer.items():
            if not is_single_word(norm):
                continue
            for i in containing.get(norm, ()):
                other = reusable[i]
                if other.question_id == answer.question_id:
                    continue
                self.error(
                    "E_ANSWER_WORD_REUSED",
                    f"{pair_key(answer.question_id, other.question_id)}|{norm}|{other.norm}",
                    answer.section,
                    f'The one-word answer "{answer.text}" ({answer.where}) is also a word of '
                    f'the answer "{other.text}" ({other.where}). Change one of the two so no '
                    "answer word turns up inside another question's answer.",
                    block_id=answer.block_id,
                    params={
                        "answer": answer.text,
                        "question": answer.number,
                        "otherAnswer": other.text,
                        "otherSection": other.section,
                        "otherQuestion": other.number,
                    },
                )

    def check_number_duplicates(self) -> None:
        seen: dict[str, tuple[_Section, _Question]] = {}
        for ctx in self.sections:
            for q in ctx.questions:
                if q.kind != "number":
                    continue
                for answer in q.answers:
                    key = numeric_key(answer)
                    first = seen.get(key)
                    if first is None:
                        seen[key] = (ctx, q)
                        continue
                    place = (
                        f"both in section {ctx.number}"
                        if first[0].number == ctx.number
                        else f"section {first[0].number} and section {ctx.number}"
                    )
                    self.error(
                        "E_NUMBER_DUPLICATE",
                        f"{pair_key(first[1].id, q.id)}|{key}",
                        ctx.number,
                        f"{ctx.label}, question {q.number}: the number {answer} already answers "
                        f"another number question ({place}). Every numeric answer of a lesson "
                        "is different: rework this problem so it lands on another number.",
                        block_id=q.block_id,
                        params={
                            "answer": answer,
                            "question": q.number,
                            "otherSection": first[0].number,
                            "otherQuestion": first[1].number,
                        },
                    )

    def check_vakt(self, ctx: _Section) -> None:
        if not ctx.vakt:
            return
        # The first VAKT block that has a block of another kind somewhere after it.
        vakt = set(ctx.vakt)
        last_other = next((i for i in range(len(ctx.blocks) - 1, -1, -1) if i not in vakt), -1)
        misplaced = next((i for i in ctx.vakt if i < last_other), -1)
        if misplaced == -1:
            return
        self.warn(
            "W_VAKT_NOT_LAST",
            ctx.id,
            ctx.number,
            f"{ctx.label} has a VAKT activity at block {misplaced + 1} with other blocks after "
            "it. Move the activity to the end of the section, after its questions.",
            block_id=ctx.blocks[misplaced].get("id"),
        )

    # -- formatting and footnotes ----------------------------------------------------------------

    def check_formatting(self, ctx: _Section) -> None:
        spans: list[tuple[Span, Any]] = []
        total = 0
        for block, paragraphs in ctx.text_blocks:
            found, chars = formatted_spans(paragraphs)
            spans.extend((span, block.get("id")) for span in found)
            total += chars
        if not spans:
            return

        def key_of(chosen: list[tuple[Span, Any]]) -> str:
            return "|".join(
                js_sorted(f"{'+'.join(s.marks)}:{normalize_text(s.text)}" for s, _ in chosen)
            )

        def detail(chosen: list[tuple[Span, Any]], **params: Any) -> dict[str, Any]:
            return {
                "block_id": chosen[0][1],
                "params": {"spans": [s.text for s, _ in chosen], **params},
            }

        formatted = sum(utf16_len(s.text) for s, _ in spans)
        count = len(spans)
        if count > FORMAT_MAX_SPANS or formatted / max(total, 1) > FORMAT_MAX_SHARE:
            shown = _quoted([s.text for s, _ in spans[:4]]) + (", ..." if count > 4 else "")
            self.error(
                "E_FORMAT_HEAVY",
                key_of(spans),
                ctx.number,
                f"{ctx.label}'s text has {count} formatted span{'' if count == 1 else 's'} "
                f"({shown}). Keep lesson prose plain: ALL CAPS already marks the vocabulary, and "
                "scattered formatting reads as machine-written. Keep only what a convention "
                "needs (italics for a title or a scientific name), at most "
                f"{FORMAT_MAX_SPANS} spans and a tenth of the text; remove the rest.",
                **detail(
                    spans, count=count, max=FORMAT_MAX_SPANS, tooMany=count > FORMAT_MAX_SPANS
                ),
            )
        for span, block_id in spans:
            words = len(js_split_space(span.text))
            emphatic = "bold" in span.marks or "underline" in span.marks
            if emphatic and words > FORMAT_MAX_EMPHASIS_WORDS:
                how = "bold" if "bold" in span.marks else "underlined"
                self.error(
                    "E_FORMAT_LONG_EMPHASIS",
                    key_of([(span, block_id)]),
                    ctx.number,
                    f'{ctx.label}: "{span.text}" is {how} across {words} words. Do not bold or '
                    "underline a phrase or a sentence: write it plain and let the wording carry "
                    "the weight.",
                    **detail(
                        [(span, block_id)], text=span.text, words=words, bold="bold" in span.marks
                    ),
                )
            elif not emphatic and words > FORMAT_MAX_ITALIC_WORDS:
                self.error(
                    "E_FORMAT_LONG_ITALIC",
                    key_of([(span, block_id)]),
                    ctx.number,
                    f'{ctx.label}: "{span.text}" is italic across {words} words. Italics are for '
                    "a title or a term, not a sentence: write it plain.",
                    **detail([(span, block_id)], text=span.text, words=words),
                )
        bold = [s for s in spans if "bold" in s[0].marks]
        if bold:
            self.warn(
                "W_FORMAT_BOLD",
                key_of(bold),
                ctx.number,
                f"{ctx.label} uses bold ({_quoted([s.text for s, _ in bold])}). A lesson hardly "
                "ever needs it: ALL CAPS already marks the words being learned. Remove the bold "
                "unless the author asked for it.",
                **detail(bold),
            )
        underlined = [s for s in spans if "underline" in s[0].marks]
        if underlined:
            self.warn(
                "W_FORMAT_UNDERLINE",
                key_of(underlined),
                ctx.number,
                f"{ctx.label} uses underlining ({_quoted([s.text for s, _ in underlined])}). On a "
                "screen it reads as a link that goes nowhere: remove it unless the author asked "
                "for it.",
                **detail(underlined),
            )
        caps = [s for s in spans if is_caps_span(s[0].text)]
        if caps:
            self.warn(
                "W_FORMAT_CAPS",
                key_of(caps),
                ctx.number,
                f"{ctx.label} formats ALL-CAPS vocabulary ({_quoted([s.text for s, _ in caps])}). "
                "The capitals already mark it: remove the formatting.",
                **detail(caps),
            )

    def check_citations(self) -> None:
        sources = self.doc.get("sources") if isinstance(self.doc, dict) else None
        known = {
            s.get("id")
            for s in (sources if isinstance(sources, list) else [])
            if isinstance(s, dict)
        }
        for ctx in self.sections:
            for block, paragraphs in ctx.text_blocks:
                for note in footnotes(paragraphs):
                    if not note.source_id or note.source_id in known:
                        continue
                    self.error(
                        "E_UNKNOWN_SOURCE",
                        note.source_id,
                        ctx.number,
                        f'{ctx.label} cites "@{note.source_id}", which is not one of the '
                        "lesson's sources. Add a source with that id to `sources`, or correct "
                        "the id in the ^[@id] footnote.",
                        block_id=block.get("id"),
                        params={"sourceId": note.source_id},
                    )


def validate_lesson(doc: Mapping[str, Any], *, reuse: CheckResult | None = None) -> CheckResult:
    """Every check on a lesson: `{errors, warnings}` as the tool's validateLesson gives them.

    `reuse` is the result of an earlier run on a lesson this one was derived from without
    changing anything in place (as `apply_fix_operations` derives a fix): a section that is the
    very same object at the same place keeps that run's reading and its own findings, and only
    changed sections and the lesson-wide checks run again. The result is the same as without
    `reuse`; checkFix's "after" of a one-section fix costs a fraction of a full pass.
    """
    return _Checker(doc, reuse).run()


def new_findings(before: list[Finding], after: list[Finding]) -> list[Finding]:
    """The findings of `after` whose key is not among the keys of `before` (newFindings)."""
    known = {f.key for f in before}
    return [f for f in after if f.key not in known]


def is_formatting_finding(finding: Finding) -> bool:
    """A finding of the formatting checks (E_FORMAT_*, W_FORMAT_*)."""
    return finding.code.startswith(("E_FORMAT_", "W_FORMAT_"))


__all__ = [
    "CHECK_CODES",
    "CheckCode",
    "CheckResult",
    "answers_of",
    "find_list_run",
    "has_steps",
    "is_formatting_finding",
    "new_findings",
    "next_list_item",
    "open_kind",
    "validate_lesson",
    "wyr_separators",
]
