"""Tokens as deployed (issue 29, items 3 and 4), on a real HTTP server and a real nats-server.

Item 3: with JWT_ISSUER and JWT_AUDIENCE set, a token of another issuer or for another audience
(or without either claim) answers 401 on every kind of route; QUIZ_ENV=production refuses to
start without them. Item 4: keys from a JWKS URL served by a real key server on loopback that
can be made to hang: a request waits a bounded time, one with a known `kid` never waits, and an
unknown `kid` triggers one refresh per interval, however many requests carry it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi import APIRouter, Depends, FastAPI, Request
from jwt.algorithms import OKPAlgorithm

from quiz_servicekit.app import ServiceRuntime, create_service_app
from quiz_servicekit.auth import Access, Identity, caller_identity, current_identity, require_grant
from quiz_servicekit.settings import ServiceSettings
from quiz_testkit.jwt_keys import DEV_AUDIENCE, DEV_ISSUER, SigningKeys
from quiz_testkit.serving import serve_app

pytestmark = pytest.mark.integration


def kit_app(settings: ServiceSettings) -> FastAPI:
    """Three routes, one per way a service reads its caller: require_grant, caller_identity
    (a dependency) and current_identity (called in the route, as review's do)."""
    router = APIRouter()
    runtime = ServiceRuntime(name="kit-tokens", version="0.1.0", description="t", settings=settings)

    @router.get("/things/{id}")
    async def granted(id: str, access: Access = Depends(require_grant("thing:{id}", "viewer"))):  # type: ignore[no-untyped-def]
        return {"sub": access.identity.sub}

    @router.get("/me")
    async def me(identity: Identity = Depends(caller_identity)):  # type: ignore[no-untyped-def]
        return {"sub": identity.sub}

    @router.post("/called")
    async def called(request: Request):  # type: ignore[no-untyped-def]
        return {"sub": (await current_identity(request)).sub}

    return create_service_app(runtime, routers=[router])


ROUTES = [("GET", "/things/9"), ("GET", "/me"), ("POST", "/called")]


async def statuses(url: str, token: str) -> list[int]:
    async with httpx.AsyncClient(timeout=30) as http:
        return [
            (
                await http.request(method, url + path, headers={"authorization": f"Bearer {token}"})
            ).status_code
            for method, path in ROUTES
        ]


@pytest.fixture
async def checked(nats_url: str, signing_keys: SigningKeys) -> AsyncIterator[str]:
    settings = ServiceSettings(
        nats_url=nats_url,
        jwks_file=str(signing_keys.jwks_path),
        jwt_issuer=DEV_ISSUER,
        jwt_audience=DEV_AUDIENCE,
    )
    async with serve_app(kit_app(settings), settings) as url:
        yield url


@pytest.mark.parametrize(
    "claims",
    [
        {"iss": "https://other-idp.example.invalid/"},
        {"aud": "another-application"},
        {"aud": ["another-application", "yet-another"]},
        {"iss": None},
        {"aud": None},
    ],
    ids=["wrong-iss", "wrong-aud", "aud-list-without-ours", "no-iss", "no-aud"],
)
async def test_a_token_for_another_issuer_or_audience_is_refused_on_every_route(
    checked: str, signing_keys: SigningKeys, claims: dict[str, Any]
) -> None:
    grants = {"thing:9": {"role": "owner"}}
    assert await statuses(checked, signing_keys.mint("t1", grants)) == [200, 200, 200]
    refused = signing_keys.mint("t1", grants, **claims)
    assert await statuses(checked, refused) == [401, 401, 401]
    async with httpx.AsyncClient() as http:
        r = await http.get(f"{checked}/me", headers={"authorization": f"Bearer {refused}"})
    assert r.json()["code"] == "unauthorized"
    assert "another" not in r.json()["message"] and "other-idp" not in r.json()["message"]


def test_production_refuses_to_start_without_issuer_and_audience(tmp_path: Path) -> None:
    """The service's own console entry point, as a pod runs it (nothing is contacted)."""
    (tmp_path / "jwks.json").write_text('{"keys": []}')
    base = {
        **os.environ,
        "QUIZ_ENV": "production",
        "JWKS_FILE": str(tmp_path / "jwks.json"),
        "QUIZ_DATA_DIR": str(tmp_path),
        "NATS_URL": "nats://127.0.0.1:1",
    }
    for key in ("JWT_ISSUER", "JWT_AUDIENCE"):
        base.pop(key, None)
    code = "from quiz_servicekit.settings import ServiceSettings; ServiceSettings()"
    for env in (base, {**base, "JWT_ISSUER": DEV_ISSUER}, {**base, "JWT_AUDIENCE": DEV_AUDIENCE}):
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode != 0
        assert "QUIZ_ENV=production needs" in done.stderr, done.stderr
        for name in ("JWT_ISSUER", "JWT_AUDIENCE"):
            assert (name in done.stderr) == (name not in env), (name, done.stderr)
    both = {**base, "JWT_ISSUER": DEV_ISSUER, "JWT_AUDIENCE": DEV_AUDIENCE}
    done = subprocess.run(
        [sys.executable, "-c", code], env=both, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_a_service_entry_point_refuses_production_without_them(tmp_path: Path) -> None:
    """`quiz-editor-assist` (a real service's console script) exits before serving."""
    script = Path(sys.executable).parent / "quiz-editor-assist"
    if not script.exists():
        pytest.skip("editor-assist is not installed in this environment")
    (tmp_path / "jwks.json").write_text('{"keys": []}')
    env = {**os.environ, "QUIZ_ENV": "production", "JWKS_FILE": str(tmp_path / "jwks.json")}
    env.pop("JWT_ISSUER", None)
    env.pop("JWT_AUDIENCE", None)
    done = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "QUIZ_ENV=production needs JWT_ISSUER, JWT_AUDIENCE" in done.stderr, done.stderr


# --- item 4: keys from a URL ---------------------------------------------------------------


class KeyServer:
    """A JWKS endpoint on loopback that counts its requests and can be made to hang."""

    def __init__(self) -> None:
        self.jwks: dict[str, Any] = {"keys": []}
        self.requests = 0
        self.hang = False
        self.arrived = threading.Event()  # a request reached the server while it hangs
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                if server.hang:
                    server.arrived.set()
                    server.release.wait(60)
                body = json.dumps(server.jwks).encode()
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up first

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/.well-known/jwks.json"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def publish(self, *keys: SigningKeys) -> None:
        entries = []
        for k in keys:
            jwk = json.loads(OKPAlgorithm.to_jwk(k.private_key.public_key()))
            entries.append({**jwk, "kid": k.kid, "alg": "EdDSA", "use": "sig"})
        self.jwks = {"keys": entries}


@pytest.fixture
def key_server() -> Iterator[KeyServer]:
    server = KeyServer()
    server.thread.start()
    yield server
    server.release.set()
    server.httpd.shutdown()
    server.httpd.server_close()


def new_keys(kid: str, tmp_path: Path) -> SigningKeys:
    return SigningKeys(Ed25519PrivateKey.generate(), tmp_path / f"{kid}.json", kid=kid)


async def test_a_hung_key_server_holds_no_request_for_long_and_known_keys_never_wait(
    nats_url: str, key_server: KeyServer, tmp_path: Path
) -> None:
    current, rotated = new_keys("current-1", tmp_path), new_keys("rotated-2", tmp_path)
    key_server.publish(current)
    settings = ServiceSettings(nats_url=nats_url, jwks_url=key_server.url, jwks_fetch_timeout_s=5)
    grants = {"thing:9": {"role": "viewer"}}
    async with serve_app(kit_app(settings), settings) as url:
        known = current.mint("t1", grants)
        assert await statuses(url, known) == [200, 200, 200]
        fetched = key_server.requests
        assert fetched == 1  # the start-up fetch: the first request found the keys there

        key_server.hang = True
        async with httpx.AsyncClient(timeout=30) as http:
            auth = {"authorization": f"Bearer {rotated.mint('t2', grants)}"}
            unknown = asyncio.create_task(http.get(f"{url}/me", headers=auth))
            assert await asyncio.to_thread(key_server.arrived.wait, 30)
            # While that request waits for the hung key server, a known key answers at once:
            # the loop is free and nothing queues behind the fetch.
            for _ in range(5):
                r = await http.get(f"{url}/me", headers={"authorization": f"Bearer {known}"})
                assert r.status_code == 200
            assert not unknown.done()
            # The waiting request is answered (401: no such key yet) while the key server
            # still hangs: the wait is bounded (JWKS_WAIT_S), not the key server's to decide.
            r = await unknown
            assert not key_server.release.is_set()
            assert r.status_code == 401 and r.json()["code"] == "unauthorized"
            # A flood of unknown kids: all refused, and the key server asked nothing more
            # (one refresh at a time, at most one per JWKS_MIN_REFRESH_S).
            invented = [new_keys(f"x{i}", tmp_path).mint("t", grants) for i in range(20)]
            flood = await asyncio.gather(
                *(http.get(f"{url}/me", headers={"authorization": f"Bearer {t}"}) for t in invented)
            )
        assert {f.status_code for f in flood} == {401}
        assert key_server.requests == fetched + 1
        key_server.release.set()


async def test_a_rotated_key_is_fetched_and_a_flood_of_unknown_kids_costs_one_fetch(
    nats_url: str, key_server: KeyServer, tmp_path: Path
) -> None:
    current, rotated = new_keys("current-1", tmp_path), new_keys("rotated-2", tmp_path)
    key_server.publish(current)
    settings = ServiceSettings(nats_url=nats_url, jwks_url=key_server.url)
    grants = {"thing:9": {"role": "viewer"}}
    async with serve_app(kit_app(settings), settings) as url:
        assert await statuses(url, current.mint("t1", grants)) == [200, 200, 200]
        assert key_server.requests == 1
        # The provider rotates: the new kid triggers a refresh, and the token passes.
        key_server.publish(current, rotated)
        assert await statuses(url, rotated.mint("t2", grants)) == [200, 200, 200]
        assert key_server.requests == 2
        # Within the interval, kids nobody published are refused without asking again.
        async with httpx.AsyncClient(timeout=30) as http:
            for i in range(10):
                token = new_keys(f"invented-{i}", tmp_path).mint("t3", grants)
                r = await http.get(f"{url}/me", headers={"authorization": f"Bearer {token}"})
                assert r.status_code == 401
        assert key_server.requests == 2
        # The keys held keep answering.
        assert await statuses(url, current.mint("t1", grants)) == [200, 200, 200]
