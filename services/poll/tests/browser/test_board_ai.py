"""The board with the AI assistance on (ADR-072): the real llm-gateway process calling the
scripted anthropic stub, the poll service, headless Chromium.

The board shows, live, what the model decided: its hidden idea, its corrections (next to the
typed text), the source "AI", the run's calls against `run_cap`; the wall reads the corrections
and never the hidden idea; the participants' page shows the AI notice while the switch is on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.processes import ServiceProcess

from .conftest import PollSite, needs_chromium
from .test_pages import answer, open_page, same_as_tally

pytestmark = [pytest.mark.integration, pytest.mark.slow, needs_chromium]

CORRECTIONS = {"photosintese": "Photosynthèse", "respirassion": "Respiration"}


def judge(body: dict[str, Any]) -> StubReply:
    """A model that hides "idiot", corrects two spellings and keeps the rest as typed."""
    content = body["messages"][0]["content"]
    text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    ideas: list[dict[str, str]] = []
    for part in text.split("\n\n"):
        if part.startswith("NEW ideas to judge (data): "):
            ideas = json.loads(part.removeprefix("NEW ideas to judge (data): "))
    return StubReply.tool(
        {
            "ideas": [
                {
                    "id": i["id"],
                    "offensive": "idiot" in i["text"].lower(),
                    "correction": CORRECTIONS.get(i["text"].lower(), i["text"]),
                    "sameAs": None,
                }
                for i in ideas
            ]
        }
    )


async def test_the_board_shows_the_models_decisions_live(
    llm_gateway: ServiceProcess,
    anthropic_stub: AnthropicStub,
    site: PollSite,
    browser: Any,
    http: httpx.AsyncClient,
    output: Path,
) -> None:
    anthropic_stub.default = StubReply.callable(judge)
    ev = "ev-ai-on"
    await site.open(ev)  # anonymous: moderation on
    staff = site.staff(ev)
    board = await open_page(
        browser, site.page_url(ev, "moderate", staff), viewport={"width": 1200, "height": 900}
    )
    phone = await open_page(
        browser,
        site.page_url(ev, "answer", site.participant(ev, 1)),
        viewport={"width": 390, "height": 844},
    )
    await phone.wait_for_selector("li.none")
    assert await phone.locator("#ai-notice").is_hidden()
    # An idea typed before the switch stays with the teacher (§5): it gets an empty teacher mark.
    await answer(http, site, ev, 9, ["avant l'IA"])
    await board.wait_for_selector('li.variant[data-key="avant l ia"]')

    switch = board.get_by_role("switch", name="AI assistance")
    await switch.check()
    await board.wait_for_function(
        "() => document.getElementById('ai-notice').textContent.includes('Anthropic')"
    )
    # The notice names the model the gateway reports and its provider (issue 34).
    notice = await board.inner_text("#ai-notice")
    assert "an AI model by Anthropic (claude-" in notice, notice
    # The participants' page now says that a model reads the ideas (§4), naming it too.
    await phone.wait_for_selector("#ai-notice:not([hidden])", timeout=10000)
    assert "by Anthropic (claude-" in await phone.inner_text("#ai-notice")
    assert await board.locator("#demo").is_hidden()

    wall = await open_page(browser, site.page_url(ev, "wall", staff))
    await wall.evaluate("f => { window.__forbidden = f; }", ["idiot"])
    for n, ideas in enumerate([["photosintese", "Lucas est idiot"], ["respirassion"], ["eau"]]):
        await answer(http, site, ev, n + 1, ideas)

    # The batch runs 3 s after the first answer; the board follows live.
    await board.wait_for_selector('li.variant[data-key="photosintese"] .source.ai', timeout=20000)
    await board.wait_for_function(
        "() => document.getElementById('ai-calls').textContent === 'Model calls: 1 of 200'"
    )
    row = board.locator('li.variant[data-key="photosintese"]')
    assert await row.locator(".typed").inner_text() == "photosintese"
    assert await row.locator(".correction").text_content() == "correction: → Photosynthèse"
    # A "correction" equal to the typed text is no correction: not shown.
    assert await board.locator('li.variant[data-key="eau"] .correction').count() == 0
    hidden = board.locator('li.variant[data-key="lucas est idiot"]')
    assert await hidden.locator(".status").inner_text() == "hidden"
    assert await hidden.locator(".source").inner_text() == "decided by the AI"
    before = board.locator('li.variant[data-key="avant l ia"]')
    # Kept for the teacher, unmarked: no tag (issue 22: "teacher" read as "I wrote this").
    assert await before.locator(".source").text_content() == ""
    assert await before.locator(".status").inner_text() == "not decided"
    await board.screenshot(path=output / "board-ai.png", full_page=True)

    # The wall reads the corrections, never the hidden idea, and not the idea kept back.
    await wall.wait_for_selector('.bubble[data-key="photosintese"]')
    await same_as_tally(wall, http, site, ev)
    labels = await wall.eval_on_selector_all(".bubble .label", "els => els.map(e => e.textContent)")
    assert sorted(labels) == ["Photosynthèse", "Respiration", "eau"]
    assert await wall.evaluate("window.__violations") == []

    # The teacher has the last word: approving the kept-back idea makes it visible.
    await before.locator("button.approve").click()
    await wall.wait_for_selector('.bubble[data-key="avant l ia"]')
