"""Issue 31 item 1: the platform's decisions (FACTS E, E2) as labelled cases. Pure, no I/O.

Each case is a decision the platform makes and what it decides; the four night-share cases
marked `held-out` are those where the gateway decided otherwise before (a dated opus variant,
an id without the dash, equality after spending, the worst case at 0.041232 USD where the
platform's is 0.04).
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from quiz_contracts.llm import ASSISTANT_PURPOSES, PLATFORM_PURPOSES, Purpose
from quiz_llm_gateway.domain.pricing import (
    DEFAULT_PRICES,
    estimate_input_tokens,
    micros,
    price_for,
    worst_case_micros,
)
from quiz_llm_gateway.domain.share import (
    assistant_share_allows,
    platform_input_tokens,
    platform_worst_case_micros,
    share_of_cap_micros,
    within_share,
)

NIGHT_SHARE = Decimal("0.25")
MAX_TOKENS = 4000  # the platform's review MAX_TOKENS


def night_allows(model: str, prompt_chars: int, spent_usd: str, cap_usd: str) -> bool:
    """The platform's night check before one call, with the gateway's prices and formula."""
    price = price_for(model, DEFAULT_PRICES)
    assert price is not None
    worst = platform_worst_case_micros(price, prompt_chars, MAX_TOKENS)
    share = share_of_cap_micros(micros(cap_usd), NIGHT_SHARE)
    return within_share(micros(spent_usd), worst, share)


# (label, model, prompt_chars, spent USD, cap USD, the platform's decision)
NIGHT_CASES = [
    # held-out: a dated opus variant takes opus's $4/$20: 1000 tokens × 4 + 4000 × 20 =
    # 0.084 USD fits a share of 0.084 exactly.
    ("held-out dated opus variant", "claude-opus-5-5-20260301", 3000, "0", "0.336", True),
    (
        "dated opus variant, 1 µ$ short",
        "claude-opus-5-5-20260301",
        3000,
        "0.000001",
        "0.336",
        False,
    ),
    # held-out: no dash after the listed id: an unknown id, the dearest ($4/$20), not sonnet's.
    ("held-out id without the dash", "claude-sonnet-5-520260301", 0, "0", "0.16", False),
    ("the same at the dearest's own worst case", "claude-sonnet-5-520260301", 0, "0", "0.32", True),
    ("a dated sonnet variant is sonnet's", "claude-sonnet-5-5-20260301", 0, "0", "0.16", True),
    # held-out: equality after spending is allowed (stops only when spent + worst > share).
    ("held-out equality after spending", "claude-sonnet-5-5", 0, "0.96", "4", True),
    ("one micro-dollar past the share", "claude-sonnet-5-5", 0, "0.960001", "4", False),
    # held-out: the worst case is 0.04 USD (4000 × $10/MTok), not the hold's 0.041232.
    ("held-out worst case 0.04", "claude-sonnet-5-5", 0, "0", "0.16", True),
    ("haiku: ceil(10/3) = 4 tokens", "claude-haiku-4-5", 10, "0", "0.080016", True),
    ("haiku: one micro-dollar less", "claude-haiku-4-5", 10, "0", "0.080012", False),
]


@pytest.mark.parametrize(
    ("label", "model", "chars", "spent", "cap", "allowed"),
    NIGHT_CASES,
    ids=[c[0] for c in NIGHT_CASES],
)
def test_the_night_share_decides_as_the_platform(
    label: str, model: str, chars: int, spent: str, cap: str, allowed: bool
) -> None:
    assert night_allows(model, chars, spent, cap) is allowed, label


def test_the_platforms_worst_case_is_exact() -> None:
    sonnet = DEFAULT_PRICES["claude-sonnet-5-5"]
    assert platform_worst_case_micros(sonnet, 0, 4000) == 40_000  # 0.04 USD
    assert platform_input_tokens(0) == 0
    assert platform_input_tokens(1) == 1
    assert platform_input_tokens(3) == 1
    assert platform_input_tokens(4) == 2
    with pytest.raises(ValueError):
        platform_input_tokens(-1)
    # The hold stays the gateway's own bound (bytes + framing): 0.041232 for the same call.
    bound = estimate_input_tokens(None, [{"role": "user", "content": ""}], None)
    assert worst_case_micros(sonnet, bound, 4000) == 41_232


# (label, assistant spent, day total, worst, cap, share, the platform's decision) — µ$
ASSISTANT_CASES = [
    ("well within both", 0, 0, 1_000_000, 20_000_000, "0.25", True),
    ("its share reached exactly", 4_000_000, 4_000_000, 1_000_000, 20_000_000, "0.25", True),
    ("its share crossed", 4_000_001, 4_000_001, 1_000_000, 20_000_000, "0.25", False),
    # The day's others spent the rest: the assistant is refused first, before the cap is.
    ("the rest of the cap kept for the others", 0, 14_000_000, 1_000_000, 20_000_000, "0.25", True),
    ("the others' part reached", 0, 14_000_001, 1_000_000, 20_000_000, "0.25", False),
    ("a share of 0 refuses every call", 0, 0, 1, 20_000_000, "0", False),
    ("a share of 0 lets a free call through", 0, 0, 0, 20_000_000, "0", True),
]


@pytest.mark.parametrize(
    ("label", "mine", "total", "worst", "cap", "share", "allowed"),
    ASSISTANT_CASES,
    ids=[c[0] for c in ASSISTANT_CASES],
)
def test_the_assistants_share_decides_as_the_platform(
    label: str, mine: int, total: int, worst: int, cap: int, share: str, allowed: bool
) -> None:
    decided = assistant_share_allows(
        assistant_spent_micros=mine,
        day_total_micros=total,
        worst_micros=worst,
        cap_micros=cap,
        share=Decimal(share),
    )
    assert decided is allowed, label


def test_a_share_outside_zero_one_is_refused() -> None:
    for share in ("-0.1", "1.5", "NaN"):
        with pytest.raises(ValueError):
            share_of_cap_micros(1_000_000, Decimal(share))


def test_the_platforms_nine_purposes_are_accepted() -> None:
    platform = [
        "test",
        "grade",
        "generate",
        "review",
        "poll",
        "assist",
        "describe",
        "domain",
        "concepts",
    ]
    assert list(PLATFORM_PURPOSES) == platform
    for name in platform:
        assert Purpose(name) is PLATFORM_PURPOSES[name]
    # Ours stay: lesson_fix (the lesson tool's) and assistant (the platform's `assist`).
    assert {Purpose.lesson_fix, Purpose.assistant} <= set(Purpose)
    assert ASSISTANT_PURPOSES == {Purpose.assist, Purpose.assistant}
