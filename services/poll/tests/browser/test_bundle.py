"""The committed page scripts are the build of their sources (`make pages`), byte for byte.

`make run` serves `quiz_poll/static` without Node, so a source edited without a rebuild would
ship the old page. Skips, saying why, where Node or the npm packages are not installed
(`make pages` installs them from the lockfile).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

WEB = Path(__file__).resolve().parents[2] / "web"
STATIC = Path(__file__).resolve().parents[2] / "src" / "quiz_poll" / "static"


@pytest.mark.skipif(
    shutil.which("node") is None or not (WEB / "node_modules" / "d3-force").is_dir(),
    reason="node or services/poll/web/node_modules missing: run `make pages` to rebuild",
)
def test_committed_pages_are_the_build_of_their_sources(tmp_path: Path) -> None:
    subprocess.run(
        ["node", "build.mjs"],
        cwd=WEB,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "POLL_PAGES_OUT": str(tmp_path)},
        check=True,
        timeout=120,
    )
    # The HTML pages and poll.css are written in static/ itself; the scripts are built there.
    built = sorted(p.name for p in tmp_path.iterdir())
    assert built == sorted(p.name for p in STATIC.glob("*.js"))
    stale = [n for n in built if (tmp_path / n).read_bytes() != (STATIC / n).read_bytes()]
    assert stale == [], f"run `make pages` and commit: {stale}"
