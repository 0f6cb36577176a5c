"""Shares of the day's cap, decided as the platform decides them (issue 31 item 1). Pure.

Two rules of the platform (FACTS E and E2) that sit beside the cap:

- **The night's share** (ADR-060 §5, FACTS E): before each call the night stops when
  `spent + worst > share` (equality allowed), its `worst` being the platform's own estimate
  of a call: `ceil(prompt_chars / 3)` tokens at the input price plus every allowed output
  token at the output price (`platform_worst_case_micros`). The review service decides; the
  gateway computes that estimate with its prices (`UsageReply.share_estimate_usd`), the night
  compares (`within_share`).
- **The assistant's share** (ADR-080 §4, `shareAllows`): an assistant call passes only when
  the assistant's own spend today plus the call's worst case stays within `share × cap`, AND
  the day's total plus the worst case stays within `cap − share × cap` — the rest of the cap
  is kept for everyone else, so the assistant is refused first as the cap nears
  (`assistant_share_allows`). Its refusal is `llm_budget_exhausted` and writes nothing.

Money is integer micro-dollars; the share a Decimal fraction in [0, 1]. No float anywhere.
"""

from __future__ import annotations

from decimal import Decimal

from quiz_llm_gateway.domain.pricing import ModelPrice

# The platform counts a prompt "generously, one token per three characters" (FACTS E).
PLATFORM_CHARS_PER_TOKEN = 3


def platform_input_tokens(prompt_chars: int) -> int:
    """ceil(prompt_chars / 3): the platform's token count of a prompt of that many chars."""
    if prompt_chars < 0:
        raise ValueError(f"prompt_chars must be >= 0, not {prompt_chars}")
    return -(-prompt_chars // PLATFORM_CHARS_PER_TOKEN)


def platform_worst_case_micros(price: ModelPrice, prompt_chars: int, max_tokens: int) -> int:
    """The platform's worst case of a call (FACTS E `worstCase`), in micro-dollars:
    (ceil(prompt_chars / 3) × input + max_tokens × output) / 10⁶ USD, rounded up to the
    micro-dollar (exact for the platform's whole-dollar prices: sonnet-5-5 with 0 chars and
    4000 tokens is 40,000 µ$ = 0.04 USD)."""
    return price.cost_micros(platform_input_tokens(prompt_chars), max_tokens)


def within_share(spent_micros: int, worst_micros: int, share_micros: int | Decimal) -> bool:
    """The night's rule: the next call may start when `spent + worst <= share` (equality
    allowed; FACTS E "stops when spent + worstCase > share")."""
    return spent_micros + worst_micros <= share_micros


def share_of_cap_micros(cap_micros: int, share: Decimal) -> Decimal:
    """`share × cap` in micro-dollars, exact (a Decimal: never rounded either way).
    ValueError for a share outside [0, 1]."""
    if not share.is_finite() or not Decimal(0) <= share <= Decimal(1):
        raise ValueError(f"a share of the cap must lie in [0, 1], not {share}")
    return Decimal(cap_micros) * share


def assistant_share_allows(
    *,
    assistant_spent_micros: int,
    day_total_micros: int,
    worst_micros: int,
    cap_micros: int,
    share: Decimal,
) -> bool:
    """FACTS E2 `shareAllows` (ADR-080 §4): whether an assistant call may be held.

    `assistant_spent_micros`: the assistant's spend today (both its names, `assistant` and
    `assist`), its calls in flight at their worst case; `day_total_micros`: every purpose's
    spend today plus what is held; `worst_micros`: this call's worst case. Passes when
    `assistant + worst <= share × cap` AND `total + worst <= cap − share × cap`.
    """
    part = share_of_cap_micros(cap_micros, share)
    return (
        assistant_spent_micros + worst_micros <= part
        and day_total_micros + worst_micros <= cap_micros - part
    )
