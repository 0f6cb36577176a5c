"""The poll's pages as a teacher and a student read them (issue 22), headless Chromium.

- The participant page shows the question, in the poll's language whatever the browser's, and
  says "waiting for approval" under an idea the teacher has not approved, until approved.
- The board in French says its counts in French plurals ("1 participant", "1 idée
  sélectionnée", never "1 visibles" nor "(s)"), in plain words, and tags no unmarked idea.
- The projected wall has no moderation switch and shows no count of ideas waiting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import PROMPT, PollSite, needs_chromium
from .test_pages import act, answer, lowest_contrast, open_page, projected_controls, tally

pytestmark = [pytest.mark.integration, needs_chromium]

PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "is_mobile": True,
    "has_touch": True,
}


async def test_participant_page_shows_the_question_in_the_polls_language_and_what_waits(
    site: PollSite, browser: Any, http: httpx.AsyncClient, output: Path
) -> None:
    ev = "ev-words-phone"
    await site.open(ev)  # anonymous: moderation on; the question is French
    page = await open_page(
        browser,
        site.page_url(ev, "answer", site.participant(ev, 1), lang=None),
        locale="en-US",
        **PHONE,
    )
    # An English browser, a French poll: the page reads French, headed by the question.
    await page.wait_for_function("p => document.querySelector('h1').textContent === p", arg=PROMPT)
    assert await page.evaluate("document.documentElement.lang") == "fr"
    assert await page.inner_text("#mine-title") == "Vos idées"
    field = page.get_by_label("Une idée (60 caractères au plus)")
    await field.fill("La photosynthèse")
    await page.get_by_role("button", name="Ajouter").click()
    waiting = page.locator("#mine li .waiting")
    await waiting.wait_for()
    assert await waiting.inner_text() == "en attente d’approbation"
    assert await page.inner_text("#counter") == "1 idée sur 5"
    await page.screenshot(path=output / "answer-waiting.png")
    text, ratio = await lowest_contrast(page)
    assert ratio >= 4.5, (text, ratio)
    # The teacher approves it: the phone drops the mark by itself (a frame follows the change).
    await act(
        http,
        site,
        ev,
        {"action": "approve", "keys": ["photosynthese"], "spellings": ["La photosynthèse"]},
    )
    await waiting.wait_for(state="detached", timeout=3000)
    await page.screenshot(path=output / "answer-approved.png")

    # A poll asked in English, on a French browser: the page reads English.
    ev2 = "ev-words-phone-en"
    await site.open(ev2, prompt="What do living things need to grow?")
    en = await open_page(
        browser,
        site.page_url(ev2, "answer", site.participant(ev2, 2), lang=None),
        locale="fr-FR",
        **PHONE,
    )
    await en.wait_for_function("() => document.documentElement.lang === 'en'")
    assert await en.inner_text("h1") == "What do living things need to grow?"
    assert await en.inner_text("#mine-title") == "Your ideas"


async def test_board_in_french_counts_in_french_and_tags_only_decisions(
    site: PollSite, browser: Any, http: httpx.AsyncClient, output: Path
) -> None:
    ev = "ev-words-board"
    await site.open(ev)  # moderation on
    await answer(http, site, ev, 1, ["vélo"])
    await answer(http, site, ev, 2, ["eau"])
    await answer(http, site, ev, 3, ["Eau"])
    await act(http, site, ev, {"action": "hide", "keys": ["velo"]})
    board = await open_page(
        browser,
        site.page_url(ev, "moderate", site.staff(ev), lang="fr"),
        viewport={"width": 1200, "height": 800},
    )
    await board.wait_for_selector('li.variant[data-key="eau"]')
    assert await board.inner_text("#counts") == "3 réponses · 1 idée attend votre décision"
    eau = board.locator('li.cluster[data-key="eau"]')
    velo = board.locator('li.cluster[data-key="velo"]')
    # Plain words for what the wall shows of a group (issue 34).
    assert await eau.locator(".head .count").inner_text() == "2 participants · pas au mur"
    assert await velo.locator(".head .count").inner_text() == "1 participant · pas au mur"
    # Only the actions that change something: a hidden idea offers no "Masquer".
    velo_actions = await velo.locator(".variant .actions button").all_inner_texts()
    assert velo_actions == ["Approuver", "Annuler la décision"], velo_actions
    eau_actions = await eau.locator(".variant .actions button").all_inner_texts()
    assert eau_actions == ["Approuver", "Masquer"], eau_actions
    assert await velo.locator(".variant .count").inner_text() == "1 participant"
    assert await eau.locator(".variant .count").inner_text() == "2 participants"
    # Tags: the hidden idea is the teacher's decision; the unmarked one has none.
    assert await velo.locator(".source").inner_text() == "votre décision"
    assert await eau.locator(".source").text_content() == ""
    assert await board.inner_text("#selected-count") == "0 idée sélectionnée"
    await board.locator("#pick-eau").check()
    await board.wait_for_function(
        "() => document.getElementById('selected-count').textContent === '1 idée sélectionnée'"
    )
    await board.locator("#pick-velo").check()
    assert await board.inner_text("#selected-count") == "2 idées sélectionnées"
    shown = await board.inner_text("body")
    for jargon in (
        "visibles",
        "(s)",
        "enseignant",
        "Réinitialiser",
        "Détacher",
        "en tout",
        "cluster",
    ):
        assert jargon not in shown, jargon
    assert await board.get_by_role("button", name="Annuler la décision").count() >= 1
    await board.screenshot(path=output / "board-fr.png", full_page=True)


async def test_sticky_selection_bar_covers_no_row_a_keyboard_reaches(
    site: PollSite, browser: Any, http: httpx.AsyncClient
) -> None:
    ev = "ev-words-sticky"
    await site.open(ev)
    for n in range(12):
        await answer(http, site, ev, n, [f"idée numéro {n}"])
    board = await open_page(
        browser,
        site.page_url(ev, "moderate", site.staff(ev)),
        viewport={"width": 1000, "height": 500},
    )
    await board.wait_for_selector("li.variant")
    await board.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    # Shift+Tab back up through the rows: each focused control stops below the bar.
    first = board.locator("li.variant input[type=checkbox]").first
    await board.locator("li.variant input[type=checkbox]").last.focus()
    hidden: list[str] = []
    for _ in range(60):
        await board.keyboard.press("Shift+Tab")
        covered = await board.evaluate(
            """() => {
                 const el = document.activeElement;
                 if (!el || !el.closest('#clusters')) return null;
                 const bar = document.getElementById('selection').getBoundingClientRect();
                 const r = el.getBoundingClientRect();
                 return r.top < bar.bottom - 1 ? el.dataset.focus || el.id : '';
               }"""
        )
        if covered:
            hidden.append(covered)
        if await first.evaluate("el => el === document.activeElement"):
            break
    assert hidden == []


async def test_wall_has_no_moderation_switch_and_no_waiting_count(
    site: PollSite, browser: Any, http: httpx.AsyncClient, output: Path
) -> None:
    ev = "ev-words-wall"
    await site.open(ev)  # moderation on: the idea waits
    await answer(http, site, ev, 1, ["photosynthèse"])
    assert (await tally(http, site, ev))["pending"] == 1
    wall = await open_page(
        browser,
        site.page_url(ev, "wall", site.staff(ev), lang=None),
        locale="en-US",
        viewport={"width": 1280, "height": 720},
    )
    await wall.wait_for_function("() => document.documentElement.lang === 'fr'")
    await wall.wait_for_function("() => document.getElementById('stats').textContent !== ''")
    assert await wall.inner_text("#stats") == "1 réponse · 1 participant"
    assert await projected_controls(wall) == ["Afficher les votes", "Modérer"]
    assert await wall.locator("#moderation").count() == 0
    shown = await wall.inner_text("body")
    assert await wall.inner_text("h1") == PROMPT
    # Issue 34: the empty wall says ideas wait for moderation (not "waiting for the first
    # ideas" under "1 réponse"), and still no count of them (issue 22).
    await wall.wait_for_function(
        "() => document.getElementById('note').textContent === 'Des idées attendent la modération…'"
    )
    assert "premières idées" not in shown and not any(
        ch.isdigit() for ch in await wall.inner_text("#note")
    )
    await wall.screenshot(path=output / "wall-waiting.png")
    # The teacher hides it: nothing waits, nothing is shown — the wall says so.
    await act(http, site, ev, {"action": "hide", "keys": ["photosynthese"]})
    await wall.wait_for_function(
        "() => document.getElementById('note').textContent === 'Aucune idée n’est encore au mur.'"
    )
