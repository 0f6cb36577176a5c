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

Everything here is linear in its input; `Phrases` indexes a long haystack once so many
needles cost a dictionary lookup each instead of a scan.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterable
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
# `[\W_]` is exactly "neither a letter nor a number" (\p{L}, \p{N}) in Python's re.
_PUNCTUATION = re.compile(r"(?:[^\w\x01]|_)+")
_LIST_PUNCTUATION = re.compile(r"(?:[^\w\x01\x02]|_)+")
_SENTENCE_PUNCTUATION = re.compile(r"(?:[^\w\x01\x02\x03]|_)+")
_LIST_COMMA = re.compile(r"[,;]")
_SENTENCE_END = re.compile(r"[.!?]+(?=" + JS_SPACE + r"|\Z)")
_ASCII_WORD = "[A-Za-z0-9_]"
_ASCII_BOUNDARY = f"(?:(?<={_ASCII_WORD})(?!{_ASCII_WORD})|(?<!{_ASCII_WORD})(?={_ASCII_WORD}))"
# Above this length a haystack is indexed by word instead of scanned per needle.
_INDEX_AT_CHARS = 4_000


def normalize_text(value: object) -> str:
    """normalizeText: upper-case words and numbers separated by single spaces."""
    text = value if isinstance(value, str) else ("" if value is None else js_string(value))
    if text.isalnum():  # one word of letters and digits: nothing to strip (the common answer)
        upper = text.upper()
        if upper.isalnum():  # ("ǰ" upper-cases to J + a combining mark, which is stripped)
            return upper
    if "," in text:
        text = _THOUSANDS.sub(r"\1", text)
    text = text.upper()
    if "." in text:
        text = _DECIMAL.sub("\\1\x01\\2", text)
    text = _PUNCTUATION.sub(" ", text)
    if DECIMAL_MARK in text:
        text = text.replace(DECIMAL_MARK, ".")
    return text.strip(" ")


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
    """A normalised haystack that answers whole-word containment for many needles.

    Short haystacks are scanned (one C-level search per needle); long ones are indexed by word
    once, so the grounding of hundreds of answers against a long passage stays linear.
    """

    __slots__ = ("_index", "_padded", "_words", "text")

    def __init__(self, normalised: str) -> None:
        self.text = normalised
        self._padded = f" {normalised} "
        self._words: list[str] | None = None
        self._index: dict[str, list[int]] | None = None

    def __contains__(self, needle: str) -> bool:
        if not needle:
            return False
        if len(self.text) < _INDEX_AT_CHARS:
            return f" {needle} " in self._padded
        if self._index is None:
            self._words = words_of(self.text)
            index: dict[str, list[int]] = {}
            for at, word in enumerate(self._words):
                index.setdefault(word, []).append(at)
            self._index = index
        words = needle.split(" ")
        starts = self._index.get(words[0])
        if not starts:
            return False
        if len(words) == 1:
            return True
        assert self._words is not None
        size = len(words)
        return any(self._words[at : at + size] == words for at in starts)


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence as list tokens: upper-cased `tokens` and the same as written in `raw`."""

    tokens: list[str]
    raw: list[str]


def list_tokens(sentence: str) -> Sentence:
    """One sentence's tokens for the list check: "," and ";" become COMMA_MARK tokens."""
    text = _THOUSANDS.sub(r"\1", sentence)
    text = _DECIMAL.sub("\\1\x01\\2", text)
    text = _LIST_COMMA.sub(f" {COMMA_MARK} ", text)
    text = _LIST_PUNCTUATION.sub(" ", text)
    raw = [token.replace(DECIMAL_MARK, ".") for token in text.split(" ") if token]
    return Sentence([token.upper() for token in raw], raw)


def list_sentences(plain: str) -> list[Sentence]:
    """The passage's sentences that hold at least one token.

    The same as splitting first and tokenising each sentence (no substitution reaches across
    a sentence end: those need a digit or a comma next to the end), in one pass of each
    substitution over the whole passage.
    """
    if SENTENCE_MARK in plain:  # a stray control character is punctuation, as in the tool
        plain = plain.replace(SENTENCE_MARK, " ")
    text = _SENTENCE_END.sub(f" {SENTENCE_MARK} ", plain)
    text = _THOUSANDS.sub(r"\1", text)
    text = _DECIMAL.sub("\\1\x01\\2", text)
    text = _LIST_COMMA.sub(f" {COMMA_MARK} ", text)
    text = _SENTENCE_PUNCTUATION.sub(" ", text)
    if DECIMAL_MARK in text:
        text = text.replace(DECIMAL_MARK, ".")
    # Upper-casing never makes or removes a space, so the two splits line up token for token.
    out: list[Sentence] = []
    raw: list[str] = []
    tokens: list[str] = []
    for token, upper in zip(text.split(" "), text.upper().split(" "), strict=True):
        if not token:
            continue
        if token == SENTENCE_MARK:
            if raw:
                out.append(Sentence(tokens, raw))
            raw, tokens = [], []
            continue
        raw.append(token)
        tokens.append(upper)
    if raw:
        out.append(Sentence(tokens, raw))
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


@cache
def uppercase_class() -> str:
    """A regex character class body of every \\p{Lu} character (built once, on first use)."""
    ranges: list[tuple[int, int]] = []
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp)) == "Lu":
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )


@cache
def _caps_pattern() -> re.Pattern[str]:
    upper = uppercase_class()
    return re.compile(f"{_ASCII_BOUNDARY}[{upper}][{upper}'’-]+{_ASCII_BOUNDARY}")


@cache
def _caps_span_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    upper = uppercase_class()
    return (
        re.compile(f"[{upper}'’\\-" + JS_SPACE[1:-1] + "]+"),
        re.compile(f"[{upper}]{{2}}"),
    )


def caps_vocabulary(plain: str) -> set[str]:
    """The normalised ALL-CAPS words of a passage."""
    found = {normalize_text(word) for word in _caps_pattern().findall(plain)}
    found.discard("")
    return found


def is_caps_span(text: str) -> bool:
    """A formatted span made only of capitals, spaces, apostrophes and hyphens, with 2 capitals
    in a row (W_FORMAT_CAPS)."""
    whole, pair = _caps_span_patterns()
    return whole.fullmatch(text) is not None and pair.search(text) is not None
