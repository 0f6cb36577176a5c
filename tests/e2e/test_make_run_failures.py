"""`make run` when a service cannot start: it says which one, and why, then stops the rest."""

from __future__ import annotations

import re
from pathlib import Path

import psutil
import pytest

from quiz_testkit.system import System

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_a_service_that_cannot_start_is_named_with_its_reason(
    tmp_path: Path, nats_url: str
) -> None:
    """The runner cannot create its state dir: `make run` reports the runner and the error."""
    system = System(tmp_path, nats_url, {"RUNNER_STATE_DIR": "/proc/no-such-dir/runner"})
    try:
        assert system.proc.wait(150) == 1
    finally:
        system.kill()
    log = system.log.read_text(errors="replace")
    report = log[log.rindex("runner failed at start-up") :]
    assert re.match(r"runner failed at start-up \(exit code \d+\)\.\n", report), report
    why = report.splitlines()[1]
    assert why.startswith("Why: RuntimeError: cannot create the runner's state dir"), report
    assert "/proc/no-such-dir/runner (RUNNER_STATE_DIR)" in why
    assert "Stopping the system: fix runner (above)" in report
    alive = [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(tmp_path) in " ".join(p.info["cmdline"] or [])
    ]
    assert alive == [], [p.info["cmdline"] for p in alive]
