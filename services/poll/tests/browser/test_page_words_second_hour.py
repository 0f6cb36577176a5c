"""The poll's pages read as a teacher and a student would, the second hour (issue 34).

Headless Chromium, French and English, the board at 1280 × 720, phones at 390 and 320 px:
- the board reads the poll's language whatever the browser's, headed by the question, and says
  what the wall shows of a group in plain words ("2 participants · le mur en compte 1");
- the phone: a link with no token, a broken one or another poll's says so and what to do, in
  the poll's language once the device learned it, with Add disabled; at the idea limit the
  reason stands beside the disabled Add; long words wrap at 320 px (no sideways scroll); an
  idea of one's own that the teacher hid is marked "not shown";
- German and Italian polls read German and Italian, their counts in their plurals.
Screenshots go to the test output folder; the assertions are on texts and overflow only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from quiz_poll.domain.ideas import idea_key

from .conftest import PROMPT, PollSite, needs_chromium
from .test_pages import act, answer, lowest_contrast, open_page

pytestmark = [pytest.mark.integration, needs_chromium]

TEACHER: dict[str, Any] = {"viewport": {"width": 1280, "height": 720}}


def phone(width: int) -> dict[str, Any]:
    return {"viewport": {"width": width, "height": 760}, "is_mobile": True, "has_touch": True}


async def no_sideways_scroll(page: Any) -> bool:
    """Nothing wider than the screen: the page cannot be scrolled sideways."""
    return bool(
        await page.evaluate(
            "() => document.documentElement.scrollWidth <= window.innerWidth"
            " && document.body.scrollWidth <= window.innerWidth"
        )
    )


async def text_is(page: Any, selector: str, text: str) -> None:
    await page.wait_for_function(
        "([s, t]) => { const el = document.querySelector(s); return el && el.textContent === t; }",
        arg=[selector, text],
    )


async def test_the_board_reads_the_polls_language_headed_by_its_question(
    site: PollSite, browser: Any, http: httpx.AsyncClient, output: Path
) -> None:
    ev = "ev-34-board-fr"
    await site.open(ev)  # a French question, moderation on
    await answer(http, site, ev, 1, ["eau"])
    await answer(http, site, ev, 2, ["flotte"])
    await answer(http, site, ev, 3, ["soleil"])
    await act(http, site, ev, {"action": "merge", "keys": ["flotte"], "into": "eau"})
    await act(http, site, ev, {"action": "approve", "keys": ["eau"], "spellings": ["eau"]})
    # An English browser, no ?lang: the board follows the poll, as the wall and phones do.
    board = await open_page(
        browser, site.page_url(ev, "moderate", site.staff(ev), lang=None), locale="en-US", **TEACHER
    )
    await text_is(board, "h1", PROMPT)
    assert await board.evaluate("document.documentElement.lang") == "fr"
    await board.wait_for_selector('li.variant[data-key="soleil"]')
    assert await board.text_content(".kicker") == "Tableau de modération"
    assert await board.inner_text("#counts") == "3 réponses · 2 idées attendent votre décision"
    eau = board.locator('li.cluster[data-key="eau"]')
    # One of its two participants is counted on the wall (the other's spelling is undecided).
    assert await eau.locator(".head .count").inner_text() == "2 participants · le mur en compte 1"
    assert await board.locator('li.cluster[data-key="soleil"] .head .count').inner_text() == (
        "1 participant · pas au mur"
    )
    # Approved: no "Approuver" on the row; undecided: no "Annuler la décision".
    assert await board.locator('li.variant[data-key="eau"] .actions button').all_inner_texts() == [
        "Masquer",
        "Annuler la décision",
    ]
    flotte = board.locator('li.variant[data-key="flotte"] .actions button')
    assert await flotte.all_inner_texts() == ["Approuver", "Masquer", "Sortir du groupe"]
    shown = await board.inner_text("body")
    for word in ("cluster", "Cluster", "Au mur :", "Moderation board", "Approve"):
        assert word not in shown, word
    assert "sur un groupe" in await board.inner_text(".hint")
    await board.screenshot(path=output / "board-fr-1280.png", full_page=True)
    text, ratio = await lowest_contrast(board)
    assert ratio >= 4.5, (text, ratio)

    # An English poll on a French browser: English, "group" as the one word for it.
    ev2 = "ev-34-board-en"
    await site.open(ev2, prompt="What do living things need to grow?")
    await answer(http, site, ev2, 1, ["water"])
    await answer(http, site, ev2, 2, ["Water"])
    en = await open_page(
        browser,
        site.page_url(ev2, "moderate", site.staff(ev2), lang=None),
        locale="fr-FR",
        **TEACHER,
    )
    await text_is(en, "h1", "What do living things need to grow?")
    await en.wait_for_selector('li.variant[data-key="water"]')
    assert await en.text_content(".kicker") == "Moderation board"
    assert await en.inner_text("#counts") == "2 answers · 1 idea waiting for your decision"
    head = en.locator('li.cluster[data-key="water"] .head .count')
    assert await head.inner_text() == "2 participants · not on the wall"
    assert "onto a group" in await en.inner_text(".hint")
    assert "cluster" not in (await en.inner_text("body")).lower()
    await act(http, site, ev2, {"action": "approve", "keys": ["water"], "spellings": ["water"]})
    await en.wait_for_function(
        "() => document.querySelector('li.cluster[data-key=\"water\"] .head .count')"
        ".textContent === '2 participants · on the wall'"
    )
    await en.screenshot(path=output / "board-en-1280.png", full_page=True)


async def test_a_link_that_does_not_open_the_poll_says_so_and_what_to_do(
    site: PollSite, browser: Any, output: Path
) -> None:
    ev = "ev-34-links"
    await site.open(ev)  # French
    # No token at all, on an English phone that never saw the poll: English, Add disabled.
    ctx_url = f"{site.url}/poll/{ev}/answer"
    bare = await open_page(browser, ctx_url, locale="en-US", **phone(320))
    await bare.wait_for_function("() => document.getElementById('problem').textContent !== ''")
    problem = await bare.inner_text("#problem")
    assert problem.startswith("This link is incomplete: it carries no access key."), problem
    assert "QR code" in problem
    assert await bare.get_by_role("button", name="Add").is_disabled()
    assert await bare.locator("#idea").is_disabled()
    assert await no_sideways_scroll(bare)
    await bare.screenshot(path=output / "answer-no-token-en-320.png", full_page=True)

    # The same phone once opened the poll with a good link: it learned the poll's language.
    good = await open_page(
        browser,
        site.page_url(ev, "answer", site.participant(ev, 1), lang=None),
        locale="en-US",
        **phone(390),
    )
    await text_is(good, "h1", PROMPT)
    page = await good.context.new_page()
    broken = site.participant(ev, 1)[:-6]  # cut: the signature no longer matches
    await page.goto(site.page_url(ev, "answer", broken, lang=None))
    await page.wait_for_function("() => document.getElementById('problem').textContent !== ''")
    problem = await page.inner_text("#problem")
    assert problem.startswith("Ce lien n’est pas valable : il a expiré ou a été coupé."), problem
    assert await page.get_by_role("button", name="Ajouter").is_disabled()
    assert "Your link" not in await page.inner_text("body")
    await page.screenshot(path=output / "answer-broken-token-fr-390.png", full_page=True)

    # Another poll's link: not this poll's, ask the teacher.
    await site.open("ev-34-other")
    other = await good.context.new_page()
    await other.goto(site.page_url(ev, "answer", site.participant("ev-34-other", 2), lang=None))
    await other.wait_for_function("() => document.getElementById('problem').textContent !== ''")
    assert (await other.inner_text("#problem")).startswith("Ce lien n’ouvre pas ce sondage")
    assert await other.get_by_role("button", name="Ajouter").is_disabled()


@pytest.mark.parametrize("width", [320, 390])
async def test_the_phone_says_why_add_is_off_wraps_long_words_and_marks_a_hidden_idea(
    site: PollSite, browser: Any, http: httpx.AsyncClient, output: Path, width: int
) -> None:
    ev = f"ev-34-phone-{width}"
    await site.open(ev, max_ideas=2)  # moderation on, votes shown
    page = await open_page(
        browser,
        site.page_url(ev, "answer", site.participant(ev, 1), lang=None),
        locale="en-US",
        **phone(width),
    )
    await text_is(page, "h1", PROMPT)
    field = page.get_by_label("Une idée (60 caractères au plus)")
    long_word = "Photosynthèsechlorophylliennedesplantesvertesetdesalgues"
    for idea in (long_word, "Lucas est nul"):
        await field.fill(idea)
        await page.get_by_role("button", name="Ajouter").click()
        await page.wait_for_function(
            "t => [...document.querySelectorAll('#mine li .text')]"
            ".some(e => e.textContent.startsWith(t))",
            arg=idea,
        )
    add = page.get_by_role("button", name="Ajouter")
    assert await add.is_disabled()
    full = "Vous avez 2 idées, le maximum de ce sondage : retirez-en une pour en ajouter une autre."
    assert await page.inner_text("#full") == full
    assert await add.get_attribute("aria-describedby") == "full"
    assert await no_sideways_scroll(page)

    # The teacher approves the long word (it reaches the shared list) and hides the other.
    key = idea_key(long_word)
    await act(http, site, ev, {"action": "approve", "keys": [key], "spellings": [long_word]})
    await act(http, site, ev, {"action": "hide", "keys": ["lucas est nul"]})
    await page.wait_for_selector("#shared li")
    mark = page.locator("#mine li .hidden-mark")
    await mark.wait_for(timeout=5000)
    assert await mark.inner_text() == "pas affichée : la modération l’a masquée"
    hidden_row = page.locator("#mine li", has=page.locator(".hidden-mark"))
    assert (await hidden_row.inner_text()).startswith("Lucas est nul")
    # Only the hidden idea is marked, and nothing waits any more.
    assert await page.locator("#mine li .hidden-mark").count() == 1
    assert await page.locator("#mine li .waiting").count() == 0
    assert await no_sideways_scroll(page)
    await page.screenshot(path=output / f"answer-full-hidden-fr-{width}.png", full_page=True)
    text, ratio = await lowest_contrast(page)
    assert ratio >= 4.5, (text, ratio)
    # Removing one gives Add back, and its reason goes.
    await page.get_by_role("button", name="Retirer « Lucas est nul »").click()
    await page.wait_for_function("() => !document.getElementById('add-button').disabled")
    assert await page.locator("#full").is_hidden()


async def test_the_english_phone_at_320_px(
    site: PollSite, browser: Any, http: httpx.AsyncClient, output: Path
) -> None:
    ev = "ev-34-phone-en"
    await site.open(ev, max_ideas=1, prompt="What do living things need to grow?")
    page = await open_page(
        browser,
        site.page_url(ev, "answer", site.participant(ev, 1), lang=None),
        locale="fr-FR",
        **phone(320),
    )
    await text_is(page, "h1", "What do living things need to grow?")
    await page.get_by_label("An idea (60 characters at most)").fill(
        "Sunlightwaterandcarbondioxideandnutrientsfromthesoil"
    )
    await page.get_by_role("button", name="Add").click()
    await text_is(
        page, "#full", "You have 1 idea, the most this poll takes: remove it to add another."
    )
    await page.locator("#mine li .waiting").wait_for()
    assert await page.inner_text("#counter") == "1 of 1 ideas"
    assert await no_sideways_scroll(page)
    await page.screenshot(path=output / "answer-full-en-320.png", full_page=True)


@pytest.mark.parametrize(
    ("prompt", "lang", "one", "two", "heading"),
    [
        (
            "Was brauchen Pflanzen zum Wachsen?",
            "de",
            "1 Antwort · 1 Person",
            "2 Antworten · 2 Personen",
            "Ihre Ideen",
        ),
        (
            "Che cosa serve alle piante per crescere?",
            "it",
            "1 risposta · 1 partecipante",
            "2 risposte · 2 partecipanti",
            "Le tue idee",
        ),
    ],
)
async def test_german_and_italian_polls_read_their_language_and_plurals(
    site: PollSite,
    browser: Any,
    http: httpx.AsyncClient,
    output: Path,
    prompt: str,
    lang: str,
    one: str,
    two: str,
    heading: str,
) -> None:
    ev = f"ev-34-{lang}"
    await site.open(ev, anonymous=False, prompt=prompt)  # a classroom: moderation off
    await answer(http, site, ev, 1, ["Wasser" if lang == "de" else "acqua"])
    wall = await open_page(
        browser, site.page_url(ev, "wall", site.staff(ev), lang=None), locale="en-US", **TEACHER
    )
    await wall.wait_for_function("l => document.documentElement.lang === l", arg=lang)
    await text_is(wall, "#stats", one)
    await answer(http, site, ev, 2, ["Licht" if lang == "de" else "luce"])
    await text_is(wall, "#stats", two)
    await wall.screenshot(path=output / f"wall-{lang}.png")
    page = await open_page(
        browser, site.page_url(ev, "answer", site.participant(ev, 3), lang=None), **phone(390)
    )
    await text_is(page, "#mine-title", heading)
    board = await open_page(
        browser, site.page_url(ev, "moderate", site.staff(ev), lang=None), **TEACHER
    )
    await text_is(board, "h1", prompt)
    await board.wait_for_selector("li.variant")
    counts = await board.inner_text("#counts")
    assert counts == ("2 Antworten" if lang == "de" else "2 risposte"), counts
    await board.screenshot(path=output / f"board-{lang}.png", full_page=True)
