"""A new spelling of an approved idea on the board and the wall (issue 21), headless Chromium.

Moderation on: the teacher approves "vélo" on the board; guests then type "VELO 🖕". The wall
keeps reading "vélo" (the insult is never in its DOM), the board lists the new spelling on the
approved idea, and approving it there — the page names the spellings it showed — lets the wall
read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import PollSite, needs_chromium
from .test_pages import answer, lowest_contrast, open_page, same_as_tally, wall_bubbles

pytestmark = [pytest.mark.integration, needs_chromium]


async def test_a_new_spelling_waits_on_the_board_until_approved(
    site: PollSite, browser: Any, http: httpx.AsyncClient, output: Path
) -> None:
    ev = "ev-spellings"
    await site.open(ev, anonymous=True)  # moderation on
    await answer(http, site, ev, 0, ["vélo"])
    staff = site.staff(ev)
    wall = await open_page(browser, site.page_url(ev, "wall", staff))
    board = await open_page(
        browser, site.page_url(ev, "moderate", staff), viewport={"width": 1200, "height": 900}
    )
    await board.locator('li.variant[data-key="velo"] button.approve').click()
    await wall.wait_for_selector('.bubble[data-key="velo"]')
    await wall.evaluate("f => { window.__forbidden = f; }", ["🖕"])

    for n in (1, 2):
        await answer(http, site, ev, n, ["VELO 🖕"])
    fresh = board.locator('li.variant[data-key="velo"] .new-spellings')
    await fresh.wait_for()
    # The spelling shows with the first of the two answers: the board's next frame brings the
    # second (its counts), so wait for that before reading the row.
    await board.wait_for_function(
        "() => document.querySelector('#counts').innerText.startsWith('3 answers')"
    )
    assert "VELO 🖕" in await fresh.text_content()
    # One clear state (issue 34): "new spelling to approve", no "approved" beside it, the one
    # approval offered names it, and the header counts it among the ideas waiting.
    row = board.locator('li.variant[data-key="velo"]')
    assert await row.locator(".status").inner_text() == "new spelling to approve"
    assert await row.locator(".on-wall").inner_text() == "On the wall as “vélo”"
    assert await row.locator(".actions button").all_inner_texts() == [
        "Approve the new spelling",
        "Hide",
        "Undo decision",
    ]
    assert await board.inner_text("#counts") == "3 answers · 1 idea waiting for your decision"
    # The wall's bubble counts all three (the count carries no text), in plain words.
    head = board.locator('li.cluster[data-key="velo"] .head .count')
    assert await head.inner_text() == "3 participants · on the wall"
    await wall.wait_for_function(
        "() => document.querySelector('.bubble[data-key=\"velo\"]').dataset.count === '3'"
    )
    assert await wall_bubbles(wall) == {"velo": ("vélo", 3)}
    assert await wall.evaluate("window.__violations") == []
    await board.screenshot(path=output / "board-new-spelling.png", full_page=True)
    text, ratio = await lowest_contrast(board)
    assert ratio >= 4.5, (text, ratio)

    # The teacher approves what the board shows: the most typed approved spelling is read.
    await wall.evaluate("() => { window.__forbidden = []; }")
    await board.locator('li.variant[data-key="velo"] button.approve').click()
    await board.locator('li.variant[data-key="velo"] .new-spellings').wait_for(state="detached")
    # Approved and nothing new: no "Approve" left on the row, nothing waits.
    assert await row.locator(".status").inner_text() == "approved"
    assert await row.locator(".actions button").all_inner_texts() == ["Hide", "Undo decision"]
    assert await board.inner_text("#counts") == "3 answers · 0 ideas waiting for your decision"
    await wall.wait_for_function(
        "() => document.querySelector('.bubble[data-key=\"velo\"] .label')"
        ".textContent === 'VELO 🖕'"
    )
    await same_as_tally(wall, http, site, ev)
