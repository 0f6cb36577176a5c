"""Choices that are not answers but point at the other choices or at truth itself (criteria 3,
6, 9, 14). Their words are in `words/<code>.json`, shared reference words in
`words/references.json`.

- 3 `iwf.none_of_the_above`: a choice is one of the phrases ("no correct answer", "aucune
  réponse n'est correcte"), or a head ("none", "aucune", "keine", "nessuna") followed only by
  reference words ("of the above", "des réponses ci-dessus", "der genannten", "delle
  precedenti"). A head alone is a count when the stem asks how many or every other choice is a
  number ("How many moons has Venus? None / 1 / 2").
- 9 `iwf.all_of_the_above`: the same with the heads "all", "toutes", "alle", "tutte".
- 14 `iwf.complex_k_type`: a choice is a "both" phrase (with reference words at most), or two
  choice labels or more joined by conjunctions, with reference words at most: letters up to
  the number of choices ("A and B", "a et c"); numbers and roman numerals up to 12 when the stem
  enumerates statements ("1. … 2. …", "I) … II) …") or the choice names them ("statements 1 and
  3") — so "2 and 3" as the roots of an equation is an answer, not a combination.
- 6 `iwf.true_false`: exactly two choices, one the language's "true" word, the other its
  "false" word, each alone (punctuation aside).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from quiz_review.domain.iwf.form import parse_number
from quiz_review.domain.iwf.item import PROMPT, Flaw, Item, choice_path
from quiz_review.domain.iwf.text import Lexicon, Text, lexicon, message

NOTA: Final = "iwf.none_of_the_above"
AOTA: Final = "iwf.all_of_the_above"
K_TYPE: Final = "iwf.complex_k_type"
TRUE_FALSE: Final = "iwf.true_false"

_ROMAN: Final = {
    r: i + 1
    for i, r in enumerate(
        ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x", "xi", "xii")
    )
}
# An enumeration in the stem: "1.", "2)", "(3)", "II.", "b)" at a line start or after a space.
_ENUMERATION = re.compile(r"(?:^|[\s(])(?:\d{1,2}|[IVXivx]{1,4})[.)]\s", re.MULTILINE)


def _phrase(text: Text, lex: Lexicon) -> bool:
    """The whole choice is one word or phrase of the lexicon."""
    if not lex.may_start(text):
        return False
    spans = lex.find(text)
    return len(spans) == 1 and spans[0] == (0, len(text.folded))


def _phrase_then_references(text: Text, lex: Lexicon, language: str) -> bool:
    """The choice starts with a phrase of the lexicon and goes on with reference words only
    ("No correct answer is given", "Aucune bonne réponse parmi celles-ci")."""
    if not lex.may_start(text):
        return False
    spans = lex.find(text)
    if not spans or spans[0][0] != 0:
        return False
    references = lexicon("references", "words", language, by_lemma=False)
    return references.holds(text.folded[spans[0][1] :])


# A head and a pointer ("Tous les états précédents") within this many words.
POINTER_REACH: Final = 7


def _head_then_references(text: Text, heads: Lexicon, language: str) -> bool:
    """A head ("none", "toutes") followed only by reference words, or by a few words one of
    which points at the list ("above", "précédents", "genannten", "precedenti")."""
    folded = text.folded
    if not folded or folded[0] not in heads.singles:
        return False
    references = lexicon("references", "words", language, by_lemma=False)
    if references.holds(folded[1:]):
        return True
    pointers = lexicon("references", "pointers", language, by_lemma=False).singles
    return len(folded) <= POINTER_REACH and any(w in pointers for w in folded[1:])


def _is_count(item: Item, index: int) -> bool:
    """A bare "none" answers a count: the stem asks how many, or the other choices are numbers."""
    counting = lexicon(NOTA, "counting", item.language, by_lemma=False)
    if counting.find(item.stem):
        return True
    others = [p for i, p in enumerate(item.plain) if i != index]
    return bool(others) and all(parse_number(p, item.language) is not None for p in others)


def is_none_of_the_above(item: Item, index: int) -> bool:
    text = item.choices[index]
    lang = item.language
    if _phrase_then_references(text, lexicon(NOTA, "phrases", lang, by_lemma=False), lang):
        return True
    if not _head_then_references(text, lexicon(NOTA, "heads", lang, by_lemma=False), lang):
        return False
    return len(text.folded) > 1 or not _is_count(item, index)


def is_all_of_the_above(item: Item, index: int) -> bool:
    text = item.choices[index]
    lang = item.language
    if _phrase_then_references(text, lexicon(AOTA, "phrases", lang, by_lemma=False), lang):
        return True
    return _head_then_references(text, lexicon(AOTA, "heads", lang, by_lemma=False), lang)


def _label_value(word: str, count: int, numbers_allowed: bool) -> bool:
    if numbers_allowed and word in _ROMAN:
        return True
    if len(word) == 1 and word.isalpha() and word.isascii():
        return ord(word) - ord("a") < count
    if not numbers_allowed:
        return False
    if word.isdigit():
        return 1 <= int(word) <= 12
    return word in _ROMAN


def is_k_type(item: Item, index: int) -> bool:
    """Criterion 14's test: a "both" phrase, or two labels or more (`_labels`)."""
    return _is_both(item, index) or _labels(item, index) >= 2


def _is_both(item: Item, index: int) -> bool:
    text = item.choices[index]
    lang = item.language
    references = lexicon("references", "words", lang, by_lemma=False)
    both = lexicon(K_TYPE, "both", lang, by_lemma=False)
    if not both.may_start(text):
        return False
    spans = both.find(text)
    if spans and spans[0][0] == 0:
        rest = text.folded[spans[0][1] :]
        if references.holds(rest):
            return True
    return False


def _labels(item: Item, index: int) -> int:
    """How many choice labels the choice is made of; 0 when it holds any other word."""
    text = item.choices[index]
    lang = item.language
    references = lexicon("references", "words", lang, by_lemma=False)
    conjunctions = lexicon(K_TYPE, "conjunctions", lang, by_lemma=False)
    nouns = lexicon(K_TYPE, "label_nouns", lang, by_lemma=False)
    folded = text.folded
    numbers_allowed = bool(nouns.singles.intersection(folded)) or (
        len(_ENUMERATION.findall(item.stem.raw)) >= 2
    )
    labels = 0
    for word in folded:
        # A conjunction first: Italian "e" is "and" before it is the label e.
        if word in conjunctions.singles or word in nouns.singles or word in references.singles:
            continue
        if _label_value(word, len(item.choices), numbers_allowed):
            labels += 1
            continue
        return 0
    return labels


def _each_choice(
    item: Item, code: str, criterion: int, test: Callable[[Item, int], bool]
) -> list[Flaw]:
    text = message(code, item.language)
    return [
        Flaw(criterion, code, choice_path(i), text)
        for i in range(len(item.choices))
        if test(item, i)
    ]


def none_of_the_above(item: Item) -> list[Flaw]:
    """Criterion 3: each choice that is "none of the above"."""
    return _each_choice(item, NOTA, 3, is_none_of_the_above)


def all_of_the_above(item: Item) -> list[Flaw]:
    """Criterion 9: each choice that is "all of the above"."""
    return _each_choice(item, AOTA, 9, is_all_of_the_above)


def complex_k_type(item: Item) -> list[Flaw]:
    """Criterion 14: each choice that combines other choices."""
    return _each_choice(item, K_TYPE, 14, is_k_type)


def true_false(item: Item) -> list[Flaw]:
    """Criterion 6: two choices, the language's true and false words (path `prompt`: the form
    of the whole item)."""
    if len(item.choices) != 2:
        return []
    yes = lexicon(TRUE_FALSE, "true", item.language, by_lemma=False)
    no = lexicon(TRUE_FALSE, "false", item.language, by_lemma=False)
    kinds: Sequence[str] = [
        "true" if _phrase(c, yes) else "false" if _phrase(c, no) else "" for c in item.choices
    ]
    if sorted(kinds) != ["false", "true"]:
        return []
    return [Flaw(6, TRUE_FALSE, PROMPT, message(TRUE_FALSE, item.language))]


def points_at_choices(item: Item, index: int) -> bool:
    """The choice is none/all of the above, a combination (criteria 3, 9, 14) or one label ("A
    only"): the other rules leave its words to those."""
    if not item.known_language:
        return False
    key = ("points", index)
    if key not in item.memo:
        item.memo[key] = (
            is_none_of_the_above(item, index)
            or is_all_of_the_above(item, index)
            or _is_both(item, index)
            or _labels(item, index) >= 1
        )
    return item.memo[key]
