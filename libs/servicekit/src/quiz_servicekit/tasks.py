"""A tracked set of background tasks: spawned, kept, their failures told, stopped together.

asyncio keeps only a weak reference to a task: one spawned and forgotten can be collected
mid-run, and its exception is never seen ("Task exception was never retrieved" at best). A
`TaskSet` holds a strong reference to each task until it ends, logs (ERROR, with traceback) and
counts every task that ends by an exception — a task is expected to handle the errors it
knows — and stops them at shutdown:
- `wait(timeout_s)` lets the tasks in hand finish (bounded), cancelling none;
- `drain(grace_s)` lets them finish within `grace_s`, then cancels and awaits the rest;
- `close()` cancels every task and awaits them all (tasks spawned meanwhile too).
A cancelled task is not a failure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class TaskSet:
    """The background tasks of one owner (see the module docstring); `name` labels the logs.

    `on_failure(task, error)`, when given, is called for each task that ended by an exception
    (after the log line): a metric's hook.
    """

    def __init__(
        self,
        name: str,
        *,
        on_failure: Callable[[asyncio.Task[Any], BaseException], None] | None = None,
    ) -> None:
        self.name = name
        self.failures = 0  # tasks ended by an exception since start
        self._on_failure = on_failure
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        """Tasks running now."""
        return len(self._tasks)

    def __bool__(self) -> bool:
        return bool(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Run `coro` as a task held until it ends; the task (await or shield it if need be)."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()  # retrieved here, whether or not someone awaits the task
        if error is None:
            return
        self.failures += 1
        log.error("%s: background task %s failed", self.name, task.get_name(), exc_info=error)
        if self._on_failure is not None:
            self._on_failure(task, error)

    async def wait(self, timeout_s: float | None = None) -> int:
        """Wait until the tasks in hand end, at most `timeout_s` s; how many still run."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)
        return len(self._tasks)

    async def drain(self, grace_s: float, monotonic: Callable[[], float] = time.monotonic) -> int:
        """Let the tasks finish within `grace_s` s, then cancel the rest; how many were cancelled.

        Tasks spawned during the grace period are waited for within the same deadline.
        """
        deadline = monotonic() + grace_s
        while self._tasks and (left := deadline - monotonic()) > 0:
            await asyncio.wait(set(self._tasks), timeout=left)
        cancelled = len(self._tasks)
        await self.close()
        return cancelled

    async def close(self) -> None:
        """Cancel every task and wait until all ended (those they spawn on the way too)."""
        while self._tasks:
            tasks = set(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
