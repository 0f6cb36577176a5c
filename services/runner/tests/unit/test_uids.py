"""Slot uids are claimed host-wide: two runners never share one, a dead runner frees its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from quiz_runner.uids import UidsUnavailable, claim_uids

# A range no account and no process uses on a test host (sandbox uids are far below 2^31).
FIRST = 1_900_000_000


def test_two_claims_in_one_range_are_disjoint(tmp_path: Path) -> None:
    a = claim_uids(2, FIRST, 4, tmp_path)
    b = claim_uids(2, FIRST, 4, tmp_path)
    assert set(a) | set(b) == set(range(FIRST, FIRST + 4))
    assert not set(a) & set(b)


def test_a_full_range_refuses_and_says_why(tmp_path: Path) -> None:
    held = claim_uids(3, FIRST, 3, tmp_path)
    with pytest.raises(UidsUnavailable) as err:
        claim_uids(1, FIRST, 3, tmp_path)
    assert "3 claimed by another runner" in str(err.value)
    assert str(tmp_path) in str(err.value) and "RUNNER_UID_BASE" in str(err.value)
    held.release()
    assert claim_uids(1, FIRST, 3, tmp_path).uids == [FIRST]


def test_a_failed_claim_holds_nothing(tmp_path: Path) -> None:
    held = claim_uids(1, FIRST + 1, 1, tmp_path)  # kept: a dropped claim closes its locks
    with pytest.raises(UidsUnavailable):
        claim_uids(2, FIRST, 2, tmp_path)  # gets FIRST, then cannot get FIRST + 1
    assert claim_uids(1, FIRST, 1, tmp_path).uids == [FIRST]
    held.release()


def test_a_killed_holder_frees_its_uids(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sys, time
                from pathlib import Path
                from quiz_runner.uids import claim_uids
                claim = claim_uids(2, {FIRST}, 2, Path({str(tmp_path)!r}))
                print("held", flush=True)
                time.sleep(60)
            """),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        with pytest.raises(UidsUnavailable):
            claim_uids(1, FIRST, 2, tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert claim_uids(2, FIRST, 2, tmp_path).uids == [FIRST, FIRST + 1]


def test_a_uid_with_a_live_process_is_skipped(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("starting a process under another uid needs root")
    squatter = subprocess.Popen(["sleep", "60"], user=FIRST)  # a runner that predates the locks
    try:
        assert claim_uids(1, FIRST, 2, tmp_path).uids == [FIRST + 1]
    finally:
        squatter.kill()
        squatter.wait()


def test_an_account_uid_is_never_claimed(tmp_path: Path) -> None:
    nobody = 65534  # Debian's `nobody`: an account, so never a sandbox uid
    claim = claim_uids(1, nobody, 2, tmp_path)
    assert claim.uids == [nobody + 1]


def test_root_is_never_in_range(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        claim_uids(1, 0, 10, tmp_path)
