"""Fixtures of the JetStream kit tests: names unique per test, a kit started on them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.js.errors import NotFoundError

from quiz_contracts.topology import StreamDecl
from quiz_servicekit.jetstream import ConsumerSpec, JetStreamKit
from quiz_servicekit.metrics import ServiceMetrics
from quiz_testkit.nats_server import nats_connect


@dataclass(frozen=True)
class Names:
    """Stream, subject, consumer and service names of one test (the server is session-wide)."""

    stream: str
    subject: str
    consumer: str
    service: str


@pytest.fixture
async def names(nats_url: str) -> AsyncIterator[Names]:
    tag = uuid.uuid4().hex[:10]
    names = Names(f"T{tag}", f"t{tag}.jobs", f"c{tag}", f"kit-{tag}")
    yield names
    nc = await nats_connect(nats_url)
    js = nc.jetstream()
    for stream, consumer in (
        (names.stream, None),
        ("DLQ_ADVISORIES", f"dlq-forwarder-{names.service}"),
    ):
        try:
            if consumer is None:
                await js.delete_stream(stream)
            else:
                await js.delete_consumer(stream, consumer)
        except NotFoundError:
            pass
    await nc.close()


KitFactory = Callable[..., AbstractAsyncContextManager[tuple[JetStreamKit, ServiceMetrics]]]


@pytest.fixture
def start_kit(nc: NATS, names: Names) -> Iterator[KitFactory]:
    """`async with start_kit(*consumer_specs, stream=None) as (kit, metrics)`: a running kit."""

    @asynccontextmanager
    async def start(
        *specs: ConsumerSpec[Any], stream: StreamDecl | None = None, service: str | None = None
    ) -> AsyncIterator[tuple[JetStreamKit, ServiceMetrics]]:
        metrics = ServiceMetrics(service or names.service)
        kit = JetStreamKit(service or names.service, metrics)
        kit.add_stream(stream or StreamDecl(names.stream, (names.subject,)))
        for spec in specs:
            kit.add_consumer(spec)
        await kit.start(nc)
        try:
            yield kit, metrics
        finally:
            await kit.stop(grace_s=1)

    yield start
