"""What a service runs besides its endpoints: JetStream consumers and periodic tasks.

Declared on the ServiceRuntime next to the endpoints (`add_stream`, `add_consumer`,
`add_periodic`); the lifespan starts them after NATS connects and the service's own start-up
hook ran, and stops them before the micro service and NATS go: periodic tasks first, then the
consumers (stop fetching, finish or nak in-flight work within the grace period).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client as NATS

from quiz_servicekit.jetstream import (
    CONSUMER_CHECK_INTERVAL_S,
    REPLICA_CHECK_INTERVAL_S,
    ConsumerSpec,
    JetStreamKit,
    StreamSpec,
)
from quiz_servicekit.metrics import ServiceMetrics
from quiz_servicekit.periodic import PeriodicMetrics, PeriodicTask


class BackgroundWork:
    """The streams, consumers and periodic tasks of one service (see the module docstring)."""

    def __init__(self, service: str, metrics: ServiceMetrics) -> None:
        self.jetstream = JetStreamKit(service, metrics)
        self.periodic: list[PeriodicTask] = []
        self._metrics = metrics
        self._periodic_metrics: PeriodicMetrics | None = None

    def add_stream(self, spec: StreamSpec) -> None:
        self.jetstream.add_stream(spec)

    def add_consumer(self, spec: ConsumerSpec[Any]) -> None:
        self.jetstream.add_consumer(spec)

    def add_periodic(
        self,
        name: str,
        interval_s: float,
        fn: Callable[[], Awaitable[object]],
        *,
        jitter: float = 0.1,
        run_at_start: bool = False,
    ) -> PeriodicTask:
        """Declare `fn` to run every `interval_s` s (± jitter) while the service runs."""
        if any(p.name == name for p in self.periodic):
            raise ValueError(f"periodic task {name} is declared twice")
        if self._periodic_metrics is None:
            self._periodic_metrics = PeriodicMetrics(self._metrics)
        task = PeriodicTask(
            name,
            interval_s,
            fn,
            jitter=jitter,
            run_at_start=run_at_start,
            metrics=self._periodic_metrics,
        )
        self.periodic.append(task)
        return task

    @property
    def has_consumers(self) -> bool:
        return bool(self.jetstream.consumers)

    async def start(self, nc: NATS, *, replicas: int = 1) -> None:
        """Declare and start everything; `replicas`: NATS_STREAM_REPLICAS of the streams.

        With streams to watch, a periodic task `stream_replicas` keeps their replica gauges
        (quiz_servicekit.jetstream) current; with consumers, `consumer_info` their pending and
        redelivered gauges.
        """
        await self.jetstream.start(nc, replicas=replicas)
        if self.jetstream.watched and not any(p.name == "stream_replicas" for p in self.periodic):
            self.add_periodic(
                "stream_replicas",
                REPLICA_CHECK_INTERVAL_S,
                self.jetstream.refresh_replicas,
                run_at_start=True,
            )
        if self.jetstream.workers and not any(p.name == "consumer_info" for p in self.periodic):
            self.add_periodic(
                "consumer_info",
                CONSUMER_CHECK_INTERVAL_S,
                self.jetstream.refresh_consumers,
                run_at_start=True,
            )
        for task in self.periodic:
            task.start()

    async def stop(self, grace_s: float = 10.0) -> None:
        await asyncio.gather(*(task.stop(grace_s) for task in self.periodic))
        await self.jetstream.stop(grace_s)

    async def ready(self) -> bool:
        return await self.jetstream.ready()
