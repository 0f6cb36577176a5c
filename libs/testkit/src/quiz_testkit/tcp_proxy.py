"""A TCP proxy a test can shut: a database (or any server) made unreachable, then back.

    proxy = TcpProxy("127.0.0.1", 5432).start()   # listens on 127.0.0.1:proxy.port
    url = f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/db"
    proxy.refuse()                                # every connection cut, nothing listens
    proxy.accept()                                # listening again, on the same port
    proxy.hold()                                  # connected, but no byte goes through
    proxy.stop()

`hold()` is a server that went silent rather than down (a frozen process, a host gone off the
network behind a load balancer): connections are accepted and kept, nothing answers.

It runs on an event loop of its own in a background thread (as the test kit's stub servers do),
so a test whose own loop is busy, blocked in a sync call, or absent does not stall the bytes of
the processes behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, Self, TypeVar

T = TypeVar("T")


class TcpProxy:
    """127.0.0.1:`port` → `host`:`target_port`; `refuse()` cuts every connection and stops
    listening (a client then gets "connection refused", as from a database that is down);
    `accept()` listens again on the same port. `port` is free when 0 and kept across both."""

    def __init__(self, host: str, target_port: int, port: int = 0) -> None:
        self.target = (host, target_port)
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._holding = False
        self.connections = 0  # accepted since start (a figure for tests)

    # -- the thread's loop ----------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None, "not started"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def start(self) -> Self:
        """Start the loop thread and listen; returns once the port is bound."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="tcp-proxy", daemon=True)
        self._thread.start()
        self._run(self._listen())
        return self

    def accept(self) -> None:
        """Listen again (after `refuse()`), on the same port, and forward (after `hold()`: the
        connections held are cut, as a server back from silence has forgotten them)."""
        if self._holding:
            self._run(self._refuse())
            self._holding = False
        self._run(self._listen())

    def refuse(self) -> None:
        """Stop listening and abort every open connection, both ways."""
        self._run(self._refuse())

    def hold(self) -> None:
        """Cut every open connection, then accept new ones and never forward a byte (a silent
        server); `accept()` forwards again."""
        self._run(self._refuse())
        self._holding = True
        self._run(self._listen())

    def stop(self) -> None:
        """`refuse()`, then end the loop thread."""
        if self._loop is None:
            return
        self.refuse()
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- on the loop ------------------------------------------------------------------------------

    async def _listen(self) -> None:
        if self._server is not None:
            return
        # reuse_address: the port is taken again at once after refuse(), as a restarted
        # database would take its own.
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _refuse(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._server is None:  # accepted just as refuse() ran
            writer.transport.abort()
            return
        if self._holding:  # kept open, never answered, until refuse() or stop()
            self._writers.add(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.connections += 1
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}
