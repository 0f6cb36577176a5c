"""The per-question checks: each question against its own section's passage (FACTS B).

`check_questions` runs, question by question: W_ORANGE_MULTIWORD for either orange kind, then
the checks of the question's kind — `single` (E_GROUNDING_SINGLE), `number` without steps
(E_GROUNDING_NUMBER_FILL), `background` (E_BACKGROUND_IN_TEXT), `open` (E_RETIRED_STEM),
`wyr` (W_WYR_SHAPE), and the orange kinds (`orange.py`). The stems are English, as in the tool,
matched as it matches them: ASCII word boundaries, ASCII case folding.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from quiz_lesson_fix.domain.checks import orange
from quiz_lesson_fix.domain.checks.codes import Findings, about, declare
from quiz_lesson_fix.domain.checks.reading import (
    ORANGE_LOOSE,
    ORANGE_TIGHT,
    ORANGE_TYPES,
    Question,
    Section,
    has_steps,
)
from quiz_lesson_fix.domain.jsval import JS_SPACE, js_trim

_RETIRED_STEM = re.compile(
    rf"\bwords?{JS_SPACE}+that{JS_SPACE}+comes?{JS_SPACE}+to{JS_SPACE}+mind\b",
    re.IGNORECASE | re.ASCII,
)
_WYR_STEM = re.compile(r"^would you rather\b", re.IGNORECASE | re.ASCII)
_WYR_OR_IDIOMS = re.compile(
    r"\b(?:more or less|sooner or later|whether or not|give or take|rain or shine|"
    r"one way or another|or so)\b",
    re.IGNORECASE | re.ASCII,
)
_WYR_SEPARATOR = re.compile(r"\bor\b", re.IGNORECASE | re.ASCII)

GROUNDING_SINGLE = declare(
    "E_GROUNDING_SINGLE",
    "ai",
    "A `single` answer is not contained (whole words) in its section's passage.",
    "qid:NORM",
)
GROUNDING_NUMBER_FILL = declare(
    "E_GROUNDING_NUMBER_FILL",
    "ai",
    "A `number` question without steps whose answer is not in the passage.",
    "qid:NORM",
)
BACKGROUND_IN_TEXT = declare(
    "E_BACKGROUND_IN_TEXT", "ai", "A `background` answer is in the passage.", "qid:NORM"
)
RETIRED_STEM = declare(
    "E_RETIRED_STEM", "ai", 'An `open` prompt says "word(s) that come(s) to mind".', "qid"
)
WYR_SHAPE = declare(
    "W_WYR_SHAPE",
    "ai",
    'A wyr prompt does not start with "Would you rather", or has no or several '
    '"or" once the idioms are set aside.',
    "qid",
)
CODES = (GROUNDING_SINGLE, GROUNDING_NUMBER_FILL, BACKGROUND_IN_TEXT, RETIRED_STEM, WYR_SHAPE)


def wyr_separators(prompt: str) -> int:
    """How many "or"s join one option to the next, once the idioms are set aside."""
    return len(_WYR_SEPARATOR.findall(_WYR_OR_IDIOMS.sub(" ", prompt)))


def check_questions(ctx: Section, out: Findings) -> None:
    """Every question of the section, in order."""
    for q in ctx.questions:
        where = f"{ctx.label}, question {q.number}"
        if q.kind in ORANGE_TYPES:
            orange.check_multiword(ctx, q, where, out)
        check = _BY_KIND.get(q.kind) if isinstance(q.kind, str) else None
        if check is not None:
            check(ctx, q, where, out)


def _check_single(ctx: Section, q: Question, where: str, out: Findings) -> None:
    for answer, norm in zip(q.answers, q.norms, strict=True):
        if norm in ctx.passage:
            continue
        out.add(
            GROUNDING_SINGLE,
            f"{q.id}:{norm}",
            ctx.number,
            f'{where}: the answer "{answer}" is not in {ctx.label}\'s passage. A single '
            "(green) answer must appear word for word in its own section's text: "
            f'reword the passage so it says "{answer}", or change the answer to words '
            "the passage already uses.",
            **about(q, answer=answer),
        )


def _check_number(ctx: Section, q: Question, where: str, out: Findings) -> None:
    if has_steps(q.block):
        return
    for answer, norm in zip(q.answers, q.norms, strict=True):
        if norm in ctx.passage:
            continue
        out.add(
            GROUNDING_NUMBER_FILL,
            f"{q.id}:{norm}",
            ctx.number,
            f"{where}: the answer {answer} is not in {ctx.label}'s passage. A "
            "fill-in-the-blank number question asks for a number the passage "
            "states: write that number into the passage, or change the answer to "
            "one it gives. If this is meant to be the word problem, put its worked "
            "solution in `steps`.",
            **about(q, answer=answer),
        )


def _check_background(ctx: Section, q: Question, where: str, out: Findings) -> None:
    for answer, norm in zip(q.answers, q.norms, strict=True):
        if norm not in ctx.passage:
            continue
        out.add(
            BACKGROUND_IN_TEXT,
            f"{q.id}:{norm}",
            ctx.number,
            f'{where}: the background answer "{answer}" is in {ctx.label}\'s passage. A '
            "background (blue) question needs knowledge from outside the lesson: ask "
            "for something the passage does not say, or turn it into a single (green) "
            "question.",
            **about(q, answer=answer),
        )


def _check_open(ctx: Section, q: Question, where: str, out: Findings) -> None:
    if _RETIRED_STEM.search(q.prompt):
        out.add(
            RETIRED_STEM,
            q.id,
            ctx.number,
            f'{where}: the stem "…word that comes to mind…" is retired. Ask a tight '
            'open question about an everyday category instead, such as "Name something '
            'found in a kitchen" or "Name a color of a crayon".',
            **about(q),
        )


def _check_wyr(ctx: Section, q: Question, where: str, out: Findings) -> None:
    prompt = js_trim(q.prompt)
    separators = wyr_separators(prompt)
    if not _WYR_STEM.search(prompt) or separators == 0:
        out.add(
            WYR_SHAPE,
            q.id,
            ctx.number,
            f"{where}: this would-you-rather prompt does not read as a choice. Start it "
            'with "Would you rather" and offer two options joined by one "or", e.g. '
            '"Would you rather ride a train or sail a boat?".',
            **about(q, ors=separators),
        )
    elif separators > 1:
        out.add(
            WYR_SHAPE,
            q.id,
            ctx.number,
            f'{where}: this would-you-rather prompt chains {separators} "or"s, which '
            "reads as a run-on. Offer two options, or a short list joined by a single "
            '"or" ("Would you rather visit Paris, Rome, or Lisbon?").',
            **about(q, ors=separators),
        )


QuestionCheck = Callable[[Section, Question, str, Findings], None]
_BY_KIND: dict[str, QuestionCheck] = {
    "single": _check_single,
    ORANGE_LOOSE: orange.check_loose,
    ORANGE_TIGHT: orange.check_tight,
    "number": _check_number,
    "background": _check_background,
    "open": _check_open,
    "wyr": _check_wyr,
}
