"""The pages say "demo" when the gateway is the demo's canned replies (issue 34).

The real llm-gateway process configured as `make run DEMO=1` configures it (scripts/devrun.py:
every purpose's model is `demo-canned-replies`, README "Demo mode"), the poll service, headless
Chromium: the board, the wall and the phone show the demo badge, the AI notices say canned
replies stand in for a model (never "Anthropic"), in English and in French.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quiz_contracts.llm import Purpose
from quiz_poll.domain.provider import DEMO_MODEL
from quiz_testkit.anthropic_stub import AnthropicStub
from quiz_testkit.processes import ServiceProcess, llm_gateway_process

from .conftest import PROMPT, PollSite, needs_chromium
from .test_pages import open_page

pytestmark = [pytest.mark.integration, pytest.mark.slow, needs_chromium]


@pytest.fixture(scope="module")
def demo_gateway(
    nats_url: str, anthropic_stub_server: AnthropicStub, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """The gateway as `make run DEMO=1` starts it (scripts/devrun.py `start_demo_stub`)."""
    gateway = llm_gateway_process(
        nats_url,
        anthropic_stub_server.base_url,
        tmp_path_factory.mktemp("demo-gateway"),
        PURPOSE_MODELS=json.dumps({p.value: DEMO_MODEL for p in Purpose}),
        MODEL_PRICES=json.dumps({DEMO_MODEL: {"input": 1, "output": 5}}),
    )
    with gateway as proc:
        yield proc


async def test_every_page_shows_the_demo(
    demo_gateway: ServiceProcess, site: PollSite, browser: Any, output: Path
) -> None:
    ev = "ev-34-demo"
    await site.open(ev)  # French
    staff = site.staff(ev)
    board = await open_page(
        browser, site.page_url(ev, "moderate", staff), viewport={"width": 1280, "height": 720}
    )
    await board.locator("#demo").wait_for()
    assert await board.inner_text("#demo") == "Demo: canned AI replies, no model"
    await board.get_by_role("switch", name="AI assistance").check()
    await board.wait_for_function(
        "() => document.getElementById('ai-notice').textContent"
        ".startsWith('Demo (make run DEMO=1)')"
    )
    assert "Anthropic" not in await board.inner_text("body")
    await board.screenshot(path=output / "board-demo-en.png", full_page=True)

    wall = await open_page(
        browser,
        site.page_url(ev, "wall", staff, lang=None),
        viewport={"width": 1280, "height": 720},
    )
    await wall.locator("#demo").wait_for()
    assert await wall.inner_text("#demo") == "Démo : réponses d’IA préenregistrées, aucun modèle"
    await wall.screenshot(path=output / "wall-demo-fr.png")

    phone = await open_page(
        browser,
        site.page_url(ev, "answer", site.participant(ev, 1), lang=None),
        viewport={"width": 390, "height": 760},
        is_mobile=True,
    )
    await phone.wait_for_function("p => document.querySelector('h1').textContent === p", arg=PROMPT)
    notice = phone.locator("#ai-notice")
    await notice.wait_for()
    text = await notice.inner_text()
    assert text.startswith("Démo : aucun modèle d’IA ne lit les idées de ce sondage"), text
    assert "Anthropic" not in await phone.inner_text("body")
    await phone.screenshot(path=output / "answer-demo-fr.png", full_page=True)
