"""Slot uids are claimed host-wide: two runners never share one, a dead runner frees its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from quiz_runner.uids import DEFAULT_LOCK_DIR, UidsUnavailable, claim_uids, default_lock_dir

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


def test_the_default_lock_dir_is_roots_for_root_and_a_users_own_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert default_lock_dir(0) == DEFAULT_LOCK_DIR == Path("/run/lock/quiz-runner")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert default_lock_dir(1234) == tmp_path / "quiz-runner"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    mine = default_lock_dir(1234)
    assert mine != DEFAULT_LOCK_DIR and mine.name == "quiz-runner-1234"


NOBODY = 65534


def as_a_normal_user(code: str) -> subprocess.CompletedProcess[str]:
    """`code` run by a normal user on a host where root ran the runner (root's lock dir there):
    as `nobody` when we are root (the system's Python over this venv's packages, as
    test_rootless does), else as ourselves."""
    if os.geteuid() != 0:
        argv = [sys.executable, "-c", code]
    else:
        DEFAULT_LOCK_DIR.mkdir(parents=True, exist_ok=True)  # what a runner as root leaves
        setpriv = shutil.which("setpriv")
        if setpriv is None or not os.access("/usr/bin/python3", os.X_OK):
            pytest.skip("becoming nobody needs setpriv (util-linux) and /usr/bin/python3")
        site = sysconfig.get_paths()["purelib"]
        boot = f"import site; site.addsitedir({site!r})\n"
        argv = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        argv += ["/usr/bin/python3", "-c", boot + code]
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd="/", timeout=60)
    if "PermissionError" in done.stderr and "site-packages" in done.stderr:
        pytest.skip(f"nobody may not read this checkout: {done.stderr[-300:]}")
    return done


def test_a_normal_user_claims_uids_where_root_ran_the_runner() -> None:
    """Issue 34 item 8: `make test` as a normal user failed 105 runner tests with a raw
    PermissionError on root's /run/lock/quiz-runner; a user's claims now go to its own dir."""
    if os.geteuid() != 0 and not DEFAULT_LOCK_DIR.exists():
        pytest.skip(f"root never ran the runner here ({DEFAULT_LOCK_DIR} does not exist)")
    done = as_a_normal_user(
        "import os\n"
        "from quiz_runner.uids import claim_uids\n"
        f"claim = claim_uids(1, {FIRST}, 2)\n"
        "print(claim.lock_dir, os.stat(claim.lock_dir).st_uid == os.geteuid())\n"
    )
    assert done.returncode == 0, done.stderr
    lock_dir, own = done.stdout.split()
    assert Path(lock_dir) != DEFAULT_LOCK_DIR and own == "True", done.stdout


def test_a_lock_dir_not_ours_is_refused_with_the_way_out() -> None:
    """Named explicitly (RUNNER_UID_LOCK_DIR) but another user's: a sentence, not a traceback
    of PermissionError."""
    if os.geteuid() != 0 and not DEFAULT_LOCK_DIR.exists():
        pytest.skip(f"root never ran the runner here ({DEFAULT_LOCK_DIR} does not exist)")
    done = as_a_normal_user(
        "from pathlib import Path\n"
        "from quiz_runner.uids import UidsUnavailable, claim_uids\n"
        "try:\n"
        f"    claim_uids(1, {FIRST}, 2, Path({str(DEFAULT_LOCK_DIR)!r}))\n"
        "except UidsUnavailable as e:\n"
        "    print(e)\n"
    )
    assert done.returncode == 0, done.stderr
    said = done.stdout
    assert f"cannot write the uid locks in {DEFAULT_LOCK_DIR}" in said, said
    assert "belongs to root" in said and "RUNNER_UID_LOCK_DIR" in said, said
