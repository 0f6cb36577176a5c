"""Criterion 12 `iwf.word_repeats_key`: a content word of the stem is in the key and in no
distractor — the "clang" that points at the key.

A content word has three letters or more and is not a stop word of the language
(`words/word_repeats_key.json`: function words, and the words every quiz stem uses such as
"following", "correct", "suivante"). Two words are the same when their folded forms or their
lemmas are ("photosynthèse" and "Photosynthese" are not: other languages; "cells" and "cell"
are). Each correct choice is looked at (a `multiple` key has several); distractors are the
other choices; a key that points at the choices ("all of the above") is left to criteria 3,
9, 14. The finding's path is the key's choice; its message names the word as the key
writes it.
"""

from __future__ import annotations

from typing import Final

from quiz_review.domain.iwf.choices import points_at_choices
from quiz_review.domain.iwf.item import Flaw, Item, choice_path
from quiz_review.domain.iwf.text import Text, lexicon, message, word_file

REPEATS: Final = "iwf.word_repeats_key"
MIN_LETTERS: Final = 3


def _forms(text: Text, stop: frozenset[str]) -> list[tuple[str, frozenset[str]]]:
    """(word as written, {folded, lemma}) of each content word."""
    out = []
    for written, folded, lemma in zip(text.written, text.folded, text.lemmas, strict=True):
        if len(folded) < MIN_LETTERS or not any(c.isalpha() for c in folded):
            continue
        if folded in stop or lemma in stop:
            continue
        out.append((written, frozenset((folded, lemma))))
    return out


def _stop_words(language: str) -> frozenset[str]:
    lex = lexicon(REPEATS, "stop_words", language, by_lemma=False)
    return lex.singles


def word_repeats_key(item: Item) -> list[Flaw]:
    """Criterion 12: per correct choice, the first stem word it shares with no distractor."""
    if not word_file(REPEATS)["stop_words"].get(item.language):
        return []
    stop = _stop_words(item.language)
    stem = {form for _, forms in _forms(item.stem, stop) for form in forms}
    if not stem:
        return []
    # The distractors' words are read only for a key that echoes the stem (most keys do not).
    in_distractors: set[str] | None = None
    flaws = []
    for k in item.key:
        if points_at_choices(item, k):  # "Tous les états précédents" echoes the choices
            continue
        for written, forms in _forms(item.choices[k], stop):
            if not forms & stem:
                continue
            if in_distractors is None:
                in_distractors = {
                    form
                    for i in item.distractors
                    for _, choice_forms in _forms(item.choices[i], stop)
                    for form in choice_forms
                }
            if not forms & in_distractors:
                text = message(REPEATS, item.language, word=written)
                flaws.append(Flaw(12, REPEATS, choice_path(k), text))
                break
    return flaws
