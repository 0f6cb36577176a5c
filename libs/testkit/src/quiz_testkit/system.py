"""The whole system as `make run` starts it (scripts/devrun.py), for end-to-end tests."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[4]


def promtool() -> str | None:
    """promtool on PATH, or the one scripts/ensure-test-tools.sh unpacked."""
    return shutil.which("promtool") or (
        str(p) if (p := ROOT / ".data" / "tools" / "bin" / "promtool").exists() else None
    )


class System:
    """`scripts/devrun.py` in its own session, as a terminal would run `make run`."""

    def __init__(
        self, data_dir: Path, nats_url: str | None, extra_env: dict[str, str] | None = None
    ) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "ANTHROPIC_API_KEY")}
        env["QUIZ_DATA_DIR"] = str(data_dir)
        if nats_url:
            env["NATS_URL"] = nats_url
        env.update(extra_env or {})
        self.log = data_dir / "run.log"
        self._out = self.log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "devrun.py")],
            cwd=ROOT,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_table(self, timeout_s: float = 150) -> tuple[str, dict[str, str]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            if "Ctrl-C stops everything" in text:
                nats_url = re.search(r"NATS: (\S+)", text)
                rows = re.findall(r"^  ([a-z-]+)\s+(http://\S+)\s+(yes|NO)\b.*$", text, re.M)
                assert nats_url, text
                assert all(r[2] == "yes" for r in rows), text
                return nats_url.group(1), {r[0]: r[1] for r in rows}
            if self.proc.poll() is not None:
                pytest.fail(f"make run exited early:\n{text[-4000:]}")
            time.sleep(0.3)
        pytest.fail(f"the system did not come up:\n{self.log.read_text()[-4000:]}")

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def interrupt(self) -> None:
        # The terminal sends Ctrl-C to the foreground process group.
        os.killpg(self.proc.pid, signal.SIGINT)
        self.proc.wait(60)
        self._out.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
