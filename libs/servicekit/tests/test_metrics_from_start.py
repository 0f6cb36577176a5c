"""What a service exports before anything happens (issue 35): the bus connection as a gauge that
follows the client, counters at 0 for every label value known at start, and the consumers'
pending and redelivered messages as the server counts them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter
from prometheus_client.parser import text_string_to_metric_families

from quiz_contracts.base import WireModel
from quiz_contracts.topology import StreamDecl
from quiz_servicekit.app import ServiceRuntime, create_service_app
from quiz_servicekit.jetstream import ConsumerSpec, Delivery, publish
from quiz_servicekit.micro import EndpointSpec, MsgContext
from quiz_servicekit.settings import ServiceSettings
from quiz_testkit.nats_server import NatsServer, nats_connect
from quiz_testkit.scripts import eventually
from quiz_testkit.serving import serve_app

pytestmark = pytest.mark.integration


class Job(WireModel):
    job_id: str


async def samples(http: httpx.AsyncClient, url: str) -> dict[tuple[str, frozenset[Any]], float]:
    text = (await http.get(f"{url}/metrics")).text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def key(name: str, **labels: str) -> tuple[str, frozenset[Any]]:
    return name, frozenset(labels.items())


async def test_connected_gauge_and_counters_at_zero_before_any_traffic(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats", locked=False).start()
    router = APIRouter()

    @router.get("/things/{id}")
    async def thing(id: str) -> dict[str, str]:
        return {"id": id}

    async def echo(job: Job, ctx: MsgContext) -> Job:
        return job

    settings = ServiceSettings(nats_url=server.url)
    runtime = ServiceRuntime(name="kit-zero", version="0.1.0", description="z", settings=settings)
    runtime.add_endpoint(EndpointSpec("echo", "kitzero.v1.echo", Job, echo))
    p = "quiz_kit_zero"
    try:
        async with (
            serve_app(create_service_app(runtime, routers=[router]), settings) as url,
            httpx.AsyncClient() as http,
        ):
            found = await samples(http, url)
            assert found[key(f"{p}_nats_connected")] == 1
            for outcome in ("ok", "internal"):
                assert found[key(f"{p}_nats_requests_total", endpoint="echo", outcome=outcome)] == 0
            for status in ("200", "500"):
                labels = {"route": "/things/{id}", "method": "GET", "status": status}
                assert found[key(f"{p}_http_requests_total", **labels)] == 0
            # The broker goes: the gauge says so at the next scrape, without waiting for a ping.
            server.stop()

            async def disconnected() -> bool:
                return (await samples(http, url))[key(f"{p}_nats_connected")] == 0

            await eventually(disconnected, timeout_s=30)
            server.start()

            async def back() -> bool:
                return (await samples(http, url))[key(f"{p}_nats_connected")] == 1

            await eventually(back, timeout_s=30)
    finally:
        server.stop()


async def test_consumer_counters_at_zero_and_pending_as_the_server_counts(
    names: Any, nats_url: str
) -> None:
    release = asyncio.Event()

    async def handle(job: Job, delivery: Delivery) -> None:
        await release.wait()

    settings = ServiceSettings(nats_url=nats_url)
    runtime = ServiceRuntime(
        name=names.service, version="0.1.0", description="kit", settings=settings
    )
    runtime.add_stream(StreamDecl(names.stream, (names.subject,)))
    runtime.add_consumer(
        ConsumerSpec(names.consumer, names.stream, Job, handle, max_in_flight=1, fetch_timeout_s=1)
    )
    p = "quiz_" + names.service.replace("-", "_")
    nc = await nats_connect(nats_url)
    try:
        async with (
            serve_app(create_service_app(runtime), settings) as url,
            httpx.AsyncClient() as http,
        ):
            found = await samples(http, url)
            c = names.consumer
            for reason in ("invalid", "permanent", "exhausted", "max_deliveries", "terminated"):
                assert found[key(f"{p}_dead_letters_total", consumer=c, reason=reason)] == 0
            for outcome in ("ok", "retry", "invalid", "permanent", "exhausted"):
                assert found[key(f"{p}_consumer_messages_total", consumer=c, outcome=outcome)] == 0
            assert (
                found[key(f"{p}_periodic_runs_total", task="consumer_info", outcome="error")] == 0
            )
            js = nc.jetstream()
            for i in range(3):
                await publish(js, names.subject, Job(job_id=str(i)), msg_id=str(i))

            async def one_held_two_waiting() -> bool:
                # The periodic task reads consumer info every 15 s; run it now.
                await runtime.jetstream.refresh_consumers()
                now = await samples(http, url)
                return (
                    now[key(f"{p}_consumer_ack_pending", consumer=c)] == 1
                    and now[key(f"{p}_consumer_pending", consumer=c)] == 2
                )

            await eventually(one_held_two_waiting, timeout_s=30)
            assert (await samples(http, url))[key(f"{p}_consumer_redelivered", consumer=c)] == 0
            release.set()

            async def drained() -> bool:
                await runtime.jetstream.refresh_consumers()
                now = await samples(http, url)
                return (
                    now[key(f"{p}_consumer_pending", consumer=c)] == 0
                    and now[key(f"{p}_consumer_ack_pending", consumer=c)] == 0
                )

            await eventually(drained, timeout_s=30)
    finally:
        await nc.close()
