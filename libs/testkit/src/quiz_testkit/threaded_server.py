"""A Starlette app served by uvicorn on a background thread: the test kit's fake outside servers.

The model provider (`anthropic_stub`) and the human-verification endpoint (`siteverify_stub`)
run this way so that a test, a bench or a service process under test talks to them over a real
socket, whatever event loop the test itself runs.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette


class ThreadedServer:
    """`app` on `host:port` (0: a free port, kept across stop/start) in a thread of its own.

    Subclasses set `app` and may give uvicorn more settings (`uvicorn_options`) or wake their
    own waiters before a stop (`before_stop`, called on the server's loop).
    """

    app: Starlette
    name = "server"

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def uvicorn_options(self) -> dict[str, Any]:
        """Extra `uvicorn.Config` settings."""
        return {}

    def before_stop(self) -> None:
        """Runs on the server's event loop when a stop begins."""

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # An explicit IPPROTO_TCP makes asyncio set TCP_NODELAY on accepted connections; with
        # proto 0 it skips that, and Nagle plus delayed ACK costs ~40 ms per response.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        # Keep the port across stop/start so clients built earlier still reach us.
        self.port = sock.getsockname()[1]
        return sock

    def _build_server(self) -> uvicorn.Server:
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            # Bounds stop() when a handler is still busy.
            timeout_graceful_shutdown=1,
            **self.uvicorn_options(),
        )
        return uvicorn.Server(config)

    def serve_forever(self, announce: Callable[[], str]) -> None:
        """Serve in the foreground (a command line) until SIGINT/SIGTERM, which uvicorn handles;
        `announce()` is printed to stderr once the port is bound."""
        sock = self._bind()
        print(announce(), file=sys.stderr, flush=True)
        self._build_server().run(sockets=[sock])

    async def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        self._loop = asyncio.get_running_loop()
        await server.serve(sockets=[sock])

    def start(self, timeout: float = 10.0) -> Self:
        """Serve on a background thread with its own event loop; returns once listening."""
        if self._thread is not None and self._thread.is_alive():
            return self
        sock = self._bind()
        server = self._build_server()
        thread = threading.Thread(
            target=lambda: asyncio.run(self._serve(server, sock)),
            name=f"{self.name}-{self.port}",
            daemon=True,
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError(f"{self.name} exited during startup")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"{self.name} not listening after {timeout}s")
            time.sleep(0.005)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Shut the server down and wait for its thread; safe to call twice."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.before_stop)
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout)
        self._server = self._thread = self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
