"""Serve a service's FastAPI app in the test's event loop on a real socket."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from quiz_servicekit.app import bind_socket, uvicorn_server
from quiz_servicekit.settings import ServiceSettings


@asynccontextmanager
async def serve_app(app: FastAPI, settings: ServiceSettings) -> AsyncIterator[str]:
    """Start `app` (lifespan included) on a free port; yields its base URL; stops it after."""
    sock = bind_socket("127.0.0.1", 0)
    app.state.bound_port = sock.getsockname()[1]
    server = uvicorn_server(app, settings)
    # Signals belong to pytest, not to each in-process server.
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("server stopped before it started")
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{app.state.bound_port}"
    finally:
        server.should_exit = True
        await task
        sock.close()
