"""How a sandbox is started as the slot's uid."""

from __future__ import annotations

import pytest

from quiz_runner.sandbox import bwrap


def test_setpriv_drops_every_id_and_the_groups() -> None:
    if bwrap.SETPRIV is None:
        pytest.skip("setpriv (util-linux) is not installed")
    argv, extra = bwrap.as_uid(["bwrap", "--unshare-all"], 61003)
    assert argv == [
        bwrap.SETPRIV,
        "--reuid=61003",
        "--regid=61003",
        "--clear-groups",
        "--",
        "bwrap",
        "--unshare-all",
    ]
    assert extra == {}


def test_without_setpriv_python_switches_the_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap, "SETPRIV", None)
    argv, extra = bwrap.as_uid(["bwrap"], 61003)
    assert argv == ["bwrap"]
    assert extra == {"user": 61003, "group": 61003, "extra_groups": []}
