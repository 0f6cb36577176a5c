"""Bad input at the edge costs nothing and always answers `{code, message}` (issue 8, point 3).

Every case goes through a real HTTP server (uvicorn on a socket) or a real nats-server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI
from nats.aio.client import Client as NATS

from quiz_contracts.base import WireModel
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.limits import (
    HTTP_MAX_BODY_BYTES,
    HTTP_MAX_HEADER_BYTES,
    MAX_JSON_DEPTH,
    MAX_TOKEN_BYTES,
)
from quiz_servicekit.app import ServiceRuntime, create_service_app
from quiz_servicekit.auth import Access, require_grant
from quiz_servicekit.micro import EndpointSpec, MsgContext
from quiz_servicekit.natsio import request
from quiz_servicekit.settings import ServiceSettings
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.serving import serve_app

pytestmark = pytest.mark.integration

SERVICE_MAX = 64_000  # this test service's default body maximum (HTTP_MAX_BODY_BYTES setting)
ROUTE_MAX = 2_000  # one route's own maximum


class Note(WireModel):
    text: str
    extra: object | None = None
    count: int | None = None
    flag: bool | None = None


def edge_app(settings: ServiceSettings) -> FastAPI:
    """Guarded routes, a route with its own maximum, a route and an endpoint that crash."""
    runtime = ServiceRuntime(name="kit-edge", version="0.1.0", description="e", settings=settings)
    router = APIRouter()

    @router.post("/notes/{id}")
    async def post_note(
        id: str, body: Note, _: Access = Depends(require_grant("note:{id}", "contributor"))
    ) -> Note:
        return body

    @router.post("/notes/{id}/short", max_body_size=ROUTE_MAX)
    async def post_short(
        id: str, body: Note, _: Access = Depends(require_grant("note:{id}", "contributor"))
    ) -> Note:
        return body

    @router.post("/crash")
    async def crash(body: Note) -> Note:
        raise RuntimeError(f"boom with {body.text}")

    async def echo(req: Note, _: MsgContext) -> Note:
        if req.text == "crash":
            raise KeyError("secret-internal-detail")
        return req

    runtime.add_endpoint(EndpointSpec("echo", "kit.v1.edge", Note, echo))
    return create_service_app(runtime, routers=[router])


@pytest.fixture
async def edge(nats_url: str, signing_keys: SigningKeys) -> AsyncIterator[str]:
    settings = ServiceSettings(
        nats_url=nats_url,
        jwks_file=str(signing_keys.jwks_path),
        jwt_audience="quiz-platform",
        http_max_body_bytes=SERVICE_MAX,
    )
    async with serve_app(edge_app(settings), settings) as url:
        yield url


@pytest.fixture
def token(signing_keys: SigningKeys) -> str:
    return signing_keys.mint("t1", {"note:1": {"role": "owner"}}, aud="quiz-platform")


def nested(depth: int) -> bytes:
    """`{"text": "x", "extra": [[[…]]]}` with the arrays `depth` deep (the object adds one)."""
    return b'{"text": "x", "extra": ' + b"[" * depth + b"]" * depth + b"}"


def assert_error(r: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["code"] == code and body["message"]
    return dict(body)


def test_the_limits_live_in_the_contracts() -> None:
    assert ServiceSettings().http_max_body_bytes == HTTP_MAX_BODY_BYTES
    assert len(nested(300)) < 700 and 300 > MAX_JSON_DEPTH  # issue 8's "659 bytes, 300 deep"


async def test_a_declared_oversized_body_is_refused_before_the_token_is_looked_at(
    edge: str,
) -> None:
    big = json.dumps({"text": "x" * (SERVICE_MAX + 1)}).encode()
    async with httpx.AsyncClient() as http:
        # No token at all: the size is judged first, so the answer is 413, not 401.
        r = await http.post(
            f"{edge}/notes/1", content=big, headers={"content-type": "application/json"}
        )
    assert_error(r, 413, "payload_too_large")


async def test_a_chunked_oversized_body_is_refused_as_it_streams(edge: str, token: str) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"text": "'
        for _ in range(40):
            yield b"x" * 4096  # 160 KiB in all, no Content-Length
        yield b'"}'

    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{edge}/notes/1",
            content=chunks(),
            headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
        )
    assert "content-length" not in r.request.headers
    assert_error(r, 413, "payload_too_large")


async def test_a_route_sets_its_own_maximum(edge: str, token: str) -> None:
    body = json.dumps({"text": "x" * ROUTE_MAX}).encode()  # under the service's, over the route's
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    async with httpx.AsyncClient() as http:
        short = await http.post(f"{edge}/notes/1/short", content=body, headers=headers)
        plain = await http.post(f"{edge}/notes/1", content=body, headers=headers)
        metrics = (await http.get(f"{edge}/metrics")).text
    assert_error(short, 413, "payload_too_large")
    assert plain.status_code == 200
    # The refusal is counted under the route's template, not as an unmatched request.
    assert 'route="/notes/{id}/short",status="413"' in metrics


@pytest.mark.parametrize(
    "body",
    [nested(300), nested(MAX_JSON_DEPTH), b'{"text": "\\ud800"}', b'{"text": "a\\udc00"}'],
    ids=["nested-300", "nested-limit", "lone-high-surrogate", "lone-low-surrogate"],
)
async def test_hostile_json_is_invalid_request_over_http(
    edge: str, token: str, body: bytes
) -> None:
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{edge}/notes/1",
            content=body,
            headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
        )
    assert_error(r, 400, "invalid_request")


async def test_json_within_the_depth_and_a_surrogate_pair_pass(edge: str, token: str) -> None:
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    async with httpx.AsyncClient() as http:
        deep_enough = await http.post(
            f"{edge}/notes/1", content=nested(MAX_JSON_DEPTH - 1), headers=headers
        )
        emoji = await http.post(
            f"{edge}/notes/1", content=b'{"text": "\\ud83d\\ude00 [{"}', headers=headers
        )
    assert deep_enough.status_code == 200, deep_enough.text
    assert emoji.status_code == 200 and emoji.json()["text"] == "\U0001f600 [{"


@pytest.mark.parametrize(
    "body", [nested(300), b'{"text": "\\ud800"}'], ids=["nested-300", "lone-surrogate"]
)
async def test_hostile_json_is_invalid_request_over_nats(edge: str, nc: NATS, body: bytes) -> None:
    reply = await nc.request("kit.v1.edge", body, timeout=5)
    assert reply.headers and reply.headers["Nats-Service-Error"] == "invalid_request"
    assert reply.headers["Nats-Service-Error-Code"] == "400"
    assert json.loads(reply.data)["code"] == "invalid_request"


async def test_an_unexpected_exception_is_internal_json_with_a_request_id(
    edge: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="quiz_servicekit.http"):
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{edge}/crash", json={"text": "t"})
    body = assert_error(r, 500, "internal")
    request_id = r.headers["x-request-id"]
    assert body["details"] == {"request_id": request_id}
    assert "boom" not in r.text, "the exception stays in the log"
    assert any(request_id in rec.getMessage() and rec.exc_info for rec in caplog.records)


async def test_a_crashing_nats_endpoint_answers_internal_with_a_request_id(
    edge: str, nc: NATS, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="quiz_servicekit.micro"):
        with pytest.raises(ContractError) as e:
            await request(nc, "kit.v1.edge", Note(text="crash"), Note, timeout=5)
    assert e.value.code == ErrorCode.internal
    assert "secret-internal-detail" not in e.value.message
    request_id = (e.value.details or {})["request_id"]
    assert any(request_id in rec.getMessage() for rec in caplog.records)


@pytest.mark.parametrize("sub", ["", "   "], ids=["empty", "blank"])
async def test_a_token_without_a_subject_is_refused(
    edge: str, signing_keys: SigningKeys, sub: str
) -> None:
    token = signing_keys.mint(sub, {"note:1": {"role": "owner"}}, aud="quiz-platform")
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{edge}/notes/1", json={"text": "x"}, headers={"authorization": f"Bearer {token}"}
        )
    assert_error(r, 401, "unauthorized")


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "ECHO-ME-AUD"},
        {"aud": "quiz-platform", "nbf": 4_102_444_800, "note": "ECHO-ME-NBF"},
        {"aud": "quiz-platform", "grants": {"note:1": "ECHO-ME-GRANT"}},
        {"aud": "quiz-platform", "sub": ["ECHO-ME-SUB"]},
    ],
    ids=["audience", "not-yet-valid", "grants", "sub-type"],
)
async def test_401_messages_never_echo_claim_values(
    edge: str, signing_keys: SigningKeys, claims: dict[str, object]
) -> None:
    grants = claims.pop("grants", {"note:1": {"role": "owner"}})
    sub = claims.pop("sub", "t1")
    token = signing_keys.mint(sub, grants, **claims)  # type: ignore[arg-type]
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{edge}/notes/1", json={"text": "x"}, headers={"authorization": f"Bearer {token}"}
        )
    body = assert_error(r, 401, "unauthorized")
    assert "ECHO-ME" not in str(body["message"])


async def test_a_request_over_the_bus_maximum_is_a_contract_error(edge: str, nc: NATS) -> None:
    huge = Note(text="x" * (nc.max_payload + 1))
    with pytest.raises(ContractError) as e:
        await request(nc, "kit.v1.edge", huge, Note, timeout=5)
    assert e.value.code == ErrorCode.payload_too_large
    assert e.value.status == 413


def padded_token(keys: SigningKeys, length: int) -> str:
    """A validly signed token for note:1 about `length` characters long (a padding claim)."""
    token = keys.mint("t1", {"note:1": {"role": "owner"}}, aud="quiz-platform", pad="")
    pad = (length - len(token)) * 3 // 4
    return keys.mint("t1", {"note:1": {"role": "owner"}}, aud="quiz-platform", pad="x" * pad)


@pytest.mark.parametrize("length", [100_000, 1_300_000], ids=["100kB", "1.3MB"])
async def test_a_signed_token_over_the_header_limit_is_413_json_not_a_reset(
    edge: str, signing_keys: SigningKeys, length: int
) -> None:
    """Issue 21 item 5: uvicorn's h11 answered a plain-text 400 and closed the socket under the
    client, which saw a connection reset (httpx.ReadError)."""
    token = padded_token(signing_keys, length)
    assert len(token) > HTTP_MAX_HEADER_BYTES
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{edge}/notes/1", json={"text": "x"}, headers={"authorization": f"Bearer {token}"}
        )
    body = assert_error(r, 413, "payload_too_large")
    assert f"over {HTTP_MAX_HEADER_BYTES} bytes" in str(body["message"])
    assert r.headers["connection"] == "close"


async def test_a_signed_token_over_its_own_limit_is_401_and_one_within_it_passes(
    edge: str, signing_keys: SigningKeys
) -> None:
    long_token = padded_token(signing_keys, MAX_TOKEN_BYTES + 4_000)
    fitting = padded_token(signing_keys, MAX_TOKEN_BYTES - 100)
    assert len(long_token) > MAX_TOKEN_BYTES >= len(fitting)
    async with httpx.AsyncClient() as http:
        refused = await http.post(
            f"{edge}/notes/1", json={"text": "x"}, headers={"authorization": f"Bearer {long_token}"}
        )
        passed = await http.post(
            f"{edge}/notes/1", json={"text": "x"}, headers={"authorization": f"Bearer {fitting}"}
        )
    body = assert_error(refused, 401, "unauthorized")
    assert f"at most {MAX_TOKEN_BYTES}" in str(body["message"])
    assert passed.status_code == 200, passed.text


async def raw_exchange(url: str, request: bytes, piece: int | None = None) -> bytes:
    """Send `request` on a fresh socket (all at once, or `piece` bytes at a time), read to EOF."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        step = piece or len(request)
        for start in range(0, len(request), step):
            writer.write(request[start : start + step])
            await writer.drain()
            if piece:
                await asyncio.sleep(0.001)
        return await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()


def status_and_body(answer: bytes) -> tuple[bytes, dict[str, object]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), head
    return head.split(b"\r\n")[0], json.loads(body)


@pytest.mark.parametrize("piece", [None, 1024], ids=["one-write", "in-pieces"])
async def test_the_header_limit_holds_however_the_bytes_arrive(
    edge: str, piece: int | None
) -> None:
    """h11 alone measured only a header block still incomplete: one that arrived in a single
    read passed whatever its size."""
    request = (
        b"POST /notes/1 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"x-pad: " + b"p" * (HTTP_MAX_HEADER_BYTES + 10) + b"\r\ncontent-length: 12\r\n\r\n"
        b'{"text":"x"}'
    )
    status, body = status_and_body(await raw_exchange(edge, request, piece))
    assert status == b"HTTP/1.1 413 ", status
    assert body["code"] == "payload_too_large"


async def test_a_malformed_request_is_400_json(edge: str) -> None:
    status, body = status_and_body(await raw_exchange(edge, b"NOT HTTP AT ALL\r\n\r\n"))
    assert status.startswith(b"HTTP/1.1 400"), status
    assert body["code"] == "invalid_request"


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
async def test_a_token_time_written_as_text_is_refused(
    edge: str, signing_keys: SigningKeys, claim: str
) -> None:
    """Issue 21 item 5: PyJWT reads int("…"), so `"exp": "4102444800"` passed as a time."""
    valid_number = {"exp": int(time.time()) + 3600, "nbf": 0, "iat": int(time.time())}[claim]
    token = signing_keys.mint(
        "t1", {"note:1": {"role": "owner"}}, aud="quiz-platform", **{claim: str(valid_number)}
    )
    as_number = signing_keys.mint(
        "t1", {"note:1": {"role": "owner"}}, aud="quiz-platform", **{claim: valid_number}
    )
    async with httpx.AsyncClient() as http:
        refused = await http.post(
            f"{edge}/notes/1", json={"text": "x"}, headers={"authorization": f"Bearer {token}"}
        )
        passed = await http.post(
            f"{edge}/notes/1", json={"text": "x"}, headers={"authorization": f"Bearer {as_number}"}
        )
    body = assert_error(refused, 401, "unauthorized")
    assert body["message"] == f"invalid token: the {claim} claim is not a number"
    assert passed.status_code == 200, passed.text


@pytest.mark.parametrize(
    "body",
    [{"text": "x", "count": "1"}, {"text": "x", "flag": "yes"}, {"text": "x", "flag": 1}],
    ids=["int-as-text", "bool-as-text", "bool-as-number"],
)
async def test_wire_numbers_and_booleans_are_not_read_from_text_over_http_and_nats(
    edge: str, token: str, nc: NATS, body: dict[str, object]
) -> None:
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{edge}/notes/1", json=body, headers={"authorization": f"Bearer {token}"}
        )
    assert_error(r, 400, "invalid_request")
    reply = await nc.request("kit.v1.edge", json.dumps(body).encode(), timeout=5)
    assert reply.headers and reply.headers["Nats-Service-Error"] == "invalid_request"
