"""Run a service as its own process (as in production) for tests that need another service."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from quiz_testkit.nats_server import free_port


class ServiceProcess:
    """`python -m <module>` with env, on a free HTTP port; `url` once /readyz answers 200."""

    def __init__(self, module: str, env: dict[str, str], log_path: str | Path) -> None:
        self.module = module
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **env, "HTTP_PORT": str(self.port), "PYTHONUNBUFFERED": "1"}
        self.log_path = Path(log_path)
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> ServiceProcess:
        log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", self.module],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"{self.module} exited:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=1) as r:  # noqa: S310
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.module} was not ready in {timeout_s:g} s:\n{self.log_tail()}")

    @property
    def pid(self) -> int:
        """The process id (once started)."""
        assert self._proc is not None, "not started"
        return self._proc.pid

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def stop(self) -> None:
        """SIGTERM (graceful shutdown), SIGKILL after 10 s."""
        if self._proc is None or self._proc.poll() is not None:
            return
        os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def llm_gateway_process(
    nats_url: str, provider_url: str, directory: str | Path, **env: str
) -> ServiceProcess:
    """The real llm-gateway as its own process (not started): on `nats_url`, calling the
    Anthropic-compatible server at `provider_url` (the testkit's stub) with a test key, its
    SQLite database, settle journal and log under `directory`, no provider retries (a test
    scripts each reply). `env` adds or overrides settings, e.g. `LLM_RATE_LIMITS='{"review": 0}'`.
    Use it as a context manager (`with llm_gateway_process(...) as gw:`) or `.start()`/`.stop()`.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    base = {
        "NATS_URL": nats_url,
        "DATABASE_URL": f"sqlite:///{d / 'gateway.db'}",
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": provider_url,
        "LLM_GATEWAY_PROVIDER_MAX_RETRIES": "0",
        "QUIZ_DATA_DIR": str(d),
    }
    return ServiceProcess("quiz_llm_gateway.main", {**base, **env}, d / "gateway.log")
