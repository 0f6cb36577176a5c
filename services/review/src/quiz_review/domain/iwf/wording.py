"""Words that give the key away or hide the question (criteria 11, 17, 19); the word lists are
in `words/<code>.json`, matched as words or phrases on folded forms (single words by lemma too,
so "toutes" is "tout" and "jede" is "jeder").

- 11 `iwf.absolute_terms`: a distractor holds an absolute ("always", "jamais", "immer",
  "sempre"…), unless a negation comes right before it ("not always", "pas toujours": a hedge).
  A choice that points at other choices ("all of the above") is left to criteria 3, 9, 14; the
  key and the stem are not looked at.
- 17 `iwf.vague_terms`: any choice, key included, holds a vague frequency or degree ("often",
  "parfois", "meistens", "di solito").
- 19 `iwf.negative_stem`: the stem holds a negation ("NOT", "except", "sauf", "nicht", "außer",
  "non", "tranne"), or in French a "ne"/"n'" followed within its sentence by a partner
  ("pas", "jamais", "aucun"…): "Laquelle n'est pas…".
"""

from __future__ import annotations

from typing import Final

from quiz_review.domain.iwf.choices import points_at_choices
from quiz_review.domain.iwf.item import PROMPT, Flaw, Item, choice_path
from quiz_review.domain.iwf.text import Text, lexicon, message

ABSOLUTE: Final = "iwf.absolute_terms"
VAGUE: Final = "iwf.vague_terms"
NEGATIVE: Final = "iwf.negative_stem"

# "ne … pas": the partner within this many words of the "ne" (one clause).
NE_REACH: Final = 6


def _as_written(text: Text, span: tuple[int, int]) -> str:
    return " ".join(text.written[span[0] : span[1]])


def absolute_terms(item: Item) -> list[Flaw]:
    """Criterion 11: each distractor with an absolute not right after a negation."""
    absolutes = lexicon(ABSOLUTE, "words", item.language)
    negations = lexicon(ABSOLUTE, "negations", item.language, by_lemma=False)
    flaws = []
    for i in item.distractors:
        if points_at_choices(item, i):
            continue
        text = item.choices[i]
        for span in absolutes.find(text):
            if span[0] > 0 and text.folded[span[0] - 1] in negations.singles:
                continue
            word = _as_written(text, span)
            flaws.append(
                Flaw(11, ABSOLUTE, choice_path(i), message(ABSOLUTE, item.language, word=word))
            )
            break
    return flaws


def vague_terms(item: Item) -> list[Flaw]:
    """Criterion 17: each choice with a vague term."""
    vague = lexicon(VAGUE, "words", item.language)
    flaws = []
    for i, text in enumerate(item.choices):
        spans = vague.find(text)
        if spans:
            word = _as_written(text, spans[0])
            flaws.append(Flaw(17, VAGUE, choice_path(i), message(VAGUE, item.language, word=word)))
    return flaws


def _ne_pair(item: Item) -> str | None:
    """French "ne … pas": the words of the first pair, or None."""
    ne = lexicon(NEGATIVE, "ne", item.language, by_lemma=False).singles
    if not ne:
        return None
    partners = lexicon(NEGATIVE, "ne_partners", item.language, by_lemma=False).singles
    folded = item.stem.folded
    for i, word in enumerate(folded):
        if word in ne:
            for j in range(i + 1, min(len(folded), i + 1 + NE_REACH)):
                if folded[j] in partners:
                    return f"{item.stem.written[i]}… {item.stem.written[j]}"
    return None


def negative_stem(item: Item) -> list[Flaw]:
    """Criterion 19: a negation in the stem."""
    spans = lexicon(NEGATIVE, "words", item.language).find(item.stem)
    word = _as_written(item.stem, spans[0]) if spans else _ne_pair(item)
    if word is None:
        return []
    return [Flaw(19, NEGATIVE, PROMPT, message(NEGATIVE, item.language, word=word))]
