"""The lesson checks: every code of FACTS B, with the lesson tool's levels, triggers and keys.

`validate_lesson(doc)` is `validateLesson` of the tool (packages/core/src/lessonChecks.js):
findings `{level, code, key: "<CODE>:<identity>", section, sectionId, blockId, itemId, params,
message}` in the tool's order, errors then warnings. Keys and params are the tool's, so a key
the editor shows is a key found here; the messages are ours, written for a model to act on:
they name the section, the offending value and the fix.

Where a check lives: one module per family of codes, each declaring its codes (`declare`:
code, level, fix, trigger, key identity) beside the checks that report them —

- `questions.py`: each question against its passage (E_GROUNDING_SINGLE,
  E_GROUNDING_NUMBER_FILL, E_BACKGROUND_IN_TEXT, E_RETIRED_STEM, W_WYR_SHAPE);
- `orange.py`: the orange kinds and the list check (E_ORANGE_*, E_GROUNDING_MULTIPLE,
  W_ORANGE_MULTIWORD, W_ORANGE_ANSWER_COUNT, W_ORANGE_NO_BLANK);
- `leaks.py`: a prompt naming another question's answer (E_ANSWER_REVEALED_CROSS,
  W_ANSWER_REVEALED_OPEN);
- `shape.py`: the default shape (W_QUESTION_SHAPE, W_NO_QUESTION, W_ORANGE_ORDER,
  W_OPEN_SPLIT, W_NUMBER_NO_STEPS, W_SPELLING_COUNT, W_SECTION_COUNT);
- `spelling.py`: the spelling words (E_SPELLING_LENGTH, W_SPELLING_IN_CAPS, and lesson-wide
  E_SPELLING_DUPLICATE, E_SPELLING_COLLISION);
- `answers.py`: lesson-wide answers (E_ANSWER_WORD_REUSED, E_NUMBER_DUPLICATE);
- `vakt.py` (W_VAKT_NOT_LAST), `formatting.py` (E_FORMAT_*, W_FORMAT_*), `citations.py`
  (E_UNKNOWN_SOURCE).

`reading.py` reads the lesson once for all of them, `codes.py` holds `CheckCode` and the
findings sink, and `pipeline.py` runs the phases in order. A new code goes in its family's
module, declared in its `CODES` and so in `CHECK_CODES`.

Scoping rules (FACTS B): `multiple_open` answers are suggestions and stay out of every
lesson-wide pool (reuse, collision, recall); the tight-list checks, grounding, the prompt
check and the blank check apply to `multiple` only; a question listing the same answer twice
is never a reuse and skips the list check; a topic word whose own question expects a number
may appear in any prompt.

Cost: one pass per section builds its passage (normalised once), sentences and vocabulary
lazily; lesson-wide collisions use dictionaries and one joined string, never a pair scan.
"""

from __future__ import annotations

from quiz_lesson_fix.domain.checks import (
    answers,
    citations,
    formatting,
    leaks,
    orange,
    questions,
    shape,
    spelling,
    vakt,
)
from quiz_lesson_fix.domain.checks.codes import CheckCode
from quiz_lesson_fix.domain.checks.formatting import is_formatting_finding
from quiz_lesson_fix.domain.checks.orange import find_list_run, next_list_item
from quiz_lesson_fix.domain.checks.pipeline import CheckResult, new_findings, validate_lesson
from quiz_lesson_fix.domain.checks.questions import wyr_separators
from quiz_lesson_fix.domain.checks.reading import answers_of, has_steps
from quiz_lesson_fix.domain.checks.shape import open_kind

CHECK_CODES: dict[str, CheckCode] = {
    c.code: c
    for family in (
        questions,
        orange,
        leaks,
        spelling,
        answers,
        formatting,
        citations,
        shape,
        vakt,
    )
    for c in family.CODES
}
"""Every code, by name: what `docs/lesson-checks.md` documents, code for code."""

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
