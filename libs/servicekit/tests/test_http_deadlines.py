"""Slow and odd clients at the HTTP edge (issue 29, item 7), against a real uvicorn server with
the edge's protocol and a raw socket client.

Deadlines are set short here (a fraction of a second) so that each case ends soon; what is
asserted is the outcome (an answer, a close), never how long it took.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from quiz_servicekit.app import bind_socket, uvicorn_server
from quiz_servicekit.http_protocol import EdgeConfig, EdgeHttpToolsProtocol
from quiz_servicekit.settings import ServiceSettings

pytestmark = pytest.mark.integration

# Long enough that a test never waits on it by mistake, short enough to bound a broken case.
GUARD_S = 30


async def ok(scope: Scope, receive: Receive, send: Send) -> None:
    """200 with the body's length, after reading the body (`/slow`: 3 s later)."""
    if scope["path"] == "/slow":
        await asyncio.sleep(3)
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = json.dumps({"size": size}).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


Serve = Callable[..., contextlib.AbstractAsyncContextManager[int]]


@pytest.fixture
def serve() -> Serve:
    @contextlib.asynccontextmanager
    async def start(**limits: Any) -> AsyncIterator[int]:
        sock = bind_socket("127.0.0.1", 0)
        keep_alive = limits.pop("keep_alive", 5)
        config = EdgeConfig(
            ok,
            http=EdgeHttpToolsProtocol,
            log_config=None,
            lifespan="off",
            timeout_keep_alive=keep_alive,
            **limits,
        )
        server = uvicorn.Server(config)
        server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            yield sock.getsockname()[1]
        finally:
            server.should_exit = True
            await task
            sock.close()

    return start


def parse(answer: bytes) -> tuple[int, bytes, bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), head.lower(), body


async def exchange(port: int, *writes: bytes) -> bytes:
    """Send `writes`, then read until the server closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for i, data in enumerate(writes):
            if i:
                await asyncio.sleep(0.05)  # separate reads on the server, most likely
            writer.write(data)
            await writer.drain()
        return await asyncio.wait_for(reader.read(), GUARD_S)
    finally:
        writer.close()


async def test_a_head_that_never_ends_is_answered_408_and_closed(serve: Serve) -> None:
    async with serve(head_timeout_s=0.3) as port:
        answer = await exchange(port, b"POST /x HTTP/1.1\r\nhost: x\r\n")
    status, head, body = parse(answer)
    assert status == 408 and b"connection: close" in head
    assert json.loads(body)["code"] == "timeout"


async def test_a_connection_that_sends_nothing_is_closed(serve: Serve) -> None:
    async with serve(head_timeout_s=0.3) as port:
        answer = await exchange(port)
    assert parse(answer)[0] == 408


async def test_a_head_trickled_a_byte_at_a_time_is_cut_off(serve: Serve) -> None:
    """Each byte resets nothing: the deadline counts from the request's first byte (slowloris)."""
    async with serve(head_timeout_s=0.5) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"GET /x HTTP/1.1\r\nhost: x\r\nx-slow: ")
            sent = 0
            while not reader.at_eof() and sent < 2000:
                writer.write(b"a")
                await writer.drain()
                sent += 1
                await asyncio.sleep(0.01)
                with contextlib.suppress(TimeoutError):
                    answer = await asyncio.wait_for(reader.read(), 0.01)
                    break
            else:
                answer = b""
        finally:
            writer.close()
    assert sent < 2000, "the trickle was never cut off"
    assert parse(answer)[0] == 408


async def test_kept_alive_requests_pass_and_an_idle_connection_is_closed(serve: Serve) -> None:
    async with serve(head_timeout_s=0.5, keep_alive=1) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for _ in range(3):
                writer.write(b"GET /x HTTP/1.1\r\nhost: x\r\n\r\n")
                await writer.drain()
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD_S)
                assert head.startswith(b"HTTP/1.1 200")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
            # Idle after the last answer: the server closes (uvicorn's keep-alive timer), with
            # no answer written, as no request began.
            assert await asyncio.wait_for(reader.read(), GUARD_S) == b""
        finally:
            writer.close()


async def test_pipelined_requests_split_anywhere_all_pass(serve: Serve) -> None:
    two = (
        b"GET /a HTTP/1.1\r\nhost: x\r\n\r\n"
        b"POST /b HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\nhi"
    )
    three = two + b"GET /c HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    async with serve() as port:
        for cut in (0, 5, 20, 31, 40, len(two) - 1, len(two) + 3):
            answer = await exchange(port, three[:cut], three[cut:])
            assert answer.count(b"HTTP/1.1 200") == 3, (cut, answer)
            assert b'{"size": 2}' in answer


@pytest.mark.parametrize(
    "request_bytes",
    [b"GET /\r\n", b"GET /\r\n\r\n", b"GET / HTTP/0.9\r\n\r\n", b"GET / HTTP/2.0\r\n\r\n"],
    ids=["http-0.9", "http-0.9-blank", "version-0.9", "version-2.0"],
)
async def test_anything_but_http_1_is_refused_400_json(serve: Serve, request_bytes: bytes) -> None:
    # The head deadline is long: a 400 (not a 408) is the request line's refusal.
    async with serve(head_timeout_s=10) as port:
        answer = await exchange(port, request_bytes)
    status, head, body = parse(answer)
    assert status == 400 and b"connection: close" in head
    assert json.loads(body)["code"] == "invalid_request"


async def test_http_1_0_is_still_answered(serve: Serve) -> None:
    async with serve() as port:
        answer = await exchange(port, b"GET / HTTP/1.0\r\n\r\n")
    assert parse(answer)[0] == 200


async def test_a_body_that_stops_coming_closes_the_connection(serve: Serve) -> None:
    async with serve(body_idle_timeout_s=0.3) as port:
        answer = await exchange(
            port, b"POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\nabc"
        )
    assert answer == b""  # closed; the app saw the client leave and answered nothing


async def test_past_the_connection_cap_a_new_connection_gets_503(serve: Serve) -> None:
    async with serve(max_connections=3, head_timeout_s=10) as port:
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        try:
            status, _, body = parse(await exchange(port, b"GET / HTTP/1.1\r\nhost: x\r\n\r\n"))
            assert status == 503 and json.loads(body)["code"] == "unavailable"
            # One of the three leaves: there is room again.
            held.pop()[1].close()
            for _ in range(100):
                answer = await exchange(port, b"GET / HTTP/1.0\r\n\r\n")
                if parse(answer)[0] == 200:
                    break
                await asyncio.sleep(0.05)  # the server has not seen the close yet
            assert parse(answer)[0] == 200
        finally:
            for _, writer in held:
                writer.close()


def test_every_figure_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_HEAD_TIMEOUT_S", "7")
    monkeypatch.setenv("HTTP_BODY_IDLE_TIMEOUT_S", "8")
    monkeypatch.setenv("HTTP_KEEP_ALIVE_S", "3")
    monkeypatch.setenv("HTTP_MAX_CONNECTIONS", "99")
    config = uvicorn_server(ok, ServiceSettings()).config  # type: ignore[arg-type]
    assert isinstance(config, EdgeConfig)
    assert (config.head_timeout_s, config.body_idle_timeout_s) == (7, 8)
    assert (config.timeout_keep_alive, config.max_connections) == (3, 99)
    defaults = ServiceSettings.model_construct()
    assert (defaults.http_head_timeout_s, defaults.http_keep_alive_s) == (10, 5)
    # A request head may never be given more than 10 s (issue 29, item 7).
    monkeypatch.setenv("HTTP_HEAD_TIMEOUT_S", "60")
    with pytest.raises(ValueError, match=r"http_head_timeout_s|HTTP_HEAD_TIMEOUT_S"):
        ServiceSettings()


async def test_a_pipelined_head_is_not_timed_out_while_the_app_answers_the_one_before(
    serve: Serve,
) -> None:
    """The deadline is the client's: a head that waits behind a slow answer is not cut."""
    async with serve(head_timeout_s=1) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\nGET /x HTTP/1.1\r\nhost: x\r\n")
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD_S)
            assert head.startswith(b"HTTP/1.1 200"), head
            writer.write(b"connection: close\r\n\r\n")
            await writer.drain()
            rest = await asyncio.wait_for(reader.read(), GUARD_S)
        finally:
            writer.close()
    assert rest.count(b"HTTP/1.1 200") == 1, rest
