"""Browser harness of the poll pages: headless Debian Chromium driven by Playwright (no browser
download: `executable_path` is the system's chromium), the poll service itself on a real socket
(real NATS with JetStream, SQLite, its production frame interval), polls opened over NATS
(`poll.v1.open`) and participants that answer through real HTTP. No gateway runs, so the
service finds no model to call: turning the AI on is refused with `llm_unavailable` (ADR-072 §3).

The tests skip, saying why, only when Chromium or the playwright package is absent
(`scripts/ensure-test-tools.sh` installs Debian's chromium where it can). Screenshots go to
`.data/test-output/poll-pages/` (or `$POLL_PAGES_OUTPUT`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.poll import BrainstormOpen, PollAck
from quiz_poll.config import Settings
from quiz_poll.main import create_app
from quiz_servicekit.app import bind_socket, uvicorn_server
from quiz_servicekit.natsio import request
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import free_port

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
try:
    import playwright.async_api as pw
except ImportError:  # pragma: no cover - the dev group has it
    pw = None  # type: ignore[assignment]

SKIP_REASON = (
    "headless Chromium is not installed (Debian: apt-get install chromium; "
    "scripts/ensure-test-tools.sh does it as root)"
    if not Path(CHROMIUM).exists()
    else "the playwright package is missing (uv sync --all-packages)"
)
needs_chromium = pytest.mark.skipif(pw is None or not Path(CHROMIUM).exists(), reason=SKIP_REASON)
PROMPT = "Qu'est-ce qui caractérise le vivant ?"
ROOT = Path(__file__).resolve().parents[4]
OUTPUT = Path(os.environ.get("POLL_PAGES_OUTPUT") or ROOT / ".data" / "test-output" / "poll-pages")


@dataclass
class PollSite:
    """The running poll service: its URL, tokens for its people, polls opened over NATS."""

    url: str
    keys: SigningKeys
    nc: NATS
    settings: Settings
    port: int
    server: Any = None
    task: Any = None
    sock: Any = None
    stream_ids: list[str] = field(default_factory=list)

    async def open(
        self,
        evaluation: str,
        *,
        anonymous: bool = True,
        votes: bool = True,
        max_ideas: int = 5,
        prompt: str = PROMPT,
    ) -> None:
        """`poll.v1.open` as the platform sends it; then "Show votes" on, as a teacher would."""
        audience: dict[str, Any] = (
            {"kind": "anonymous"} if anonymous else {"kind": "classroom", "classroomId": "c1"}
        )
        body = BrainstormOpen.model_validate(
            {
                "evaluationId": evaluation,
                "teacherId": "teacher-1",
                "audience": audience,
                "question": {"prompt": prompt, "maxIdeas": max_ideas},
                "openedAt": datetime.now(UTC),
            }
        )
        await request(self.nc, subjects.POLL_OPEN, body, PollAck, timeout=10)
        if votes:
            async with httpx.AsyncClient() as http:
                r = await http.post(
                    f"{self.api(evaluation)}/reveal",
                    json={"votes": True},
                    headers={"Authorization": f"Bearer {self.staff(evaluation)}"},
                )
                r.raise_for_status()

    def staff(self, evaluation: str) -> str:
        return self.keys.mint("teacher-1", {f"evaluation:{evaluation}": {"role": "owner"}})

    def participant(self, evaluation: str, n: int) -> str:
        grant = {"role": "viewer", "attempt": f"attempt-{n}", "guest": True}
        return self.keys.mint(f"guest-{n}", {f"evaluation:{evaluation}": grant})

    def page_url(self, evaluation: str, page: str, token: str, lang: str | None = "en") -> str:
        """A page's URL; `lang=None` asks for no language (the page takes the poll's)."""
        query = f"?lang={lang}" if lang else ""
        return f"{self.url}/poll/{evaluation}/{page}{query}#token={token}"

    def api(self, evaluation: str) -> str:
        return f"{self.url}/app/api/evaluations/{evaluation}/poll"

    async def start(self) -> None:
        """Serves a new app instance on the site's port (the same database)."""
        app = create_app(self.settings)
        sock = bind_socket("127.0.0.1", self.port)
        app.state.bound_port = self.port
        server = uvicorn_server(app, self.settings)
        server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
        server.config.timeout_graceful_shutdown = 1
        self.server, self.task = server, asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.01)
        self.sock = sock

    async def stop(self) -> None:
        """Stops the service (open SSE streams are cut, as by a crash or a deploy)."""
        self.server.should_exit = True
        await self.task
        self.sock.close()


@pytest.fixture
async def site(
    signing_keys: SigningKeys, nats_url: str, nc: NATS, tmp_path: Path
) -> AsyncIterator[PollSite]:
    settings = Settings(
        nats_url=nats_url,
        jwks_file=str(signing_keys.jwks_path),
        database_url=f"sqlite:///{tmp_path / 'poll.db'}",
        availability_ttl_s=0,
        log_level="WARNING",
    )
    port = free_port()
    s = PollSite(f"http://127.0.0.1:{port}", signing_keys, nc, settings, port)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    assert pw is not None
    async with pw.async_playwright() as p:
        # --no-sandbox: CI and these machines run as root, where Chromium's sandbox refuses.
        b = await p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield b
        finally:
            await b.close()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


@pytest.fixture(scope="session")
def output() -> Path:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    return OUTPUT
