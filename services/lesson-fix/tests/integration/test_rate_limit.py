"""The per-person rate limit on a real database (SQLite, and PostgreSQL when it answers), shared
by two replicas; verification switched off and misconfigured."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from quiz_lesson_fix.config import Settings
from quiz_lesson_fix.main import create_app
from quiz_lesson_fix.models import MIGRATIONS
from quiz_lesson_fix.repository import RateLimitRepository
from quiz_servicekit.db import Database
from quiz_servicekit.migrate import upgrade
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.serving import serve_app
from quiz_testkit.siteverify_stub import SiteverifyStub

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CASE = "fr_grounding_single"
STALE = "E_GROUNDING_SINGLE:s1q2:GONE"  # found after the limit: a cheap 409 that costs a token


async def test_concurrent_takes_of_one_person_never_overdraw(database_url: str) -> None:
    await asyncio.to_thread(upgrade, database_url, MIGRATIONS)
    db = Database(database_url, threads=8)
    try:
        repo = RateLimitRepository(db)
        decisions = await asyncio.gather(*(repo.take("p1", 1000.0, 5, 60.0) for _ in range(20)))
        assert sum(d.allowed for d in decisions) == 5
        refused = [d for d in decisions if not d.allowed]
        assert all(d.retry_after_s == pytest.approx(12.0) for d in refused)
        assert (await repo.take("p2", 1000.0, 5, 60.0)).allowed  # another person's own bucket
        assert (await repo.take("p1", 1012.0, 5, 60.0)).allowed  # one token back after 12 s
        # Pruning forgets only the buckets that are full again.
        assert await repo.prune(1020.0) == 1  # p2 (full at 1012)
        assert await repo.prune(2000.0) == 1  # p1
    finally:
        await asyncio.to_thread(db.close)


async def test_two_replicas_share_one_limit(
    database_url: str,
    nats_url: str,
    signing_keys: SigningKeys,
    siteverify: SiteverifyStub,
    lessons: Any,
    author: Callable[..., str],
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(
        nats_url, signing_keys, siteverify, database_url, rate_limit=2, rate_window_s=3600
    )
    lesson = lessons.case(CASE)
    async with (
        serve_app(create_app(settings), settings) as a,
        serve_app(create_app(settings), settings) as b,
    ):
        bearer = author()
        statuses = []
        for url in (a, b, b):
            r = await post_fix(url, bearer, lesson)
            statuses.append(r.status_code)
        assert statuses == [409, 409, 429]
        assert r.json()["code"] == "rate_limited"
        assert 1 <= int(r.headers["retry-after"]) <= 1800
        # A failed verification is refused first and takes no token: verification, then limit.
        r = await post_fix(a, author(), lesson, verification="fail-bot")
        assert r.status_code == 403
        assert (await post_fix(a, bearer, lesson, verification="fail-bot")).status_code == 403
        assert (await post_fix(a, author(), lesson)).status_code == 409  # others unaffected


async def post_fix(
    url: str, bearer: str, lesson: dict[str, Any], verification: str | None = None
) -> httpx.Response:
    body = {"lesson": lesson, "key": STALE, "verification": verification or uuid.uuid4().hex}
    async with httpx.AsyncClient(timeout=60) as http:
        return await http.post(
            f"{url}/app/api/lessons/fix", json=body, headers={"authorization": f"Bearer {bearer}"}
        )


async def test_verification_switched_off_says_so_and_lets_requests_through(
    tmp_path: Path,
    nats_url: str,
    signing_keys: SigningKeys,
    siteverify: SiteverifyStub,
    lessons: Any,
    author: Callable[..., str],
) -> None:
    settings = Settings(
        nats_url=nats_url,
        jwks_file=str(signing_keys.jwks_path),
        database_url=f"sqlite:///{tmp_path / 'lf.db'}",
        verify_disabled=True,
    )
    async with serve_app(create_app(settings), settings) as url:
        async with httpx.AsyncClient(timeout=10) as http:
            ready = (await http.get(f"{url}/readyz")).json()
        assert ready["status"] == "ready"
        assert "DISABLED" in ready["details"]["human_verification"]
        r = await post_fix(url, author(), lessons.case(CASE), verification="fail-bot")
        assert r.status_code == 409  # past verification, to the checks
        assert siteverify.calls == []


def test_verification_without_a_secret_does_not_start(tmp_path: Path, nats_url: str) -> None:
    env = {"NATS_URL": nats_url, "QUIZ_DATA_DIR": str(tmp_path), "LESSON_FIX_VERIFY_SECRET": ""}
    env["LESSON_FIX_VERIFY_DISABLED"] = "false"
    process = ServiceProcess("quiz_lesson_fix.main", env, tmp_path / "lesson-fix.log")
    try:
        with pytest.raises(RuntimeError, match="exited"):
            process.start(timeout_s=60)
    finally:
        process.stop()
    assert "LESSON_FIX_VERIFY_SECRET is required" in process.log_tail()
