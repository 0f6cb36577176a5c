"""How long a caller still waits for its answer (pure: the clock is given)."""

from __future__ import annotations

from collections.abc import Callable

from quiz_contracts.llm import CompleteRequest


def time_left_s(req: CompleteRequest, default_s: float, clock: Callable[[], float]) -> float:
    """Seconds the caller still waits: its `deadline_s` (else `default_s`) from now, cut by its
    absolute `deadline_at` (≤ 0 once passed)."""
    left = req.deadline_s or default_s
    if req.deadline_at is not None:
        left = min(left, req.deadline_at.timestamp() - clock())
    return left
