"""The orange checks: a `multiple` question retrieves one list the passage states, a
`multiple_open` one suggests answers (FACTS B).

Codes: W_ORANGE_MULTIWORD and W_ORANGE_ANSWER_COUNT (both kinds), then for `multiple` only the
grounding of each answer (E_ORANGE_PARAPHRASED, E_GROUNDING_MULTIPLE), its prompt
(E_ORANGE_ANSWER_IN_PROMPT, W_ORANGE_NO_BLANK) and the list check (E_ORANGE_PARTIAL_LIST,
E_ORANGE_NOT_A_LIST). The section's orange order is a shape check (`shape.py`).

A **list** is found inside one sentence: neighbouring answers separated by a comma, a
semicolon, `and` or `or`, with at most MAX_LIST_GAP_WORDS other words between them.
"""

from __future__ import annotations

import re

from quiz_lesson_fix.domain.checks.codes import Findings, about, counted, declare, quoted
from quiz_lesson_fix.domain.checks.reading import Question, Section, answer_id
from quiz_lesson_fix.domain.normalise import (
    CONJUNCTIONS,
    LIST_SEPARATORS,
    Phrases,
    Sentence,
    is_single_word,
    js_sorted,
    normalize_text,
)

ORANGE_MIN_ANSWERS = 2
ORANGE_MAX_ANSWERS = 4
MAX_LIST_GAP_WORDS = 4
MAX_ITEM_WORDS = 2

_ORANGE_BLANK = re.compile(r"_{3,}")

ORANGE_MULTIWORD = declare(
    "W_ORANGE_MULTIWORD",
    "ai",
    "An answer of either orange kind is more than one word.",
    "qid:NORM",
)
ORANGE_ANSWER_COUNT = declare(
    "W_ORANGE_ANSWER_COUNT",
    "ai",
    "`multiple` with fewer than 2 or more than 4 answers; `multiple_open` with none.",
    "qid",
)
GROUNDING_MULTIPLE = declare(
    "E_GROUNDING_MULTIPLE",
    "ai",
    "A `multiple` answer of several words is not in the passage.",
    "qid:NORM",
)
ORANGE_PARAPHRASED = declare(
    "E_ORANGE_PARAPHRASED",
    "ai",
    "A one-word `multiple` answer is not in the passage.",
    "qid:NORM",
)
ORANGE_ANSWER_IN_PROMPT = declare(
    "E_ORANGE_ANSWER_IN_PROMPT",
    "ai",
    "A `multiple` prompt contains (whole words) one or more of its own answers.",
    "qid:sorted norms joined by |",
)
ORANGE_NO_BLANK = declare(
    "W_ORANGE_NO_BLANK",
    "ai",
    "A `multiple` prompt without a run of 3 or more underscores.",
    "qid",
)
ORANGE_NOT_A_LIST = declare(
    "E_ORANGE_NOT_A_LIST",
    "ai",
    "All answers of a `multiple` question are distinct single words found in the "
    "passage (at least 2), but no sentence holds them as one series.",
    "qid:sorted distinct norms",
)
ORANGE_PARTIAL_LIST = declare(
    "E_ORANGE_PARTIAL_LIST",
    "quick",
    "Same preconditions; a series holds all the answers but goes on to one more "
    "item (params.next), and no sentence holds a complete one.",
    "qid:sorted distinct norms",
)
CODES = (
    GROUNDING_MULTIPLE,
    ORANGE_PARAPHRASED,
    ORANGE_ANSWER_IN_PROMPT,
    ORANGE_NOT_A_LIST,
    ORANGE_PARTIAL_LIST,
    ORANGE_MULTIWORD,
    ORANGE_ANSWER_COUNT,
    ORANGE_NO_BLANK,
)


# ---- The list -------------------------------------------------------------------------------


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


# ---- Both kinds -----------------------------------------------------------------------------


def check_multiword(ctx: Section, q: Question, where: str, out: Findings) -> None:
    """W_ORANGE_MULTIWORD: each answer of either orange kind is one word."""
    for answer, norm in zip(q.answers, q.norms, strict=True):
        if is_single_word(norm):
            continue
        out.add(
            ORANGE_MULTIWORD,
            f"{q.id}:{norm}",
            ctx.number,
            f'{where}: the answer "{answer}" is more than one word. An orange answer is '
            "spelled letter by letter on a letterboard, so keep it to the single word "
            "that carries the meaning.",
            **about(q, answer_id(q.block, answer), answer=answer),
        )


def check_loose(ctx: Section, q: Question, where: str, out: Findings) -> None:
    """W_ORANGE_ANSWER_COUNT for `multiple_open`: at least one suggestion."""
    if not q.answers:
        out.add(
            ORANGE_ANSWER_COUNT,
            q.id,
            ctx.number,
            f"{where}: this multiple_open (orange) question suggests no answer. Give at "
            "least one suggestion, so whoever scores the speller knows what would count "
            "(other answers may still be right).",
            **about(q, count=0, open=True),
        )


# ---- `multiple` -----------------------------------------------------------------------------


def check_tight(ctx: Section, q: Question, where: str, out: Findings) -> None:
    """Every check of a `multiple` question, in the tool's order."""
    _check_count(ctx, q, where, out)
    _check_grounding(ctx, q, where, out)
    _check_prompt(ctx, q, where, out)
    _check_list(ctx, q, where, out)


def _check_count(ctx: Section, q: Question, where: str, out: Findings) -> None:
    count = len(q.answers)
    if count < ORANGE_MIN_ANSWERS or count > ORANGE_MAX_ANSWERS:
        out.add(
            ORANGE_ANSWER_COUNT,
            q.id,
            ctx.number,
            f"{where}: this multiple (orange) question accepts {counted(count, 'answer')}. Accept "
            f"{ORANGE_MIN_ANSWERS} to {ORANGE_MAX_ANSWERS}: the items of one list the "
            "passage states, so the speller has a real choice without hunting.",
            **about(q, count=count, open=False, min=ORANGE_MIN_ANSWERS, max=ORANGE_MAX_ANSWERS),
        )


def _check_grounding(ctx: Section, q: Question, where: str, out: Findings) -> None:
    for answer, norm in zip(q.answers, q.norms, strict=True):
        if norm in ctx.passage:
            continue
        if is_single_word(norm):
            out.add(
                ORANGE_PARAPHRASED,
                f"{q.id}:{norm}",
                ctx.number,
                f'{where}: the accepted answer "{answer}" is not a word of {ctx.label}\'s '
                "passage. A multiple (orange) question retrieves the items of a list the "
                "passage states, so accept only the passage's own words: no synonym or "
                "paraphrase, and no general knowledge (that is a background question). If "
                "the question asks for the speller's own word (a synonym, a definition), "
                "make it a multiple_open question, whose answers are suggestions only.",
                **about(q, answer_id(q.block, answer), answer=answer),
            )
        else:
            out.add(
                GROUNDING_MULTIPLE,
                f"{q.id}:{norm}",
                ctx.number,
                f'{where}: the accepted answer "{answer}" is not in {ctx.label}\'s passage. '
                "Use the passage's own wording, ideally one concrete word the speller can "
                "find in the text.",
                **about(q, answer_id(q.block, answer), answer=answer),
            )


def _check_prompt(ctx: Section, q: Question, where: str, out: Findings) -> None:
    prompt = Phrases(q.prompt_norm)
    given = [a for a, norm in zip(q.answers, q.norms, strict=True) if norm in prompt]
    if given:
        key = "|".join(js_sorted(normalize_text(a) for a in given))
        out.add(
            ORANGE_ANSWER_IN_PROMPT,
            f"{q.id}:{key}",
            ctx.number,
            f"{where}: the prompt already contains its accepted answer"
            f"{'' if len(given) == 1 else 's'} ({quoted(given)}), so there is nothing left "
            "to recall. Quote the passage's sentence with the list replaced by a blank "
            'instead: "The river carries ______. Name one thing it carries."',
            **about(q, answers=given, count=len(given)),
        )
    if not _ORANGE_BLANK.search(q.prompt):
        out.add(
            ORANGE_NO_BLANK,
            q.id,
            ctx.number,
            f"{where}: the prompt has no blank. Quote the passage's sentence with its list "
            'blanked out as ______ ("The blast threw out ______. Name one."), so the speller '
            "knows which of the section's lists is meant.",
            **about(q),
        )


def _check_list(ctx: Section, q: Question, where: str, out: Findings) -> None:
    answers = q.answers
    options = [n for n in q.norms if is_single_word(n) and n in ctx.passage]
    distinct = list(dict.fromkeys(options))
    if len(distinct) < ORANGE_MIN_ANSWERS or len(distinct) != len(answers):
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
        out.add(
            ORANGE_PARTIAL_LIST,
            f"{q.id}:{key}",
            ctx.number,
            f"{where}: the passage's list goes on past the accepted answers "
            f'{quoted(answers)} to "{partial}". Accept every item of the list the prompt '
            f'blanks out (add "{partial}" to the answers), or take "{partial}" out of the '
            "list in the passage; otherwise a speller who names it is marked wrong.",
            **about(q, answers=answers, next=partial),
        )
    else:
        out.add(
            ORANGE_NOT_A_LIST,
            f"{q.id}:{key}",
            ctx.number,
            f"{where}: the accepted answers {quoted(answers)} are in {ctx.label}'s passage "
            "but never together as one list. A multiple (orange) question retrieves a "
            'series the passage states: write them into one sentence as a list ("It threw '
            'out rock, gas, and ash"), then quote that sentence with the list blanked out. '
            'Two words of one phrase ("the Pacific Ocean") are not a list. A question about '
            "the speller's own words belongs to multiple_open instead.",
            **about(q, answers=answers),
        )
