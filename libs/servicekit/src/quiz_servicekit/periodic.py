"""Periodic tasks: `every(interval_s, fn)` with jitter, logged failures, metrics, clean shutdown.

The next run starts `interval_s` (± `jitter`, a fraction of it) after the previous run ENDS, so a
slow run never overlaps the next one and replicas started together drift apart instead of
hitting the database in step. A failing run is logged and counted; the loop goes on. `stop()`
cancels a sleeping task at once and lets a run in progress finish within a grace period.

Time is injected (`sleep`, `clock`, `rng`) so tests need no patching and no real waiting.

Metrics (prefix `quiz_<service>_`, on the service's registry):
- `periodic_runs_total{task,outcome}`: outcome `ok`, `error` or `cancelled`
- `periodic_run_duration_seconds{task}`
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator

from prometheus_client import Counter, Histogram

from quiz_servicekit.metrics import LATENCY_BUCKETS, ServiceMetrics, zero

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]


PERIODIC_OUTCOMES = ("ok", "error", "cancelled")


class PeriodicMetrics:
    """Runs and durations of a service's periodic tasks."""

    def __init__(self, metrics: ServiceMetrics) -> None:
        p = metrics.prefix
        self.runs = Counter(
            f"{p}_periodic_runs_total",
            "Runs of periodic tasks, by task and outcome (ok, error, cancelled).",
            ["task", "outcome"],
            registry=metrics.registry,
        )
        self.duration = Histogram(
            f"{p}_periodic_run_duration_seconds",
            "Duration of periodic task runs, by task.",
            ["task"],
            buckets=LATENCY_BUCKETS,
            registry=metrics.registry,
        )


class PeriodicTask:
    """`fn` run every `interval_s` seconds (± jitter) until `stop()`; see the module docstring."""

    def __init__(
        self,
        name: str,
        interval_s: float,
        fn: Callable[[], Awaitable[object]],
        *,
        jitter: float = 0.1,
        run_at_start: bool = False,
        metrics: PeriodicMetrics | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.perf_counter,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"periodic task {name}: interval_s must be > 0, got {interval_s}")
        if not 0 <= jitter < 1:
            raise ValueError(f"periodic task {name}: jitter is a fraction in [0, 1), got {jitter}")
        self.name = name
        self.interval_s = interval_s
        self.jitter = jitter
        self.run_at_start = run_at_start
        self.runs = 0
        self.failures = 0
        self._fn = fn
        self._metrics = metrics
        self._sleep = sleep
        self._clock = clock
        self._rng = rng
        self._task: asyncio.Task[None] | None = None
        self._in_run = False
        self._stopping = False
        if metrics is not None:
            # From the first scrape, so a task's first failure is an increase (issue 35).
            zero(metrics.runs, [name], PERIODIC_OUTCOMES)

    def next_delay(self) -> float:
        """Seconds until the next run: uniform in interval_s × [1 − jitter, 1 + jitter]."""
        return self.interval_s * (1 + self.jitter * (2 * self._rng() - 1))

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> PeriodicTask:
        """Start the loop in the running event loop (idempotent)."""
        if self._task is None:
            self._stopping = False
            self._task = asyncio.create_task(self._loop(), name=f"periodic:{self.name}")
        return self

    async def stop(self, grace_s: float = 5.0) -> None:
        """Cancel a sleeping loop now; a run in progress gets `grace_s` to finish first."""
        self._stopping = True
        task = self._task
        if task is None or task.done():
            return
        if self._in_run:
            await asyncio.wait({task}, timeout=grace_s)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def run_once(self) -> bool:
        """One run of `fn`, timed, counted and logged on failure; True when it succeeded."""
        started = self._clock()
        outcome = "ok"
        self._in_run = True
        try:
            await self._fn()
            return True
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception:
            outcome = "error"
            self.failures += 1
            log.exception(
                "periodic task %s failed; it runs again in about %gs", self.name, self.interval_s
            )
            return False
        finally:
            self._in_run = False
            self.runs += 1
            if self._metrics is not None:
                self._metrics.runs.labels(self.name, outcome).inc()
                self._metrics.duration.labels(self.name).observe(self._clock() - started)

    async def _loop(self) -> None:
        if not self.run_at_start:
            await self._sleep(self.next_delay())
        while not self._stopping:
            await self.run_once()
            if self._stopping:
                return
            await self._sleep(self.next_delay())


class PeriodicTasks:
    """A service's periodic tasks (`ServiceRuntime.add_periodic`): declared before start-up,
    started together once the service is built, stopped together at shutdown."""

    def __init__(self, metrics: ServiceMetrics) -> None:
        self.tasks: list[PeriodicTask] = []
        self._service_metrics = metrics
        self._metrics: PeriodicMetrics | None = None

    def __iter__(self) -> Iterator[PeriodicTask]:
        return iter(self.tasks)

    def __contains__(self, name: object) -> bool:
        return any(task.name == name for task in self.tasks)

    def add(
        self,
        name: str,
        interval_s: float,
        fn: Callable[[], Awaitable[object]],
        *,
        jitter: float = 0.1,
        run_at_start: bool = False,
    ) -> PeriodicTask:
        """Declare `fn` to run every `interval_s` s (± jitter × interval); ValueError for a
        name declared twice. Its metrics are created with the first task (none without)."""
        if name in self:
            raise ValueError(f"periodic task {name} is declared twice")
        if self._metrics is None:
            self._metrics = PeriodicMetrics(self._service_metrics)
        task = PeriodicTask(
            name, interval_s, fn, jitter=jitter, run_at_start=run_at_start, metrics=self._metrics
        )
        self.tasks.append(task)
        return task

    def start(self) -> None:
        for task in self.tasks:
            task.start()

    async def stop(self, grace_s: float = 10.0) -> None:
        await asyncio.gather(*(task.stop(grace_s) for task in self.tasks))


def every(
    interval_s: float,
    fn: Callable[[], Awaitable[object]],
    *,
    name: str,
    jitter: float = 0.1,
    run_at_start: bool = False,
    metrics: PeriodicMetrics | None = None,
    sleep: Sleep = asyncio.sleep,
    clock: Clock = time.perf_counter,
    rng: Callable[[], float] = random.random,
) -> PeriodicTask:
    """A started PeriodicTask: `fn` every `interval_s` s (± `jitter` × interval) until `stop()`."""
    return PeriodicTask(
        name,
        interval_s,
        fn,
        jitter=jitter,
        run_at_start=run_at_start,
        metrics=metrics,
        sleep=sleep,
        clock=clock,
        rng=rng,
    ).start()
