"""`ServiceRef.resolve`: the service object as a FastAPI dependency, resolved on the event loop.

The proof holds every worker thread of the loop's pool (anyio's default limiter, the one FastAPI
runs a sync dependency on): a route taking the service through `ref.resolve` still answers, one
taking it through the sync `Depends(ref)` waits until a thread is free again.
"""

import asyncio
import inspect
from collections.abc import AsyncIterator
from typing import Annotated

import anyio.to_thread
import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI

from quiz_servicekit.app import ServiceRef, ServiceRuntime, create_service_app
from quiz_servicekit.settings import ServiceSettings
from quiz_testkit.serving import serve_app

pytestmark = pytest.mark.integration


class Greeter:
    def hello(self) -> dict[str, str]:
        return {"hello": "world"}


def greeter_app(settings: ServiceSettings, ref: ServiceRef[Greeter]) -> FastAPI:
    router = APIRouter()
    GreeterDep = Annotated[Greeter, Depends(ref.resolve)]

    @router.get("/async")
    async def on_loop(greeter: GreeterDep) -> dict[str, str]:
        return greeter.hello()

    @router.get("/sync")
    async def via_thread(greeter: Annotated[Greeter, Depends(ref)]) -> dict[str, str]:
        return greeter.hello()

    runtime = ServiceRuntime(name="kit-ref", version="0.1.0", description="r", settings=settings)
    return create_service_app(runtime, routers=[router])


@pytest.fixture
async def served(nats_url: str) -> AsyncIterator[tuple[str, ServiceRef[Greeter]]]:
    settings = ServiceSettings(nats_url=nats_url)
    ref = ServiceRef[Greeter]("greeter")
    app = greeter_app(settings, ref)
    async with serve_app(app, settings) as url:
        yield url, ref


def test_resolve_is_a_coroutine_function() -> None:
    # FastAPI awaits a coroutine function on the loop and sends anything else to a thread.
    assert inspect.iscoroutinefunction(ServiceRef[Greeter]("greeter").resolve)


async def test_resolve_answers_while_every_worker_thread_is_busy(
    served: tuple[str, ServiceRef[Greeter]],
) -> None:
    url, ref = served
    ref.set(Greeter())
    limiter = anyio.to_thread.current_default_thread_limiter()
    tokens = limiter.total_tokens
    limiter.total_tokens = 1
    try:
        async with httpx.AsyncClient(base_url=url) as client:
            await client.get("/healthz")  # the connection is open before the pool is taken
            async with limiter:
                on_loop = await asyncio.wait_for(client.get("/async"), 5)
                assert on_loop.status_code == 200
                assert on_loop.json() == {"hello": "world"}
                # The control: the same route on the sync dependency cannot answer now.
                via_thread = asyncio.ensure_future(client.get("/sync"))
                done, _ = await asyncio.wait({via_thread}, timeout=0.5)
                assert not done
            assert (await asyncio.wait_for(via_thread, 5)).json() == {"hello": "world"}
    finally:
        limiter.total_tokens = tokens


async def test_resolve_before_start_is_unavailable_json(
    served: tuple[str, ServiceRef[Greeter]],
) -> None:
    url, _ = served
    async with httpx.AsyncClient(base_url=url) as client:
        reply = await client.get("/async")
    assert reply.status_code == 503
    assert reply.json() == {"code": "unavailable", "message": "the greeter is not started"}
