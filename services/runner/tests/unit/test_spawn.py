"""How a sandbox is started as the slot's uid."""

from __future__ import annotations

import pytest

from quiz_runner.sandbox import bwrap_session


def test_setpriv_drops_every_id_and_the_groups() -> None:
    if bwrap_session.SETPRIV is None:
        pytest.skip("setpriv (util-linux) is not installed")
    argv, extra = bwrap_session.as_uid(["bwrap", "--unshare-all"], 61003)
    assert argv == [
        bwrap_session.SETPRIV,
        "--reuid=61003",
        "--regid=61003",
        "--clear-groups",
        "--",
        "bwrap",
        "--unshare-all",
    ]
    assert extra == {}


def test_without_setpriv_python_switches_the_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap_session, "SETPRIV", None)
    argv, extra = bwrap_session.as_uid(["bwrap"], 61003)
    assert argv == ["bwrap"]
    assert extra == {"user": 61003, "group": 61003, "extra_groups": []}


async def test_child_exits_come_through_pidfds() -> None:
    import asyncio
    import sys
    import warnings

    from quiz_runner.sandbox.base import watch_children_with_pidfds

    if not watch_children_with_pidfds():
        pytest.skip("Python ≥ 3.12 or no pidfds: the loop already watches without threads")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        watcher = asyncio.get_event_loop_policy().get_child_watcher()
    assert isinstance(watcher, asyncio.PidfdChildWatcher)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "raise SystemExit(7)")
    assert await proc.wait() == 7
