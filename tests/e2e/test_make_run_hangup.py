"""A closed terminal stops `make run` as Ctrl-C does (issue 34).

Closing the terminal sends SIGHUP. Before, it killed scripts/devrun.py at once: the children got
SIGTERM all together from PDEATHSIG (NATS with the services still draining through it), the lock
kept their pids, and the next `make run` waited for them in silence.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from quiz_testkit.system import System

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import runinfo  # noqa: E402  (scripts/ is not a package)


def test_a_closed_terminal_stops_everything_in_order_and_leaves_nothing(tmp_path: Path) -> None:
    system = System(tmp_path, None)
    try:
        system.wait_table()
        children = system.descendants()
        assert children
        os.killpg(system.proc.pid, signal.SIGHUP)
        returncode = system.proc.wait(60)
    finally:
        system.kill()
    # Stopped by itself, cleanly (a death by the signal is -SIGHUP), as after Ctrl-C.
    assert returncode == 0, system.log.read_text()[-3000:]
    alive = [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == [], [p.cmdline() for p in alive]
    # Nothing for the next run to wait for: no URL file, a free lock naming no pid.
    assert not (tmp_path / "urls").exists()
    lock = runinfo.Lock(tmp_path)
    assert lock.acquire() and lock.previous_pids() == []
    os.close(lock.fd)
