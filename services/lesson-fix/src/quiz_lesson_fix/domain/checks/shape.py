"""The shape of a section and of the lesson: the default order of 15 questions, 4 spelling
words, 6 sections (apps/mcp/src/standards.md and the constants of lessonChecks.js).

Per section (`check_shape`): W_NO_QUESTION, or W_QUESTION_SHAPE, W_ORANGE_ORDER, W_OPEN_SPLIT
and W_NUMBER_NO_STEPS; then W_SPELLING_COUNT. For the lesson (`check_section_count`):
W_SECTION_COUNT, the one finding with no section. All warnings: a lesson may deviate on purpose.
"""

from __future__ import annotations

import re
from typing import Literal

from quiz_lesson_fix.domain.checks.codes import Findings, counted, declare
from quiz_lesson_fix.domain.checks.reading import (
    ORANGE_LOOSE,
    ORANGE_TIGHT,
    ORANGE_TYPES,
    Question,
    Section,
    has_steps,
)
from quiz_lesson_fix.domain.jsval import JS_SPACE, js_split_space, js_string, js_trim

SECTION_COUNT = 6
SPELLING_WORDS_PER_SECTION = 4
QUESTION_ORDER = (
    ("single",) * 3 + ("number",) * 2 + ("multiple",) * 2 + ("background",) + ("open",) * 7
)
TIGHT_OPENS = 4
EXTENDED_OPENS = 3
TIGHT_OPEN_MAX_WORDS = 12

# English stems, matched as the tool matches them: ASCII word boundaries, ASCII case folding.
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

NO_QUESTION = declare("W_NO_QUESTION", None, "The section has no question.", "sectionId")
QUESTION_SHAPE = declare(
    "W_QUESTION_SHAPE",
    None,
    "The section's question kinds (both orange kinds as `multiple`) are not the "
    "15-question default order.",
    "sectionId",
)
ORANGE_ORDER = declare(
    "W_ORANGE_ORDER",
    "quick",
    "A `multiple_open` question comes before the section's last `multiple` one.",
    "sectionId",
)
OPEN_SPLIT = declare(
    "W_OPEN_SPLIT",
    "ai",
    "Exactly 7 `open` questions, not 4 tight then 3 extended.",
    "sectionId",
)
NUMBER_NO_STEPS = declare(
    "W_NUMBER_NO_STEPS",
    "ai",
    "2 or more `number` questions and none has steps.",
    "sectionId",
)
SPELLING_COUNT = declare(
    "W_SPELLING_COUNT", None, "The section's spelling words are not exactly 4.", "sectionId"
)
SECTION_COUNT_CODE = declare(
    "W_SECTION_COUNT", None, "The lesson does not have 6 sections.", "<count>; no section"
)
CODES = (
    ORANGE_ORDER,
    QUESTION_SHAPE,
    NO_QUESTION,
    OPEN_SPLIT,
    NUMBER_NO_STEPS,
    SPELLING_COUNT,
    SECTION_COUNT_CODE,
)


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


def check_shape(ctx: Section, out: Findings) -> None:
    """The section's questions against the default order, then its spelling word count."""
    questions = ctx.questions
    if not questions:
        out.add(
            NO_QUESTION,
            ctx.id,
            ctx.number,
            f"{ctx.label} has no question. Each section ends with its own questions about "
            "its own passage: add them, or move them here from a separate quiz section.",
        )
    else:
        _check_order(ctx, questions, out)
        _check_orange_order(ctx, questions, out)
        _check_open_split(ctx, questions, out)
        _check_number_steps(ctx, questions, out)
    _check_spelling_count(ctx, out)


def _check_order(ctx: Section, questions: list[Question], out: Findings) -> None:
    shape = [q.kind for q in questions]
    slots = tuple(ORANGE_TIGHT if t in ORANGE_TYPES else t for t in shape)
    if slots != QUESTION_ORDER:
        order = ", ".join("" if t is None else js_string(t) for t in shape)
        out.add(
            QUESTION_SHAPE,
            ctx.id,
            ctx.number,
            f"{ctx.label} has {counted(len(shape), 'question')} in the order {order}. The default "
            f"is {len(QUESTION_ORDER)}: 3 single, 2 number, 2 orange (multiple or "
            f"multiple_open), 1 background, then {TIGHT_OPENS} tight and "
            f"{EXTENDED_OPENS} extended open questions.",
            block_id=questions[0].block_id,
            params={"count": len(shape)},
        )


def _check_orange_order(ctx: Section, questions: list[Question], out: Findings) -> None:
    orange = [q for q in questions if q.kind in ORANGE_TYPES]
    first_loose = next((i for i, q in enumerate(orange) if q.kind == ORANGE_LOOSE), -1)
    last_tight = max((i for i, q in enumerate(orange) if q.kind == ORANGE_TIGHT), default=-1)
    if first_loose != -1 and last_tight > first_loose:
        out.add(
            ORANGE_ORDER,
            ctx.id,
            ctx.number,
            f"{ctx.label}: a multiple_open question comes before a multiple one. Ask the "
            "tight orange question (multiple, a list the passage states) first and the "
            "loose one (multiple_open) after it.",
            block_id=orange[first_loose].block_id,
        )


def _check_open_split(ctx: Section, questions: list[Question], out: Findings) -> None:
    opens = [q for q in questions if q.kind == "open"]
    if len(opens) != TIGHT_OPENS + EXTENDED_OPENS:
        return
    kinds = [open_kind(q.prompt) for q in opens]
    if any(k != "tight" for k in kinds[:TIGHT_OPENS]) or any(
        k != "extended" for k in kinds[TIGHT_OPENS:]
    ):
        out.add(
            OPEN_SPLIT,
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


def _check_number_steps(ctx: Section, questions: list[Question], out: Findings) -> None:
    numbers = [q for q in questions if q.kind == "number"]
    if len(numbers) >= 2 and not any(has_steps(q.block) for q in numbers):
        out.add(
            NUMBER_NO_STEPS,
            ctx.id,
            ctx.number,
            f"{ctx.label}: none of its number (purple) questions has steps. The second "
            "one is the word problem: put its worked solution in `steps`, one step per "
            "item, rather than in the prompt.",
            block_id=numbers[1].block_id,
        )


def _check_spelling_count(ctx: Section, out: Findings) -> None:
    if len(ctx.spelling) == SPELLING_WORDS_PER_SECTION:
        return
    first = next(
        (b for b in ctx.blocks if isinstance(b, dict) and b.get("type") == "spelling"),
        None,
    )
    out.add(
        SPELLING_COUNT,
        ctx.id,
        ctx.number,
        f"{ctx.label} has {counted(len(ctx.spelling), 'spelling word')}; the default is exactly "
        f"{SPELLING_WORDS_PER_SECTION} per section.",
        block_id=first.get("id") if first is not None else None,
        params={"count": len(ctx.spelling), "expected": SPELLING_WORDS_PER_SECTION},
    )


def check_section_count(sections: list[Section], out: Findings) -> None:
    """W_SECTION_COUNT: the lesson has SECTION_COUNT sections."""
    count = len(sections)
    if count == SECTION_COUNT:
        return
    out.add(
        SECTION_COUNT_CODE,
        str(count),
        None,
        f"The lesson has {counted(count, 'section')}; the default is {SECTION_COUNT}. That is "
        "fine if the author asked for another length; otherwise add or remove sections "
        f"to reach {SECTION_COUNT}.",
        params={"count": count, "expected": SECTION_COUNT},
    )
