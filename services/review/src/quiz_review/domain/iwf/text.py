"""How the item-writing-flaw rules read a text: words, their folded and lemmatised forms, phrases.

- A **word** is a run of letters, digits and combining marks (Unicode); anything else splits,
  apostrophes and hyphens included: "n'est" is `n`, `est`; "peut-être" is `peut`, `être`. So a
  word is matched as a word, never inside another ("ball" holds no "all").
- A word's **folded** form is NFKD, combining marks removed, case-folded: "Außer" → "ausser",
  "Éléments" → "elements", "NOT" → "not". Every comparison is on folded forms.
- A word's **lemma** is simplemma's for the question's language (a maintained, dependency-free
  lemmatiser, dictionaries for 50+ languages), then folded: "Hauptstädte" → "hauptstadt",
  "toutes" → "tout". Lemmas are cached: a school vocabulary is small.
- A **phrase** of a word list ("none of the above", "à l'exception de") is its folded words;
  it is found where those words follow one another in the text.
- A **lexicon** is a criterion's word list for one language, read from its data file beside the
  rule (`words/<code>.json`): its single words by folded form and by lemma, its phrases by their
  first word.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any, Final

import simplemma

# The languages whose word lists ship (issue 30); another language runs the language-free rules.
LANGUAGES: Final = ("fr", "en", "de", "it")

# Letters, digits, combining marks: `\w` without the underscore (a blank is underscores).
_WORD = re.compile(r"[^\W_]+")
# A parameter of a parameterized question (`[[a+b]]`, ADR-056): drawn per student, no words.
_PARAMETER = re.compile(r"\[\[.*?\]\]", re.DOTALL)


@lru_cache(maxsize=65_536)
def fold(word: str) -> str:
    """The comparison form of a word: accents removed (NFKD minus combining marks), case-folded."""
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def words(text: str) -> list[str]:
    """The words of a text as written, in order (letters, digits and marks; all else splits);
    a `[[…]]` parameter has none."""
    return _WORD.findall(_PARAMETER.sub(" ", text) if "[[" in text else text)


@lru_cache(maxsize=65_536)
def lemma(word: str, language: str) -> str:
    """The folded lemma of `word` in `language` ("fr", "en", "de", "it"); the folded word when
    the lemmatiser does not know it. German nouns keep their capital for the lookup."""
    if not word.isalpha():  # "3D", "H2O", "w5": no dictionary has them
        return fold(word)
    try:
        found = simplemma.lemmatize(word, lang=language)
    except ValueError:  # a language simplemma has no dictionary for
        found = word
    return fold(found)


def warm(languages: Iterable[str] = LANGUAGES) -> None:
    """Load the lemmatiser's dictionaries now (a first lookup reads one, 0.2–1 s) rather than
    on the first question linted."""
    for language in languages:
        lemma("warm", language)


@dataclass(frozen=True)
class Text:
    """One field read once: its words as written, folded, and (lazily) lemmatised."""

    raw: str
    language: str
    written: tuple[str, ...]
    folded: tuple[str, ...]

    @staticmethod
    def of(raw: str, language: str) -> Text:
        written = tuple(words(raw))
        return Text(raw, language, written, tuple(fold(w) for w in written))

    @cached_property
    def lemmas(self) -> tuple[str, ...]:
        """The folded lemma of each word (looked up once per text, when a rule needs it)."""
        return tuple(lemma(w, self.language) for w in self.written)


@dataclass(frozen=True)
class Lexicon:
    """One criterion's words in one language: single words (folded and lemmatised) and phrases."""

    language: str
    singles: frozenset[str]
    single_lemmas: frozenset[str]
    phrases: Mapping[str, tuple[tuple[str, ...], ...]]
    # The first two letters of every single word and lemma: a word that starts otherwise cannot
    # be an inflection of one (tous/toutes/tout, jede/jeder, tutti/tutto), so it is not looked
    # up in the lemmatiser at all — most words of a text are not.
    stems: frozenset[str] = frozenset()

    @staticmethod
    def of(entries: Sequence[str], language: str, *, by_lemma: bool = True) -> Lexicon:
        singles: set[str] = set()
        lemmas: set[str] = set()
        phrases: dict[str, list[tuple[str, ...]]] = {}
        for entry in entries:
            written = words(entry)
            if len(written) == 1:
                singles.add(fold(written[0]))
                if by_lemma:
                    lemmas.add(lemma(written[0], language))
            elif written:
                folded = tuple(fold(w) for w in written)
                phrases.setdefault(folded[0], []).append(folded)
        return Lexicon(
            language,
            frozenset(singles),
            frozenset(lemmas),
            {k: tuple(sorted(v, key=len, reverse=True)) for k, v in phrases.items()},
            frozenset(w[:2] for w in singles | lemmas),
        )

    def find(self, text: Text) -> list[tuple[int, int]]:
        """The (start, end) word spans of `text` that are one of the lexicon's words or phrases;
        a phrase wins over a single word at the same start."""
        spans: list[tuple[int, int]] = []
        folded = text.folded
        i = 0
        while i < len(folded):
            end = self._phrase_end(folded, i)
            if end is None:
                word = folded[i]
                if word in self.singles:
                    end = i + 1
                elif self.single_lemmas and word[:2] in self.stems:
                    if lemma(text.written[i], text.language) in self.single_lemmas:
                        end = i + 1
            if end is not None:
                spans.append((i, end))
                i = end
            else:
                i += 1
        return spans

    def _phrase_end(self, folded: Sequence[str], i: int) -> int | None:
        for phrase in self.phrases.get(folded[i], ()):
            if tuple(folded[i : i + len(phrase)]) == phrase:
                return i + len(phrase)
        return None

    def may_start(self, text: Text) -> bool:
        """Whether the text's first word can begin one of the lexicon's words or phrases (by
        folded form): a cheap test before `find` for the rules that read whole choices."""
        return bool(text.folded) and (
            text.folded[0] in self.phrases
            or text.folded[0] in self.singles
            or bool(self.single_lemmas)
        )

    def holds(self, folded_words: Iterable[str]) -> bool:
        """Whether every word is one of the lexicon's single words (folded)."""
        return all(w in self.singles for w in folded_words)


@lru_cache(maxsize=64)
def word_file(code: str) -> Mapping[str, Any]:
    """The data file of criterion `code` (`iwf.true_false` → `words/true_false.json`, beside the
    rules; `references` is the file the choice rules share)."""
    name = code.removeprefix("iwf.")
    data = resources.files(__package__).joinpath("words", f"{name}.json").read_text("utf-8")
    parsed: Mapping[str, Any] = json.loads(data)
    return parsed


@lru_cache(maxsize=512)
def lexicon(code: str, key: str, language: str, *, by_lemma: bool = True) -> Lexicon:
    """The list `key` of criterion `code`'s data file for `language` (empty when it has none)."""
    entries = word_file(code).get(key, {}).get(language, [])
    return Lexicon.of(tuple(entries), language, by_lemma=by_lemma)


def message(code: str, language: str, **values: object) -> str:
    """The criterion's message in `language` (English for a language without one), filled."""
    texts = word_file(code)["message"]
    return str(texts.get(language) or texts["en"]).format(**values)
