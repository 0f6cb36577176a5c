"""The service kit against a real nats-server, real HTTP and real tokens."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI
from nats.aio.client import Client as NATS
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from quiz_contracts.base import WireModel
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_servicekit.app import ServiceRuntime, create_service_app
from quiz_servicekit.auth import Access, require_grant
from quiz_servicekit.micro import EndpointSpec, MsgContext
from quiz_servicekit.natsio import request
from quiz_servicekit.settings import ServiceSettings
from quiz_testkit.jwt_keys import SigningKeys, forged_token
from quiz_testkit.serving import serve_app

pytestmark = pytest.mark.integration


class Echo(WireModel):
    text: str
    delay_s: float = 0


class Echoed(WireModel):
    text: str
    in_flight_max: int = 0


def backend_app(settings: ServiceSettings) -> FastAPI:
    """Service B: a NATS endpoint that echoes, fails on demand, and counts concurrency."""
    runtime = ServiceRuntime(
        name="kit-backend", version="0.1.0", description="b", settings=settings
    )
    state = {"now": 0, "max": 0}

    async def echo(req: Echo, ctx: MsgContext) -> Echoed:
        if req.text == "fail":
            raise ContractError(ErrorCode.fix_stale, "the draft moved on")
        if req.text == "crash":
            raise RuntimeError("boom")
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(req.delay_s)
        state["now"] -= 1
        return Echoed(text=req.text.upper(), in_flight_max=state["max"])

    runtime.add_endpoint(EndpointSpec("echo", "kit.v1.echo", Echo, echo))
    return create_service_app(runtime)


def frontend_app(settings: ServiceSettings) -> FastAPI:
    """Service A: an HTTP route guarded by a grant that calls B over NATS."""
    router = APIRouter()
    runtime = ServiceRuntime(
        name="kit-frontend", version="0.1.0", description="a", settings=settings
    )
    guard = require_grant("thing:{id}", "contributor")

    @router.post("/things/{id}/echo")
    async def call_echo(id: str, body: Echo, access: Access = Depends(guard)) -> Echoed:
        return await request(runtime.nc, "kit.v1.echo", body, Echoed, timeout=5)

    return create_service_app(runtime, routers=[router])


@pytest.fixture
async def services(nats_url: str, signing_keys: SigningKeys) -> AsyncIterator[tuple[str, str]]:
    settings = ServiceSettings(nats_url=nats_url, jwks_file=str(signing_keys.jwks_path))
    async with serve_app(backend_app(settings), settings) as b_url:
        async with serve_app(frontend_app(settings), settings) as a_url:
            yield a_url, b_url


async def test_trace_continues_from_http_through_nats(
    services: tuple[str, str], signing_keys: SigningKeys, spans: InMemorySpanExporter
) -> None:
    a_url, _ = services
    token = signing_keys.mint("t1", {"thing:9": {"role": "contributor"}})
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{a_url}/things/9/echo",
            json={"text": "hi"},
            headers={"authorization": f"Bearer {token}", "traceparent": traceparent},
        )
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "HI"
    await asyncio.sleep(0.05)
    finished = spans.get_finished_spans()
    server = next(s for s in finished if s.kind == SpanKind.SERVER and "/things/" in s.name)
    producer = next(s for s in finished if s.kind == SpanKind.PRODUCER)
    consumer = next(s for s in finished if s.kind == SpanKind.CONSUMER)
    assert {s.context.trace_id for s in (server, producer, consumer)} == {
        0x0AF7651916CD43DD8448EB211C80319C
    }
    assert server.parent is not None and server.parent.span_id == 0xB7AD6B7169203331
    assert producer.parent is not None and producer.parent.span_id == server.context.span_id
    assert consumer.parent is not None and consumer.parent.span_id == producer.context.span_id
    assert server.resource.attributes.get("service.name")


@pytest.mark.parametrize(
    ("case", "status", "code"),
    [
        ("no_token", 401, "unauthorized"),
        ("forged", 401, "unauthorized"),
        ("expired", 401, "unauthorized"),
        ("other_resource", 404, "not_found"),
        ("low_role", 404, "not_found"),
        ("granted", 200, None),
    ],
)
async def test_route_access(
    services: tuple[str, str], signing_keys: SigningKeys, case: str, status: int, code: str | None
) -> None:
    a_url, _ = services
    tokens = {
        "no_token": None,
        "forged": forged_token("t1", {"thing:9": {"role": "owner"}}),
        "expired": signing_keys.mint("t1", {"thing:9": {"role": "owner"}}, ttl_s=-60),
        "other_resource": signing_keys.mint("t1", {"thing:8": {"role": "owner"}}),
        "low_role": signing_keys.mint("t1", {"thing:9": {"role": "viewer"}}),
        "granted": signing_keys.mint("t1", {"thing:9": {"role": "owner"}}),
    }
    token = tokens[case]
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient() as http:
        r = await http.post(f"{a_url}/things/9/echo", json={"text": "x"}, headers=headers)
    assert r.status_code == status, r.text
    if code:
        assert r.json()["code"] == code
        assert r.json()["message"]


async def test_contract_errors_cross_nats(services: tuple[str, str], nc: NATS) -> None:
    with pytest.raises(ContractError) as stale:
        await request(nc, "kit.v1.echo", Echo(text="fail"), Echoed, timeout=5)
    assert stale.value.code == ErrorCode.fix_stale
    with pytest.raises(ContractError) as crash:
        await request(nc, "kit.v1.echo", Echo(text="crash"), Echoed, timeout=5)
    assert crash.value.code == ErrorCode.internal
    reply = await nc.request("kit.v1.echo", b'{"nope": 1}', timeout=5)
    assert reply.headers and reply.headers["Nats-Service-Error"] == "invalid_request"
    assert json.loads(reply.data)["code"] == "invalid_request"


async def test_no_responders_and_timeout_are_contract_errors(nc: NATS) -> None:
    with pytest.raises(ContractError) as e:
        await request(
            nc,
            "nobody.v1.here",
            Echo(text="x"),
            Echoed,
            timeout=1,
            unavailable_code=ErrorCode.runner_unavailable,
        )
    assert e.value.code == ErrorCode.runner_unavailable
    sub = await nc.subscribe("silent.v1.here")  # listens, never answers
    with pytest.raises(ContractError) as t:
        await request(nc, "silent.v1.here", Echo(text="x"), Echoed, timeout=0.2)
    assert t.value.code == ErrorCode.timeout
    await sub.unsubscribe()


async def test_endpoint_handles_requests_concurrently(services: tuple[str, str], nc: NATS) -> None:
    calls = [
        request(nc, "kit.v1.echo", Echo(text="x", delay_s=0.3), Echoed, timeout=5) for _ in range(8)
    ]
    replies = await asyncio.gather(*calls)
    # One subscription callback at a time would never see two requests in flight.
    assert max(r.in_flight_max for r in replies) >= 4


async def test_health_ready_metrics_and_micro_discovery(
    services: tuple[str, str], nc: NATS
) -> None:
    a_url, b_url = services
    async with httpx.AsyncClient() as http:
        for url in (a_url, b_url):
            assert (await http.get(f"{url}/healthz")).status_code == 200
            ready = await http.get(f"{url}/readyz")
            assert ready.status_code == 200 and ready.json()["checks"]["nats"] is True
        await http.post(f"{a_url}/things/1/echo", json={"text": "x"})
        metrics = (await http.get(f"{a_url}/metrics")).text
    assert (
        'quiz_kit_frontend_http_requests_total{method="POST",route="/things/{id}/echo",status="401"}'
        in metrics
    )
    info = await nc.request("$SRV.INFO.kit-backend", b"", timeout=2)
    body = json.loads(info.data)
    assert body["metadata"]["http_url"] == b_url
    assert [e["subject"] for e in body["endpoints"]] == ["kit.v1.echo"]


async def test_every_service_serves_its_docs_without_a_cdn(services: tuple[str, str]) -> None:
    a_url, _ = services
    async with httpx.AsyncClient() as http:
        for page in ("/docs", "/redoc"):
            html = await http.get(f"{a_url}{page}")
            assert html.status_code == 200 and "/docs-assets/" in html.text
            assert "cdn." not in html.text and "fonts.googleapis" not in html.text, page
        for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
            assert (await http.get(f"{a_url}/docs-assets/{asset}")).status_code == 200
        # Nor does a script the pages load fetch anything remote (issue 34: ReDoc's logo came
        # from cdn.redoc.ly; Swagger's validator badge from validator.swagger.io).
        redoc = await http.get(f"{a_url}/redoc")
        scripts = re.findall(r'<script src="([^"]+)"', redoc.text)
        assert scripts == ["/docs-assets/redoc.offline.js"], scripts
        js = await http.get(f"{a_url}{scripts[0]}")
        assert js.status_code == 200 and len(js.content) > 100_000
        assert "javascript" in js.headers["content-type"]
        assert "cdn.redoc.ly" not in js.text and "/docs-assets/favicon.png" in js.text
        swagger = (await http.get(f"{a_url}/docs")).text
        assert '"validatorUrl": null' in swagger, swagger
        assert (await http.get(f"{a_url}/openapi.json")).status_code == 200
