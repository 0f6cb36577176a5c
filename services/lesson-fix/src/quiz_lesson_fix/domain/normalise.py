"""The comparison primitives of the lesson checks (FACTS B; lessonChecks.js).

- `normalize_text`: thousands commas dropped ("3,776" → "3776"), upper-cased (ß → SS),
  decimal points kept ("112.5"), every run of characters that are neither letters nor numbers
  (combining marks included) made one space, trimmed.
- `contains_phrase`: whole-word containment of normalised strings (" H " holds " N "); an empty
  needle never matches.
- `list_sentences`: the passage split into sentences on [.!?]+ before white space or the end,
  each tokenised like normalize_text except that "," and ";" become a separator token.
- `numeric_key`: every comma removed, then a decimal number's JavaScript string ("40.0" → "40",
  "1,20" → "120"), else the normalised text.
- `pair_key`: two party ids sorted and joined by "|".
- `caps_vocabulary`: the ALL-CAPS words of a passage: a capital followed by at least one more
  capital, apostrophe or hyphen, between word boundaries that are ASCII ones as in JavaScript
  (so "ÉCOLE" is vocabulary from its C on: "COLE").

Speed: a passage is read a few times in C, never a character at a time in Python. Characters
are classified through `str.translate` tables that learn each character once (a regex class of
every capital letter, or \\W over a long text, costs ten times more), then split on spaces.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache

from quiz_lesson_fix.domain.jsval import (
    JS_SPACE,
    js_decimal_number,
    js_number_string,
    js_sort_key,
    js_string,
)

DECIMAL_MARK = "\x01"
COMMA_MARK = "\x02"
SENTENCE_MARK = "\x03"
LIST_SEPARATORS = frozenset({COMMA_MARK, "AND", "OR"})
CONJUNCTIONS = frozenset({"AND", "OR"})

_THOUSANDS = re.compile(r"([0-9]),(?=[0-9]{3}(?![0-9]))")
_DECIMAL = re.compile(r"([0-9])\.([0-9])")
_SENTENCE_END = re.compile(r"[.!?]+(?=" + JS_SPACE + r"|\Z)")
# Python's split() and JavaScript's \s disagree on these: they are made plain separators
# (they are neither letters nor numbers) before a passage is split into sentences.
_SPLIT_DISAGREEMENTS = str.maketrans(
    {c: "\x07" for c in "\x1c\x1d\x1e\x1f\x85"} | {"\ufeff": " ", SENTENCE_MARK: " "}
)
_CACHE_LIMIT = 100_000


class _CharTable(dict[int, int]):
    """A `str.translate` table that decides each character once, on first sight."""

    def __init__(self, decide: Callable[[str], str]) -> None:
        super().__init__()
        self._decide = decide

    def __missing__(self, code: int) -> int:
        value = ord(self._decide(chr(code)))
        if len(self) < _CACHE_LIMIT:
            self[code] = value
        return value


def _keep_words(*kept: str) -> Callable[[str], str]:
    def decide(ch: str) -> str:
        return ch if ch.isalnum() or ch in kept else " "

    return decide


def _caps_class(ch: str) -> str:
    # What JavaScript's /\b\p{Lu}[\p{Lu}'’-]+\b/u sees of a character: an ASCII capital
    # (a word character), another ASCII word character, a capital that is not a word character
    # for the ASCII \b, a joiner, or anything else.
    if "A" <= ch <= "Z":
        return "A"
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return "w"
    if unicodedata.category(ch) == "Lu":
        return "#"
    return "'" if ch in "'’-" else " "


# Letters and numbers kept (`[\W_]` is exactly "neither \p{L} nor \p{N}"), the rest a space.
_WORDS = _CharTable(_keep_words(DECIMAL_MARK))
_LIST_WORDS = _CharTable(_keep_words(DECIMAL_MARK, COMMA_MARK, SENTENCE_MARK))
_CAPS = _CharTable(_caps_class)
_CAPS_WORD = re.compile(r"\b[A#][A#']+\b", re.ASCII)


def normalize_text(value: object) -> str:
    """normalizeText: upper-case words and numbers separated by single spaces."""
    text = value if isinstance(value, str) else ("" if value is None else js_string(value))
    if text.isalnum():  # one word of letters and digits: nothing to strip (the common answer)
        upper = text.upper()
        if upper.isalnum():  # ("ǰ" upper-cases to J + a combining mark, which is stripped)
            return upper
    text = _protect_numbers(text).upper()
    text = " ".join(text.translate(_WORDS).split())
    return text.replace(DECIMAL_MARK, ".") if DECIMAL_MARK in text else text


def contains_phrase(haystack: str, needle: str) -> bool:
    """Whole-word containment of two normalised strings; "" never matches."""
    if not needle:
        return False
    return f" {needle} " in f" {haystack} "


def words_of(normalised: str) -> list[str]:
    """The words of a normalised string ("" has none)."""
    return normalised.split(" ") if normalised else []


def is_single_word(normalised: str) -> bool:
    """Exactly one word."""
    return bool(normalised) and " " not in normalised


class Phrases:
    """A normalised haystack padded once, for whole-word containment of many needles."""

    __slots__ = ("_padded", "text")

    def __init__(self, normalised: str) -> None:
        self.text = normalised
        self._padded = f" {normalised} "

    def __contains__(self, needle: str) -> bool:
        return bool(needle) and f" {needle} " in self._padded


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence as list tokens: upper-cased `tokens` and the same as written in `raw`."""

    tokens: list[str]
    raw: list[str]


def _protect_numbers(text: str) -> str:
    """Thousands commas dropped and decimal points parked as DECIMAL_MARK (searched first:
    most texts have neither, and a substitution costs more than a search)."""
    if "," in text and _THOUSANDS.search(text):
        text = _THOUSANDS.sub(_first_group, text)
    if "." in text and _DECIMAL.search(text):
        text = _DECIMAL.sub(_park_decimal, text)
    return text


def _first_group(match: re.Match[str]) -> str:
    return match.group(1)


def _park_decimal(match: re.Match[str]) -> str:
    return f"{match.group(1)}{DECIMAL_MARK}{match.group(2)}"


def _list_text(text: str) -> str:
    text = _protect_numbers(text)
    text = text.replace(",", f" {COMMA_MARK} ").replace(";", f" {COMMA_MARK} ")
    text = text.translate(_LIST_WORDS)
    return text.replace(DECIMAL_MARK, ".") if DECIMAL_MARK in text else text


def _sentence(part: str) -> Sentence | None:
    raw = part.split()
    # Upper-casing never makes or removes white space: the two splits line up token for token.
    return Sentence(part.upper().split(), raw) if raw else None


def list_tokens(sentence: str) -> Sentence:
    """One sentence's tokens for the list check: "," and ";" become COMMA_MARK tokens."""
    return _sentence(_list_text(sentence.translate(_SPLIT_DISAGREEMENTS))) or Sentence([], [])


def list_sentences(plain: str) -> list[Sentence]:
    """The passage's sentences that hold at least one token.

    The same as splitting first and tokenising each sentence (no substitution reaches across
    a sentence end: those need a digit or a comma next to the end), in one pass of each step
    over the whole passage.
    """
    text = _SENTENCE_END.sub(f" {SENTENCE_MARK} ", plain.translate(_SPLIT_DISAGREEMENTS))
    return [s for part in _list_text(text).split(SENTENCE_MARK) if (s := _sentence(part))]


class ListPassage:
    """A passage's sentences for the list check, tokenised only where an answer is found.

    A sentence is tokenised (as `list_sentences` would) when a list question asks for it, and
    which sentences hold a token is found by searching the upper-cased passage, so a long
    passage costs a few passes in C rather than a Python step per word.
    """

    __slots__ = ("_hay", "_raw", "_sentences", "_starts", "_upper")

    def __init__(self, plain: str) -> None:
        text = _SENTENCE_END.sub(f" {SENTENCE_MARK} ", plain.translate(_SPLIT_DISAGREEMENTS))
        text = _list_text(text)
        upper = text.upper()
        self._raw = text.split(SENTENCE_MARK)
        self._upper = upper.split(SENTENCE_MARK)
        self._hay = f" {upper} "
        starts, offset = [], 1
        for part in self._upper:
            starts.append(offset)
            offset += len(part) + 1
        self._starts = starts
        self._sentences: dict[int, Sentence] = {}

    def _holding(self, token: str) -> set[int]:
        needle, found = f" {token} ", set()
        at = self._hay.find(needle)
        while at != -1:
            found.add(bisect_right(self._starts, at + 1) - 1)
            at = self._hay.find(needle, at + 1)
        return found

    def sentences_with_all(self, tokens: list[str]) -> list[Sentence]:
        """The sentences, in order, holding every one of `tokens` (upper-cased) as a token."""
        common: set[int] | None = None
        for token in tokens:
            found = self._holding(token)
            common = found if common is None else common & found
            if not common:
                return []
        out = []
        for index in sorted(common or ()):
            sentence = self._sentences.get(index)
            if sentence is None:
                sentence = Sentence(self._upper[index].split(), self._raw[index].split())
                self._sentences[index] = sentence
            out.append(sentence)
        return out


def numeric_key(value: str) -> str:
    """The identity of a numeric answer: its number when it reads as one, else its words."""
    number = js_decimal_number(value.replace(",", ""))
    return js_number_string(number) if number is not None else normalize_text(value)


def pair_key(a: str, b: str) -> str:
    """The two ids sorted (JavaScript string order) and joined by "|"."""
    return "|".join(sorted((a, b), key=js_sort_key))


def js_sorted(values: Iterable[str]) -> list[str]:
    """`[...values].sort()`: UTF-16 code unit order."""
    return sorted(values, key=js_sort_key)


def caps_vocabulary(plain: str) -> set[str]:
    """The normalised ALL-CAPS words of a passage."""
    mapped = plain.translate(_CAPS)  # one character for one: positions line up
    found = {normalize_text(plain[m.start() : m.end()]) for m in _CAPS_WORD.finditer(mapped)}
    found.discard("")
    return found


@cache
def _caps_span_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    ranges: list[tuple[int, int]] = []
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp)) == "Lu":
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    upper = "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )
    return (
        re.compile(f"[{upper}'’\\-" + JS_SPACE[1:-1] + "]+"),
        re.compile(f"[{upper}]{{2}}"),
    )


def is_caps_span(text: str) -> bool:
    """A formatted span made only of capitals, spaces, apostrophes and hyphens, with 2 capitals
    in a row (W_FORMAT_CAPS)."""
    whole, pair = _caps_span_patterns()
    return whole.fullmatch(text) is not None and pair.search(text) is not None
