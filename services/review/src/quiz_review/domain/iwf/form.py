"""The item's form, whatever its language (criteria 4, 10, 16).

- 4 `iwf.longest_answer_correct`: at least three choices, a single key, and the key the unique
  longest choice, at least 1.3 × the longest distractor (characters of the trimmed text, inner
  spaces collapsed).
- 10 `iwf.fill_in_blank`: a blank with words after it in the stem. A blank is two underscores or
  more, an ellipsis standing alone (`…`, or three dots or more, with a space or the text's edge
  on both sides), or a marker of `words/fill_in_blank.json` (`[blank]`, `[...]`, `(…)`). A stem
  that ends on its blank, or that has none, is the incomplete-statement form the choices
  complete.
- 16 `iwf.numbers_out_of_order`: every choice is a number (`parse_number`) with the same unit,
  and the list is neither non-decreasing nor non-increasing. The finding's path is the first
  choice that breaks both orders.
"""

from __future__ import annotations

import re
from fractions import Fraction
from itertools import pairwise
from typing import Final

from quiz_review.domain.iwf.item import PROMPT, Flaw, Item, choice_path
from quiz_review.domain.iwf.text import message, word_file

LONGEST: Final = "iwf.longest_answer_correct"
BLANK: Final = "iwf.fill_in_blank"
NUMBERS: Final = "iwf.numbers_out_of_order"

# Criterion 4: the key must stand out by this much to be a cue (issue 30).
LONGEST_RATIO: Final = Fraction(13, 10)
MIN_CHOICES_FOR_LENGTH: Final = 3


def longest_answer_correct(item: Item) -> list[Flaw]:
    """Criterion 4: the single key is the unique longest choice, ≥ 1.3 × the longest distractor."""
    if not item.single or len(item.key) != 1 or len(item.choices) < MIN_CHOICES_FOR_LENGTH:
        return []
    key = item.key[0]
    key_len = len(item.plain[key])
    longest = max(len(item.plain[i]) for i in item.distractors)
    if key_len <= longest or key_len < LONGEST_RATIO * longest:
        return []
    text = message(LONGEST, item.language, key=key_len, longest=longest)
    return [Flaw(4, LONGEST, choice_path(key), text)]


def _blank_pattern() -> re.Pattern[str]:
    markers = sorted(word_file(BLANK)["markers"], key=len, reverse=True)
    alternatives = [r"_{2,}", r"(?:(?<=\s)|^)(?:…|\.{3,})(?=\s|$)"] + [
        re.escape(m) for m in markers
    ]
    return re.compile("|".join(alternatives), re.IGNORECASE)


_BLANK: Final = _blank_pattern()
_WORD_AFTER: Final = re.compile(r"[^\W_]")
# A parameter of a parameterized question ([[a+b]], ADR-056) is not a blank.
_PARAMETER: Final = re.compile(r"\[\[.*?\]\]", re.DOTALL)


def fill_in_blank(item: Item) -> list[Flaw]:
    """Criterion 10: a blank with a word (a letter or digit) after it in the stem."""
    stem = _PARAMETER.sub(" ", item.stem.raw)
    for blank in _BLANK.finditer(stem):
        if _WORD_AFTER.search(stem, blank.end()):
            return [Flaw(10, BLANK, PROMPT, message(BLANK, item.language))]
    return []


# A number as a choice: sign, digits (groups split by spaces, apostrophes or thin spaces, or
# by commas/points in threes), a decimal part, an exponent (e5, × 10^5, ·10⁵), a fraction, and
# a unit or symbol around it (%, °C, km², €, $).
_SUPERSCRIPTS: Final = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_NUMBER: Final = re.compile(
    r"""^(?P<pre>[$€£¥]|CHF\s?|Fr\.\s?)?
    (?P<sign>[-+−–])?\s*
    (?P<int>\d{1,3}(?:[\s\u00a0\u202f'’]\d{3})+|\d+(?:[.,]\d{3})*|\d*)
    (?P<dec>[.,]\d+)?
    (?:\s*/\s*(?P<den>\d+))?
    (?:\s*(?:[eE](?P<e>[-+]?\d+)|\s*[x×·*]\s*10\s*\^?\s*(?P<p>[-+⁻⁺]?[\d⁰¹²³⁴⁵⁶⁷⁸⁹]+)))?
    \s*(?P<unit>[^\d\s][^\d]{0,11})?$""",
    re.VERBOSE,
)


def parse_number(text: str, language: str) -> tuple[Fraction, str] | None:
    """`(value, unit)` when the whole text is one number, else None. A comma is a decimal
    comma except in English, where "1,500" groups thousands; "1 000", "1'000" group thousands
    everywhere. The unit is what follows the number (or a currency before it), folded to lower
    case and stripped of spaces ("" for none)."""
    m = _NUMBER.match(text.strip())
    if m is None or not (m["int"] or m["dec"]):
        return None
    integer, decimals = m["int"], m["dec"] or ""
    if re.fullmatch(r"\d+(?:[.,]\d{3})+", integer) and not decimals:
        # "1,500" / "1.500": grouped thousands, or a decimal number with three decimals.
        if language == "en" and "," in integer:
            integer = integer.replace(",", "")
        elif language != "en" and "." in integer and integer.count(".") > 1:
            integer = integer.replace(".", "")
        elif integer.count(",") + integer.count(".") == 1:
            head, _, tail = integer.replace(",", ".").partition(".")
            integer, decimals = head, "." + tail
        else:
            return None
    integer = re.sub(r"[\s\u00a0\u202f'’.,]", "", integer) or "0"
    try:
        value = Fraction(integer + decimals.replace(",", "."))
    except ValueError:
        return None
    if m["den"]:
        if int(m["den"]) == 0:
            return None
        value /= int(m["den"])
    exponent = m["e"] or (m["p"] or "").translate(_SUPERSCRIPTS)
    if exponent:
        value *= Fraction(10) ** int(exponent)
    if m["sign"] in ("-", "−", "–"):
        value = -value
    unit = ((m["pre"] or "") + (m["unit"] or "")).replace(" ", "").casefold()
    if unit and unit[0] in ".,;:!?":  # "12." is the number 12
        unit = unit.strip(".,;:!?")
    return value, unit


def _monotonic(values: list[Fraction]) -> bool:
    pairs = list(pairwise(values))
    return all(a <= b for a, b in pairs) or all(a >= b for a, b in pairs)


def numbers_out_of_order(item: Item) -> list[Flaw]:
    """Criterion 16: every choice a number with one shared unit, in neither order."""
    parsed = [parse_number(p, item.language) for p in item.plain]
    if len(parsed) < 3 or any(p is None for p in parsed):
        return []
    values = [p[0] for p in parsed if p is not None]
    if len({p[1] for p in parsed if p is not None}) != 1:
        return []
    if _monotonic(values):
        return []
    first = next(i for i in range(2, len(values) + 1) if not _monotonic(values[:i]))
    return [Flaw(16, NUMBERS, choice_path(first - 1), message(NUMBERS, item.language))]
