"""The edge's HTTP/1.1 protocols, httptools' and h11's, answer alike before the app is reached.

Each case runs a real uvicorn server on a socket with the protocol under test and a raw client;
the app behind it only says 200 (the refusals happen before it). The header limit's answers to
whole blocks are pinned in test_edge.py through the kit's own server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from quiz_contracts.limits import HTTP_MAX_HEADER_BYTES
from quiz_servicekit.app import bind_socket, uvicorn_server
from quiz_servicekit.http_protocol import EdgeH11Protocol, EdgeHttpToolsProtocol
from quiz_servicekit.settings import ServiceSettings

pytestmark = pytest.mark.integration


async def ok(scope: Scope, receive: Receive, send: Send) -> None:
    """200 with the request's header count, after reading the body."""
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    body = json.dumps({"headers": len(scope["headers"])}).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(params=[EdgeHttpToolsProtocol, EdgeH11Protocol], ids=["httptools", "h11"])
async def port(request: pytest.FixtureRequest) -> AsyncIterator[int]:
    sock = bind_socket("127.0.0.1", 0)
    config = uvicorn.Config(ok, http=request.param, log_config=None, lifespan="off")
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


def test_the_kit_serves_with_httptools() -> None:
    server = uvicorn_server(ok, ServiceSettings())  # type: ignore[arg-type]
    assert server.config.http is EdgeHttpToolsProtocol


async def test_a_header_block_without_an_end_is_refused_not_held(port: int) -> None:
    """A header value that never ends, sent a piece at a time: refused once the block is over the
    limit (httptools alone would buffer it whole), answered in JSON, the rest read and dropped."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"POST /x HTTP/1.1\r\nhost: x\r\nx-pad: ")
        sent = 0
        while sent < 4 * HTTP_MAX_HEADER_BYTES and not reader.at_eof():
            writer.write(b"p" * 4096)
            await writer.drain()
            sent += 4096
            await asyncio.sleep(0.001)
        answer = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 "), head
    assert b"connection: close" in head.lower()
    assert json.loads(body)["code"] == "payload_too_large"


@pytest.mark.parametrize("piece", [None, 1000], ids=["one-write", "in-pieces"])
async def test_a_block_within_the_limit_passes_and_the_connection_stays_open(
    port: int, piece: int | None
) -> None:
    pad = HTTP_MAX_HEADER_BYTES - 1_000
    request = (
        b"POST /x HTTP/1.1\r\nhost: x\r\nx-pad: " + b"p" * pad + b"\r\ncontent-length: 2\r\n\r\n{}"
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for _ in range(2):  # the same connection, twice: kept alive
            step = piece or len(request)
            for start in range(0, len(request), step):
                writer.write(request[start : start + step])
                await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            assert head.startswith(b"HTTP/1.1 200"), head
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            assert json.loads(await reader.readexactly(length)) == {"headers": 3}
    finally:
        writer.close()


async def test_a_malformed_request_line_is_400_json(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /x HTTP/1.1\r\nbad header\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), head
    assert json.loads(body)["code"] == "invalid_request"
