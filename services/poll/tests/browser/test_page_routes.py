"""The pages' routes over real HTTP (no browser needed): static shells with a strict policy,
404 as JSON for anything else (`quiz_poll.pages`)."""

from __future__ import annotations

import httpx
import pytest

from .conftest import PollSite

pytestmark = [pytest.mark.integration]


async def test_pages_are_static_shells_with_a_strict_policy(
    site: PollSite, http: httpx.AsyncClient
) -> None:
    r = await http.get(f"{site.url}/poll/ev-1/wall")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["referrer-policy"] == "no-referrer"
    for path in ("/poll/ev-1/nope", "/poll/bad%20id/wall", "/poll/assets/../pages.py"):
        r = await http.get(site.url + path)
        assert r.status_code == 404 and r.json()["code"] == "not_found", path
    r = await http.get(f"{site.url}/poll/assets/wall.js")
    assert r.status_code == 200 and "javascript" in r.headers["content-type"]
