"""JavaScript value semantics the lesson tool's checks rely on, so our keys match the editor's.

The tool computes finding keys in JavaScript (lessonChecks.js): `String(x)`, `Number(x)`,
`.trim()`, string `.length` and `.sort()` are JavaScript's. A key that differed by one
character would make the service answer 409 for a finding the editor shows, so these helpers
reproduce them. One accident is deliberately not reproduced: `Number("0x10")` is 16 in
JavaScript; here only decimal numerals are numbers (FACTS: the 0x10 quirk).
"""

from __future__ import annotations

import math
import re
from typing import Any

# What JavaScript's String.prototype.trim() and the regex class \s treat as white space.
JS_SPACE_CHARS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
JS_SPACE = "[" + re.escape(JS_SPACE_CHARS) + "]"
_JS_SPACE_RUN = re.compile(JS_SPACE + "+")
_DECIMAL_NUMERAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_MAX_SAFE = 2**53


def js_trim(text: str) -> str:
    """`text.trim()`."""
    return text.strip(JS_SPACE_CHARS)


def js_split_space(text: str) -> list[str]:
    """`text.split(/\\s+/)` (on an already trimmed string: no empty ends unless text is "")."""
    return _JS_SPACE_RUN.split(text)


def js_collapse_space(text: str) -> str:
    """`text.replace(/\\s+/g, " ")`."""
    return _JS_SPACE_RUN.sub(" ", text)


def utf16_len(text: str) -> int:
    """`text.length`: UTF-16 code units (an astral character counts 2)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def utf16_prefix(text: str, limit: int) -> str:
    """`text.slice(0, limit)`, never splitting an astral character in two."""
    if len(text) <= limit and utf16_len(text) <= limit:
        return text
    units = 0
    for i, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            return text[:i]
    return text


def js_sort_key(text: str) -> bytes:
    """Sort key of `Array.prototype.sort()` on strings: UTF-16 code unit order."""
    return text.encode("utf-16-be", "surrogatepass")


def js_number_string(value: float) -> str:
    """`String(n)` for a JavaScript number (ECMAScript Number::toString, radix 10)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp_part = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exp_part) if exp_part else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        exponent = n - 1
        mark = "+" if exponent >= 0 else "-"
        head = digits[0] if k == 1 else f"{digits[0]}.{digits[1:]}"
        body = f"{head}e{mark}{abs(exponent)}"
    return sign + body


def js_string(value: Any) -> str:
    """`String(value)` for JSON values (null gives "null", a list its items joined by ",")."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) < _MAX_SAFE else js_number_string(float(value))
    if isinstance(value, float):
        return js_number_string(value)
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


def js_decimal_number(text: str) -> float | None:
    """`Number(text)` for decimal numerals: None when it is not one (NaN) or not finite.

    White space around is ignored and an empty string is 0, as in JavaScript. Hexadecimal,
    octal and binary literals are NOT numbers here (the 0x10 quirk is not copied).
    """
    body = js_trim(text)
    if not body:
        return 0.0
    if not _DECIMAL_NUMERAL.fullmatch(body):
        return None
    number = float(body)
    return number if math.isfinite(number) else None
