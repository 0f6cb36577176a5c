"""Money and token counts are never negative (issue 29 item 2). Pure.

A settle adds its cost to the day's spend: a negative one (−5,000,000 µ$ in the issue) would
take the spend below zero and let the cap be overspent by as much. Every ledger row and hold
checks its amounts (`check_amounts`) when it is made, whatever made it (a call, a journal
replay, a test); the contracts refuse them on the wire too (quiz_contracts.llm_journal,
`Usage`). Micro-USD are ints: non-finite values cannot occur there; a Decimal in USD is checked
finite (`check_usd`).
"""

from __future__ import annotations

from decimal import Decimal


def check_amounts(what: str, **amounts: int) -> None:
    """ValueError naming the first amount that is not an int ≥ 0 (bool refused too)."""
    for name, value in amounts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{what}: {name} must be an integer >= 0, not {value!r}")


def check_usd(what: str, value: Decimal) -> Decimal:
    """`value` when finite and ≥ 0; ValueError otherwise."""
    if not value.is_finite() or value < 0:
        raise ValueError(f"{what}: must be a finite amount >= 0, not {value}")
    return value
