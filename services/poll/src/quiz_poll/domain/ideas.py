"""What one idea is: `idea_key` (ADR-071 §2), the ideas of an answer, and the answer check.

The key is the idea's identity: marks, clusters and bubbles are keyed by it. It folds what never
makes two ideas different — case, accents, punctuation, spacing, a leading French or English
article — and nothing else: there is no edit distance ("vit" and "vie" stay two ideas; a false
merge on the wall is worse than two bubbles the teacher merges by hand).

Steps, as heig-quiz `packages/domain/src/brainstorm.ts` (`ideaKey`, FACTS D) has them:
1. NFKD; 2. every combining mark (\\p{M}) removed; 3. lower-cased (French rules are the default
Unicode ones); 4. every run of characters that are neither letters (\\p{L}) nor numbers (\\p{N})
becomes one space; 5. trimmed and split; 6. leading articles (le la les l un une des du de d
the a an) dropped while more than one word remains. So "l'eau" and "l’eau" give "eau", "Le"
alone stays "le", "de la" gives "la", and "!!!" gives "" — an empty key is skipped everywhere.

Disguises folded too (issue 29, item 8), so a hidden idea cannot come back looking the same:
before step 4, every default-ignorable code point and format character (zero-width space and
joiners, bidi controls, soft hyphen, variation selectors, the Hangul fillers U+115F, U+1160,
U+3164, U+FFA0…) is removed, not turned into a space; and every character outside ASCII that
Unicode's confusables (UTS #39 / TR39, `confusables.txt`, through the maintained
`confusable-homoglyphs` package) give a prototype is replaced by it, after lower-casing (the
Cyrillic "і" and "а" of "іdiot" or "pаris" become the Latin "i" and "a"; Greek "ο" becomes
"o"). ASCII is never mapped: what the platform's keys are made of stays as the platform keys
it, so its key vectors hold (TR39's own skeleton would make "m" into "rn" and "1" into "l").

Quirk, kept on purpose (FACTS D): "à vélo" keys to "velo" and "là-bas" to "bas" — "à" and "là"
lose their accent, then read as the articles "a" and "la". Telling them apart would need the
accent, and a key that depends on what folding removed is no longer its own key (idea_key of
"a velo" is "velo"), which every check of a key sent back by the board relies on; dropping "a" or
"la" from the articles would cost far more ideas than these two prepositions.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Any

import regex

from quiz_contracts.errors import ContractError, ErrorCode

ARTICLES = frozenset(
    {"le", "la", "les", "l", "un", "une", "des", "du", "de", "d", "the", "a", "an"}
)

# The platform's own classes (`\p{M}`, `\p{L}`, `\p{N}`), which the stdlib `re` lacks.
_MARKS = regex.compile(r"\p{M}+")
_NOT_LETTER_OR_NUMBER = regex.compile(r"[^\p{L}\p{N}]+")
# Invisible in any text: default-ignorable code points (Unicode's own list: zero-width
# characters, bidi controls, the Hangul fillers, variation selectors, tags…) and every format
# character (\p{Cf}). Removed, so "pho\u200btosynthèse" is "photosynthese", not two words.
_INVISIBLE = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Cf}]+")
# Mapping then lower-casing may yield a character that maps again; a few rounds reach the end.
_FOLD_ROUNDS = 4


@functools.cache
def _prototypes() -> dict[int, str]:
    """Non-ASCII character → its TR39 prototype, from `confusable-homoglyphs`' confusables data.

    That data lists each pair of `confusables.txt` both ways (a prototype lists its sources, a
    source its prototype); a character's prototype is the centre of its group, the member with
    the most confusables (ASCII first, then the smallest, on a tie), so that every member of a
    group maps to one and the same text.
    """
    from confusable_homoglyphs.confusables import confusables_data  # loaded once, ~1 MB JSON

    def clean(text: str) -> str:
        return _INVISIBLE.sub("", text)  # the data wraps right-to-left letters in LRM marks

    groups: dict[str, set[str]] = {}
    for char, entries in confusables_data.items():
        groups.setdefault(clean(char), set()).update(clean(e["c"]) for e in entries)
    table: dict[int, str] = {}
    for char, confusable in groups.items():
        if len(char) != 1 or char.isascii():
            continue
        best = max(
            [char, *confusable],
            key=lambda c: (len(groups.get(c, ())), c.isascii(), [-ord(x) for x in c]),
        )
        if best != char:
            table[ord(char)] = best
    return table


def _fold_disguises(text: str) -> str:
    """Lower-cased text without invisible characters or marks, lookalikes replaced (TR39)."""
    text = _INVISIBLE.sub("", text)
    table = _prototypes()
    for _ in range(_FOLD_ROUNDS):
        folded = _MARKS.sub("", unicodedata.normalize("NFKD", text.lower().translate(table)))
        if folded == text:
            break
        text = folded
    return text


def idea_key(raw: str) -> str:
    """The normalised text of an idea; "" when nothing of it is a letter or a number."""
    text = unicodedata.normalize("NFKD", raw)
    if not text.isascii():  # ASCII has no combining mark
        text = _MARKS.sub("", text)
        if not text.isascii():  # nor anything invisible, nor a lookalike (French is ASCII now)
            text = _fold_disguises(text)
    words = _NOT_LETTER_OR_NUMBER.sub(" ", text.lower()).split()
    start = 0
    while start < len(words) - 1 and words[start] in ARTICLES:
        start += 1
    return " ".join(words[start:])


# Bidirectional controls: the embeddings, overrides and isolates, and the marks (LRM, RLM, ALM).
# An override makes a projector draw "olév" for "vélo" (or a slur backwards for a harmless key).
_BIDI = regex.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Three or more combining marks in a row, after NFC, are stacking ("Zalgo"), not writing: a
# written letter carries at most two once composed (Hindi's vowel sign plus anusvara, Arabic's
# shadda plus vowel), so a run of three or more is dropped whole.
_MARK_RUN = regex.compile(r"\p{M}{3,}")


@functools.lru_cache(maxsize=8192)  # the same few spellings are read at every frame
def room_text(raw: str) -> str:
    """A text as the room is shown it (wall, phones, public frames), whatever the switches.

    Bidirectional controls are removed, the text is composed (NFC), every run of three or more
    combining marks is removed whole, composed again (a removal may bring two composable
    characters together) and its spaces collapsed. The key is untouched by this
    (`idea_key(room_text(t))` may differ from `idea_key(t)` only where a stacked mark run was
    dropped: the bidi controls are invisible to the key already),
    and it is idempotent: `room_text(room_text(t)) == room_text(t)`, so a spelling shown on the
    board reads back as itself.
    """
    text = _BIDI.sub("", raw)
    text = unicodedata.normalize("NFC", text)
    if not text.isascii():
        text = unicodedata.normalize("NFC", _MARK_RUN.sub("", text))
    return " ".join(text.split())


def ideas_of(payload: Any) -> list[str]:
    """The ideas of a stored answer payload, spaces collapsed and trimmed, blanks dropped.

    Anything that is not `{ideas: [...]}` has none, and a non-string item is skipped (heig-quiz
    `ideasOf`): a payload stored before a schema change never breaks the tally.
    """
    if not isinstance(payload, dict):
        return []
    ideas = payload.get("ideas")
    if not isinstance(ideas, list):
        return []
    out: list[str] = []
    for idea in ideas:
        if isinstance(idea, str):
            text = " ".join(idea.split())
            if text:
                out.append(text)
    return out


def keyed_ideas(ideas: list[str]) -> dict[str, tuple[int, str]]:
    """One participant's ideas by key: the position and text of each key's first spelling.

    Empty keys are skipped and a key written twice counts once (a participant counts once per
    idea, ADR-071 §2). Positions are indexes in `ideas`, so they order a participant's ideas.
    """
    held: dict[str, tuple[int, str]] = {}
    for index, text in enumerate(ideas):
        key = idea_key(text)
        if key and key not in held:
            held[key] = (index, text)
    return held


def check_answer(ideas: list[str], max_ideas: int) -> None:
    """422 `answer_invalid` past the question's maxIdeas (heig-quiz qt-brainstorm `answerMisfit`).

    The shape (1–60 characters each, at most 10) is `BrainstormAnswer`'s, checked at decoding.
    """
    if len(ideas) > max_ideas:
        raise ContractError(
            ErrorCode.answer_invalid,
            f"At most {max_ideas} ideas.",
            details={"maxIdeas": max_ideas, "given": len(ideas)},
        )
