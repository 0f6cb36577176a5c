"""The spelling words: their length and vocabulary in their section, and, lesson-wide, that
each is used once and gives no answer away (FACTS B).

Per section (`check_spelling`): E_SPELLING_LENGTH, W_SPELLING_IN_CAPS. Lesson-wide
(`check_spelling_across`, after every section's own checks): E_SPELLING_DUPLICATE, then
E_SPELLING_COLLISION against the lesson's answer pool (multiple_open suggestions excepted).
"""

from __future__ import annotations

from bisect import bisect_right

from quiz_lesson_fix.domain.checks.codes import Findings, declare
from quiz_lesson_fix.domain.checks.reading import Answer, Section, SpellingWord
from quiz_lesson_fix.domain.normalise import normalize_text, pair_key

SPELLING_MIN_LETTERS = 6
SPELLING_MAX_LETTERS = 9

SPELLING_LENGTH = declare(
    "E_SPELLING_LENGTH",
    "ai",
    "A spelling word has fewer than 6 or more than 9 letters.",
    "sectionId:NORM",
)
SPELLING_IN_CAPS = declare(
    "W_SPELLING_IN_CAPS",
    "ai",
    "A spelling word is ALL-CAPS vocabulary of its section's passage.",
    "sectionId:NORM",
)
SPELLING_DUPLICATE = declare(
    "E_SPELLING_DUPLICATE",
    "ai",
    "The same spelling word twice in a section or in two sections.",
    "pair(sec1,sec2)|NORM or sectionId|NORM",
)
SPELLING_COLLISION = declare(
    "E_SPELLING_COLLISION",
    "ai",
    "A spelling word is inside (raw substring of norms) an answer anywhere in the "
    "lesson (multiple_open suggestions excepted).",
    "pair(sectionId,qid)|WORD|ANSWER",
)
CODES = (SPELLING_LENGTH, SPELLING_DUPLICATE, SPELLING_COLLISION, SPELLING_IN_CAPS)

FirstUses = dict[str, tuple[Section, SpellingWord]]
"""Each spelling word's norm, with the section and entry that first use it."""


def _letter_count(word: str) -> int:
    return len(word) if word.isalpha() else sum(1 for ch in word if ch.isalpha())


def check_spelling(ctx: Section, out: Findings) -> None:
    """Each spelling word of the section: its length, and not the passage's vocabulary."""
    for entry in ctx.spelling:
        word = entry.word
        letters = _letter_count(word)
        norm = normalize_text(word)
        if letters < SPELLING_MIN_LETTERS or letters > SPELLING_MAX_LETTERS:
            out.add(
                SPELLING_LENGTH,
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
            out.add(
                SPELLING_IN_CAPS,
                f"{ctx.id}:{norm}",
                ctx.number,
                f'{ctx.label}: the spelling word "{word}" is also ALL-CAPS vocabulary of '
                "the passage. The warm-up words are a separate list: pick another word on "
                "the same theme.",
                block_id=entry.block_id,
                item_id=entry.item_id,
                params={"word": word},
            )


def check_spelling_across(sections: list[Section], answers: list[Answer], out: Findings) -> None:
    """Every spelling word of the lesson used once, and inside no answer of the pool."""
    first_uses = _check_duplicates(sections, out)
    if first_uses:
        _check_collisions(first_uses, answers, out)


def _check_duplicates(sections: list[Section], out: Findings) -> FirstUses:
    seen: FirstUses = {}
    for ctx in sections:
        for entry in ctx.spelling:
            norm = normalize_text(entry.word)
            first = seen.get(norm)
            if first is not None and first[0].number != ctx.number:
                out.add(
                    SPELLING_DUPLICATE,
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
                out.add(
                    SPELLING_DUPLICATE,
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
    return seen


def _check_collisions(first_uses: FirstUses, answers: list[Answer], out: Findings) -> None:
    # One string of every answer's norm: a spelling word is found with one C-level search
    # per occurrence instead of one test per (word, answer) pair. "\0" never is in a norm.
    starts: list[int] = []
    parts: list[str] = []
    offset = 0
    for answer in answers:
        starts.append(offset)
        parts.append(answer.norm)
        offset += len(answer.norm) + 1
    joined = "\0".join(parts)
    for norm, (ctx, entry) in first_uses.items():
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
            out.add(
                SPELLING_COLLISION,
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
