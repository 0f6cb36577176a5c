"""One person's runner use, bounded (issue 29, item 6): at most `per_person` settle runs of
theirs at once on this replica (`EDITOR_ASSIST_RUNNER_PER_PERSON`).

One more is refused at once, not queued: the wand comes back with its proposal and
`incomplete: runner_unavailable` ("the runner is busy"), as with a full runner. A replay whose
run was kept (quiz_editor_assist.settled) takes no place here: it runs nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class PersonQuota:
    """Runs in progress per person; `hold(person)` yields whether one more may start."""

    def __init__(self, per_person: int) -> None:
        if per_person < 1:
            raise ValueError("per_person must be at least 1")
        self.per_person = per_person
        self._running: dict[str, int] = {}

    def running(self, person: str) -> int:
        return self._running.get(person, 0)

    @contextmanager
    def hold(self, person: str) -> Iterator[bool]:
        """True (and a place held until the block ends) when `person` is under the bound."""
        if self._running.get(person, 0) >= self.per_person:
            yield False
            return
        self._running[person] = self._running.get(person, 0) + 1
        try:
            yield True
        finally:
            left = self._running[person] - 1
            if left:
                self._running[person] = left
            else:
                del self._running[person]
