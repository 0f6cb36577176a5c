"""Browser harness of the poll pages: headless Debian Chromium driven by Playwright (no browser
download: `executable_path` is the system's chromium), a poll server on a real socket, and
participants that answer through real HTTP.

The tests skip, saying why, only when Chromium or the playwright package is absent
(`scripts/ensure-test-tools.sh` installs Debian's chromium where it can). Screenshots go to
`.data/test-output/poll-pages/` (or `$POLL_PAGES_OUTPUT`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from quiz_poll.config import Settings
from quiz_servicekit.auth import JwtVerifier
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.serving import serve_app

from .fixture_api import Poll, fixture_app, open_poll

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
ROOT = Path(__file__).resolve().parents[4]
OUTPUT = Path(os.environ.get("POLL_PAGES_OUTPUT") or ROOT / ".data" / "test-output" / "poll-pages")


@dataclass
class PollSite:
    """A running poll server: its URL, its polls, and tokens for its people."""

    url: str
    polls: dict[str, Poll]
    keys: SigningKeys

    def open(self, evaluation: str, *, anonymous: bool = True) -> Poll:
        return open_poll(self.polls, evaluation, anonymous=anonymous)

    def staff(self, evaluation: str) -> str:
        return self.keys.mint("teacher-1", {f"evaluation:{evaluation}": {"role": "owner"}})

    def participant(self, evaluation: str, n: int) -> str:
        grant = {"role": "viewer", "attempt": f"attempt-{n}", "guest": True}
        return self.keys.mint(f"guest-{n}", {f"evaluation:{evaluation}": grant})

    def page_url(self, evaluation: str, page: str, token: str, lang: str = "en") -> str:
        return f"{self.url}/poll/{evaluation}/{page}?lang={lang}#token={token}"

    def api(self, evaluation: str) -> str:
        return f"{self.url}/app/api/evaluations/{evaluation}/poll"


@pytest.fixture
async def site(signing_keys: SigningKeys) -> AsyncIterator[PollSite]:
    app, polls = fixture_app(JwtVerifier(jwks_file=str(signing_keys.jwks_path)))
    async with serve_app(app, Settings(log_level="WARNING")) as url:
        yield PollSite(url, polls, signing_keys)


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
