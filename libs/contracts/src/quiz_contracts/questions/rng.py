"""The platform's seeded shuffles, so a student view here lists choices in the order it shows.

heig-quiz `packages/core/src/rng.ts`: a permutation is never stored; it is recomputed from
(attempt seed, item id, purpose) with the xmur3 string hash feeding a mulberry32 generator and a
Fisher-Yates shuffle. Both are public 32-bit algorithms; this is a plain Python rendering of them
working on 32-bit patterns, which gives the same permutation bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from quiz_contracts.questions.common import js_number_text, utf16_units

T = TypeVar("T")
_MASK = 0xFFFFFFFF


def _imul(a: int, b: int) -> int:
    """`Math.imul` on 32-bit patterns."""
    return (a * b) & _MASK


def hash_seed(*parts: str | int) -> int:
    """xmur3 of the parts joined by U+0001, as an unsigned 32-bit integer."""
    text = "\u0001".join(p if isinstance(p, str) else js_number_text(p) for p in parts)
    units = utf16_units(text)
    h = (1779033703 ^ len(units)) & _MASK
    for unit in units:
        h = _imul(h ^ unit, 3432918353)
        h = ((h << 13) | (h >> 19)) & _MASK
    return (h ^ (h >> 16)) & _MASK


def mulberry32(seed: int) -> Callable[[], float]:
    """A generator of floats in [0, 1)."""
    state = seed & _MASK

    def draw() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & _MASK
        t = _imul(state ^ (state >> 15), 1 | state)
        t = ((t + _imul(t ^ (t >> 7), 61 | t)) & _MASK) ^ t
        return ((t ^ (t >> 14)) & _MASK) / 4294967296

    return draw


def seeded_shuffle(items: Sequence[T], seed: int) -> list[T]:
    """Fisher-Yates from the end, drawing from mulberry32(seed): a new list."""
    out = list(items)
    draw = mulberry32(seed)
    for i in range(len(out) - 1, 0, -1):
        j = int(draw() * (i + 1))
        out[i], out[j] = out[j], out[i]
    return out


def stream_seed(attempt_seed: int, item_id: str, purpose: str) -> int:
    """The one seed derivation: purposes `choices` (mcq), `cards`/`columns` (categorize)…"""
    return hash_seed(attempt_seed, item_id, purpose)
