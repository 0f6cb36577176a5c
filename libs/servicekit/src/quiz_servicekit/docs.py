"""Every service's /docs (Swagger UI) and /redoc served from local assets: they work offline.

The assets are those `fastapi-offline` ships (Swagger UI 5, which reads OpenAPI 3.1, and
ReDoc), mounted at /docs-assets; no page loads anything from a CDN. `create_service_app` turns
FastAPI's own CDN-backed pages off and calls `serve_docs` for every service.

Two fetches the bundles would still make are turned off (issue 34): ReDoc's sidebar logo
(`https://cdn.redoc.ly/redoc/logo-mini.svg`, hard-coded in redoc.standalone.js) is served as
`/docs-assets/redoc.offline.js` with that URL pointing at our own favicon, and Swagger UI's
validator badge (validator.swagger.io) is off (`validatorUrl: null`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/docs-assets"
REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


@cache
def offline_redoc() -> bytes:
    """redoc.standalone.js with its one remote image (the Redocly logo) made local."""
    return (
        (ASSETS / "redoc.standalone.js")
        .read_bytes()
        .replace(REDOC_LOGO.encode(), f"{ASSETS_URL}/favicon.png".encode())
    )


def serve_docs(app: FastAPI) -> None:
    """GET /docs and /redoc (not in the OpenAPI) over the app's /openapi.json, assets local."""

    # Before the mount, which would answer every path under it.
    @app.get(f"{ASSETS_URL}/redoc.offline.js", include_in_schema=False)
    async def redoc_js() -> Response:
        return Response(offline_redoc(), media_type="text/javascript")

    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
    title = f"{app.title} — API"

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=title,
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=title,
            redoc_js_url=f"{ASSETS_URL}/redoc.offline.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
