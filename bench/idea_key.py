"""Idea keys with disguises folded (issue 29, item 8): µs per key, against the platform's steps.

Prints the cost of `idea_key` on three kinds of ideas — ASCII, accented French, and disguised
(zero-width, fillers, Cyrillic lookalikes) — and of the platform's steps 1-6 alone (FACTS D) on
the same ideas in the same run, and the ratio.

    uv run --no-sync python bench/idea_key.py
"""

from __future__ import annotations

import time
import unicodedata

import regex

from quiz_poll.domain.ideas import ARTICLES, idea_key

_MARKS = regex.compile(r"\p{M}+")
_NOT_LETTER_OR_NUMBER = regex.compile(r"[^\p{L}\p{N}]+")

IDEAS = {
    "ascii": ["se reproduire", "la respiration", "Paul est un idiot", "grandir", "the cell"],
    "french": ["La Photosynthèse", "l'énergie solaire", "à vélo", "élève", "Œuf de poule"],
    "disguised": ["idi\u200bot", "\u0456di\u043et", "idiot\u3164", "\u0440\u0430ris", "vé\u00adlo"],
}
ROUNDS = 20_000


def platform_key(raw: str) -> str:
    """FACTS D's steps, nothing more: the baseline."""
    text = unicodedata.normalize("NFKD", raw)
    if not text.isascii():
        text = _MARKS.sub("", text)
    words = _NOT_LETTER_OR_NUMBER.sub(" ", text.lower()).split()
    start = 0
    while start < len(words) - 1 and words[start] in ARTICLES:
        start += 1
    return " ".join(words[start:])


def per_key_us(fn: object, ideas: list[str]) -> float:
    key = fn  # type: ignore[assignment]
    best = float("inf")
    for _ in range(5):  # best of five: the host is shared
        start = time.perf_counter()
        for _ in range(ROUNDS // len(ideas)):
            for idea in ideas:
                key(idea)  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best / ROUNDS * 1e6


def main() -> None:
    idea_key("é")  # the confusables table is built once, at the first non-ASCII key
    print(f"{'ideas':<10} {'platform µs':>12} {'idea_key µs':>12} {'ratio':>6}")
    for kind, ideas in IDEAS.items():
        base, ours = per_key_us(platform_key, ideas), per_key_us(idea_key, ideas)
        print(f"{kind:<10} {base:>12.2f} {ours:>12.2f} {ours / base:>6.2f}")
    start = time.perf_counter()
    import importlib

    import quiz_poll.domain.ideas as ideas_module

    importlib.reload(ideas_module)
    ideas_module.idea_key("é")
    print(
        f"prototype table built from the loaded confusables in "
        f"{(time.perf_counter() - start) * 1e3:.0f} ms (once per process)"
    )


if __name__ == "__main__":
    main()
