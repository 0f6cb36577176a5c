"""The poll's own pages (issue 16): the wall, the moderation board and the participant page.

Routes (GET, HTML): `/poll/{evaluation}/wall` (ADR-071 §5–§7, the projection),
`/poll/{evaluation}/moderate` (§6, the board, staff), `/poll/{evaluation}/answer` (§8, a phone);
and `/poll/assets/{name}` (their scripts and style sheet).

They are static files built from `services/poll/web` (`make pages`: npm ci + esbuild, d3-force
for the wall's packing) into `quiz_poll/static/`, which is committed, so `make run` serves them
on a machine without Node. A page holds no data: it reads its JWT from the URL fragment
`#token=…` (never sent to the server), and every datum comes from the grant-checked API under
`/app/api/evaluations/{evaluation}/poll` with `Authorization: Bearer`. That is why these routes
need no token: a page without a valid grant shows the API's `not_found`, and nothing else.

Headers: a strict Content-Security-Policy (scripts and connections to this origin only, no
framing), `Referrer-Policy: no-referrer`, `nosniff`; the HTML is never cached (a new build is
served at once), the assets for a minute.
"""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import _EVALUATION_ID

STATIC = Path(__file__).parent / "static"
PAGES = {"wall": "wall.html", "moderate": "moderate.html", "answer": "answer.html"}
ASSETS = {
    "wall.js": "text/javascript",
    "board.js": "text/javascript",
    "answer.js": "text/javascript",
    "poll.css": "text/css",
}
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
_EVALUATION = re.compile(_EVALUATION_ID.pattern)
BUILD_HINT = "the poll pages are not built: run `make pages` (needs node and npm)"

router = APIRouter(tags=["pages"])


def _file(name: str, media_type: str, cache: str) -> Response:
    path = STATIC / name
    if not path.is_file():
        raise ContractError(ErrorCode.not_found, BUILD_HINT)
    return FileResponse(path, media_type=media_type, headers={**_HEADERS, "Cache-Control": cache})


@router.get("/poll/assets/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    """A script or the style sheet of the pages; any other name is 404 (no path is read)."""
    media_type = ASSETS.get(name)
    if media_type is None:
        raise ContractError(ErrorCode.not_found, "no such asset")
    return _file(name, f"{media_type}; charset=utf-8", "public, max-age=60")


@router.get("/poll/{evaluation}/{page}", include_in_schema=False)
async def page(evaluation: str, page: str) -> Response:
    """The page's HTML shell. The evaluation id is checked for shape only (the API checks the
    grant); another page name or a malformed id is 404, as a route that does not exist."""
    if page not in PAGES or not _EVALUATION.fullmatch(evaluation):
        raise ContractError(ErrorCode.not_found, "no such page")
    return _file(PAGES[page], "text/html; charset=utf-8", "no-cache")
