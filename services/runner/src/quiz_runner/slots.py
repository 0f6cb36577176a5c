"""Back-pressure: a fixed number of slots, taken without waiting or refused at once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from quiz_contracts.errors import ContractError, ErrorCode


class Slots:
    """N numbered slots; `take` never queues, it refuses with `runner_busy` when all are busy."""

    def __init__(self, total: int, retry_after_s: float = 1.0) -> None:
        if total < 1:
            raise ValueError("at least one slot")
        self.total = total
        self.retry_after_s = retry_after_s
        self._free = list(range(total - 1, -1, -1))  # pop() hands out slot 0 first
        self.refused = 0

    @property
    def busy(self) -> int:
        """Slots taken now."""
        return self.total - len(self._free)

    @property
    def free(self) -> int:
        """Slots free now."""
        return len(self._free)

    @contextmanager
    def take(self) -> Iterator[int]:
        """Hold one slot (its number picks the sandbox uid) for the block, or `runner_busy`."""
        if not self._free:
            self.refused += 1
            raise ContractError(
                ErrorCode.runner_busy,
                f"all {self.total} runner slots are busy",
                retry_after_s=self.retry_after_s,
            )
        slot = self._free.pop()
        try:
            yield slot
        finally:
            self._free.append(slot)
