"""scripts/runinfo.py: the URL file of `make run` and its single-instance lock, without servers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import runinfo  # noqa: E402  (scripts/ is not a package)


def test_the_url_file_is_read_back_while_its_writer_runs(tmp_path: Path) -> None:
    info = runinfo.RunInfo(os.getpid(), {"nats": "nats://127.0.0.1:4222", "poll": "http://x:1"})
    runinfo.write(tmp_path, info)
    back = runinfo.read(tmp_path)
    assert back.pid == os.getpid() and back.urls == info.urls


def test_a_dead_or_reused_pid_is_not_running(tmp_path: Path) -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    runinfo.write(tmp_path, runinfo.RunInfo(child.pid, {"poll": "http://x:1"}))
    with pytest.raises(runinfo.NotRunning, match="is gone"):
        runinfo.read(tmp_path)
    # Our own pid, but written with another start time: a pid reused since the writer died.
    started = runinfo.start_time(os.getpid())
    assert started is not None
    runinfo.write(tmp_path, runinfo.RunInfo(os.getpid(), {"poll": "u"}, started + 1))
    with pytest.raises(runinfo.NotRunning, match="is gone"):
        runinfo.read(tmp_path)
    (tmp_path / "urls").unlink()
    with pytest.raises(runinfo.NotRunning, match="is missing"):
        runinfo.read(tmp_path)


def test_credentials_go_into_each_url_of_a_list_and_out_again(tmp_path: Path) -> None:
    (tmp_path / "nats-credentials").mkdir()
    (tmp_path / "nats-credentials" / "platform.password").write_text("s3cret\n")
    plain = "nats://127.0.0.1:4222,tls://10.0.0.2:4222"
    as_platform = runinfo.with_credentials(plain, "platform", tmp_path)
    assert (
        as_platform == "nats://platform:s3cret@127.0.0.1:4222,tls://platform:s3cret@10.0.0.2:4222"
    )
    assert runinfo.without_credentials(as_platform) == plain
    with pytest.raises(runinfo.NotRunning, match="no password for 'nobody'"):
        runinfo.with_credentials(plain, "nobody", tmp_path)


def test_the_lock_is_held_once_and_names_its_holder(tmp_path: Path) -> None:
    first = runinfo.Lock(tmp_path)
    assert first.acquire()
    first.record([os.getpid()])
    second = runinfo.Lock(tmp_path)
    assert not second.acquire()
    assert second.holder() == os.getpid()
    os.close(first.fd)  # as the kernel does when the holder dies, however it dies
    assert second.acquire()
    assert second.previous_pids() == [os.getpid()]  # alive, same start time: waited for
    os.close(second.fd)
