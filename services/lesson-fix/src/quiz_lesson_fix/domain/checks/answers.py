"""Lesson-wide answers: an answer word or number belongs to one question of the lesson (FACTS B).

E_ANSWER_WORD_REUSED over the `single`/`multiple` answers of the pool (the same answer twice,
or a one-word answer inside another's multi-word answer; a question listing an answer twice
is never a reuse), E_NUMBER_DUPLICATE over the `number` answers by numeric key. Dictionaries,
never a pair scan.
"""

from __future__ import annotations

from quiz_lesson_fix.domain.checks.codes import Findings, declare
from quiz_lesson_fix.domain.checks.reading import ORANGE_TIGHT, Answer, Question, Section
from quiz_lesson_fix.domain.normalise import is_single_word, numeric_key, pair_key, words_of

ANSWER_WORD_REUSED = declare(
    "E_ANSWER_WORD_REUSED",
    "ai",
    "The same `single`/`multiple` answer answers two questions, or a one-word "
    "answer is a word of another question's multi-word answer.",
    "pair(q1,q2)|NORM or pair(q1,q2)|WORD|LONG",
)
NUMBER_DUPLICATE = declare(
    "E_NUMBER_DUPLICATE",
    "ai",
    "Two `number` answers of the lesson share a numeric key.",
    "pair(q1,q2)|key",
)
CODES = (ANSWER_WORD_REUSED, NUMBER_DUPLICATE)


def check_answer_reuse(pool: list[Answer], out: Findings) -> None:
    """E_ANSWER_WORD_REUSED: each answer once, and no one-word answer inside another."""
    reusable = [a for a in pool if a.question_type in ("single", ORANGE_TIGHT)]
    by_answer = _check_same_answer(reusable, out)
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
            out.add(
                ANSWER_WORD_REUSED,
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


def _check_same_answer(reusable: list[Answer], out: Findings) -> dict[str, Answer]:
    """The same answer in two questions; returns each norm's first answer."""
    by_answer: dict[str, Answer] = {}
    for answer in reusable:
        if not answer.norm:
            continue
        seen = by_answer.get(answer.norm)
        if seen is None:
            by_answer[answer.norm] = answer
            continue
        if seen.question_id == answer.question_id:
            continue
        out.add(
            ANSWER_WORD_REUSED,
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
    return by_answer


def check_number_duplicates(sections: list[Section], out: Findings) -> None:
    """E_NUMBER_DUPLICATE: every `number` answer of the lesson has its own numeric key."""
    seen: dict[str, tuple[Section, Question]] = {}
    for ctx in sections:
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
                out.add(
                    NUMBER_DUPLICATE,
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
