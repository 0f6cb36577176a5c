"""A real Prometheus server for end-to-end tests: the project's rule files, static targets on
loopback, and its HTTP API read for the alerts that fire (tests/e2e/test_alerts_fire.py).

The binary is Debian's `prometheus` package's (scripts/ensure-test-tools.sh unpacks it under
.data/tools/bin beside promtool); `prometheus_binary()` is None where it cannot be had.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from quiz_testkit.nats_server import free_port

ROOT = Path(__file__).resolve().parents[4]


def prometheus_binary() -> str | None:
    """prometheus on PATH, or the one scripts/ensure-test-tools.sh unpacked."""
    return shutil.which("prometheus") or (
        str(p) if (p := ROOT / ".data" / "tools" / "bin" / "prometheus").exists() else None
    )


class PrometheusServer:
    """`prometheus` scraping `targets` (host:port, `/metrics`) every `interval_s` and evaluating
    `rule_files` as often, its data and config under `directory`, its API on a loopback port."""

    def __init__(
        self,
        directory: Path,
        targets: Sequence[str],
        rule_files: Sequence[Path],
        *,
        interval_s: int = 2,
        job: str = "quiz",
    ) -> None:
        binary = prometheus_binary()
        if binary is None:
            raise RuntimeError("prometheus is not installed (scripts/ensure-test-tools.sh)")
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # JSON is YAML: the config written without a YAML library.
        config: dict[str, Any] = {
            "global": {
                "scrape_interval": f"{interval_s}s",
                "scrape_timeout": f"{interval_s}s",
                "evaluation_interval": f"{interval_s}s",
            },
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": list(targets)}]},
            ],
        }
        directory.mkdir(parents=True, exist_ok=True)
        self.config = directory / "prometheus.yml"
        self.config.write_text(json.dumps(config, indent=2))
        self.log = directory / "prometheus.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60) -> PrometheusServer:
        with self.log.open("wb") as out:
            self._proc = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={self.directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"prometheus exited:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"prometheus did not get ready:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def alerts(self) -> list[dict[str, Any]]:
        """`/api/v1/alerts`: every pending and firing alert, with labels and annotations."""
        reply = httpx.get(f"{self.url}/api/v1/alerts", timeout=5)
        reply.raise_for_status()
        return list(reply.json()["data"]["alerts"])

    def firing(self) -> list[dict[str, Any]]:
        return [a for a in self.alerts() if a["state"] == "firing"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector."""
        reply = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=5)
        reply.raise_for_status()
        return list(reply.json()["data"]["result"])

    def targets_up(self) -> int:
        """How many targets answered their last scrape."""
        return sum(int(float(r["value"][1])) for r in self.query("up"))


_NAME_MATCHER = re.compile(r'__name__=~"([^"]+)"')
_SUFFIXES = ("_bucket", "_sum", "_count", "_created")


def families(exposition: str) -> set[str]:
    """The metric families a `/metrics` text declares (`# TYPE` lines: those without a sample
    yet, a labelled metric no event has reached, included). A counter's `_created` companion
    (its start time, prometheus_client's own) is part of the counter, not a family of its own."""
    found = set(re.findall(r"^# TYPE (\S+) ", exposition, re.M))
    return {n for n in found if not n.endswith("_created")}


def uncovered(names: set[str], *texts: str) -> set[str]:
    """The families of `names` that no text queries: neither by name (a histogram's `_bucket`
    counts) nor by a `{__name__=~"…"}` matcher that the whole name matches."""
    text = "\n".join(texts).replace('\\"', '"')  # a JSON file's queries, unescaped
    patterns = [re.compile(p) for p in _NAME_MATCHER.findall(text)]
    queried = {n for n in re.findall(r"\b(quiz_[a-z0-9_]*[a-z0-9])\b", text)}
    queried |= {n.removesuffix(s) for n in queried for s in _SUFFIXES if n.endswith(s)}
    left = set()
    for name in names:
        forms = {name, *(name + s for s in _SUFFIXES)}
        if name in queried or any(p.fullmatch(f) for p in patterns for f in forms):
            continue
        left.add(name)
    return left
