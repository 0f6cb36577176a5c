"""A service's entry point refuses a configuration that must not start in one line, status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SERVICE = Path(__file__).parent / "migrating" / "service.py"


def test_a_setting_that_does_not_parse_is_one_line_and_status_2() -> None:
    env = {**os.environ, "HTTP_PORT": "eighty", "LOG_LEVEL": "INFO"}
    done = subprocess.run(
        [sys.executable, str(SERVICE)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("service: refused to start: ")
    assert "HTTP_PORT: Input should be a valid integer" in lines[0]
    assert "(got 'eighty')" in lines[0] and "Traceback" not in done.stderr


def test_log_level_debug_adds_the_traceback() -> None:
    env = {**os.environ, "HTTP_PORT": "eighty", "LOG_LEVEL": "DEBUG"}
    done = subprocess.run(
        [sys.executable, str(SERVICE)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "refused to start" in done.stderr and "Traceback" in done.stderr
