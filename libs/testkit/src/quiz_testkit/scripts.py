"""Helper scripts run as their own processes (to kill them mid-work), and waiting on conditions."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path


async def eventually(
    check: Callable[[], Awaitable[bool]] | Callable[[], bool], timeout_s: float = 30.0
) -> None:
    """Wait until `check()` is true; AssertionError after `timeout_s` (a bound, not a timing)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s:g} s")
        await asyncio.sleep(0.05)


class ScriptProcess:
    """`python <script> <args>` with stdout+stderr in `log_path`; the script reports by lines."""

    def __init__(self, script: str | Path, *args: str, log_path: str | Path) -> None:
        self.log_path = Path(log_path)
        with self.log_path.open("wb") as log:
            self.popen = subprocess.Popen(
                [sys.executable, str(script), *args], stdout=log, stderr=subprocess.STDOUT
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def lines(self) -> list[str]:
        return self.output().splitlines()

    def said(self, prefix: str) -> bool:
        """Whether the script printed a line starting with `prefix`."""
        return any(line.startswith(prefix) for line in self.lines())

    async def wait_said(self, prefix: str, timeout_s: float = 60.0) -> None:
        """Wait for a line starting with `prefix`; fail early if the script exits without it."""

        def check() -> bool:
            if self.said(prefix):
                return True
            if self.popen.poll() is not None:
                raise AssertionError(f"script exited before {prefix!r}:\n{self.output()[-3000:]}")
            return False

        try:
            await eventually(check, timeout_s)
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- output:\n{self.output()[-3000:]}") from None

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up."""
        self.popen.kill()
        self.popen.wait()

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM, SIGKILL after `timeout_s`."""
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
