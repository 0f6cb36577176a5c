"""One prompt must not hand over another question's answer (FACTS B).

E_ANSWER_REVEALED_CROSS when a prompt contains (whole words) a `single` or `multiple` answer of
another question of its section; W_ANSWER_REVEALED_OPEN when that prompt is an open, wyr or
multiple_open one, which may have to name the word.
"""

from __future__ import annotations

from typing import Any

from quiz_lesson_fix.domain.checks.codes import Findings, declare
from quiz_lesson_fix.domain.checks.reading import ORANGE_LOOSE, ORANGE_TIGHT, Question, Section
from quiz_lesson_fix.domain.normalise import js_sorted

ANSWER_REVEALED_CROSS = declare(
    "E_ANSWER_REVEALED_CROSS",
    "ai",
    "A prompt (not open, wyr or multiple_open) contains a `single` or `multiple` "
    "answer of another question of its section.",
    "qid:sorted leaked norms",
)
ANSWER_REVEALED_OPEN = declare(
    "W_ANSWER_REVEALED_OPEN",
    "ai",
    "The same, in the prompt of an open, wyr or multiple_open question.",
    "qid:sorted leaked norms",
)
CODES = (ANSWER_REVEALED_CROSS, ANSWER_REVEALED_OPEN)

_EXCUSED_PROMPTS = {
    "open": "this open (pink) prompt",
    "wyr": "this would-you-rather (grape) prompt",
    ORANGE_LOOSE: "this multiple_open (orange) prompt",
}


class _Recall:
    """An answer the speller must retrieve, as a prompt could leak it."""

    __slots__ = ("answer", "first_word", "norm", "owner", "padded")

    def __init__(self, answer: str, norm: str, owner: Question) -> None:
        self.answer = answer
        self.norm = norm
        self.owner = owner
        self.padded = f" {norm} "
        self.first_word = norm.split(" ", 1)[0]


def check_leaks(ctx: Section, out: Findings) -> None:
    """Every prompt of the section against the other questions' recall answers."""
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
            _report_leak(ctx, q, leaked, out)


def _report_leak(ctx: Section, q: Question, leaked: list[_Recall], out: Findings) -> None:
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
        out.add(
            ANSWER_REVEALED_OPEN,
            key,
            ctx.number,
            f"{ctx.label}, question {q.number}: {_EXCUSED_PROMPTS[q.kind]} names {named}, so "
            "the speller can read that answer off it. Keep it only if the question has to "
            "name that word (its subject, or the word a synonym is asked for); otherwise "
            "reword the prompt around it.",
            **detail,
        )
    else:
        out.add(
            ANSWER_REVEALED_CROSS,
            key,
            ctx.number,
            f"{ctx.label}, question {q.number}: the prompt names {named}, so the speller can "
            "copy it instead of recalling it. Reword this prompt around that word, e.g. "
            '"the British Isles" where the other answer is BRITAIN.',
            **detail,
        )
