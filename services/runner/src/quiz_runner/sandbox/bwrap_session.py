"""The bubblewrap backend's processes (sandbox/bwrap.py): one request's sandbox (`Session`),
each step's pipes, its wall-clock and output limits, the kill and the end-of-request sweep, and
the switch to the slot's uid (`as_uid`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import time
from collections.abc import Iterator
from typing import Literal

from quiz_runner.languages import SANDBOX_PATH_ENV
from quiz_runner.sandbox.base import ExecLimits, Execution, apply_status

START_TIMEOUT_S = 10.0
# How long the request's init may take to answer "done" after "kill": it only kills and reaps.
KILL_GRACE_S = 5.0


@contextlib.contextmanager
def report_channel(name: str) -> Iterator[int]:
    """An in-memory file the init writes once the program is done (status, picture, build).

    Not a pipe: nothing can block on a full pipe nobody reads yet. Closed on leaving.
    """
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def read_channel(fd: int, limit: int) -> bytes:
    """At most `limit` bytes of what was written to a report channel."""
    return os.pread(fd, limit, 0)


class Session:
    """One request's sandbox: bwrap (namespaces, mounts, the job's files) once, its init serving
    steps over a SOCK_SEQPACKET socket, each step in namespaces of its own (runner_init.c).

    The end-of-request sweep is O(1): the init is pid 1 of the request's pid namespace, held by
    a pidfd; when it exits (EOF on its socket, or SIGKILL through the pidfd), the kernel kills
    every process of the namespace before the pidfd reports the exit. No /proc scan.
    """

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        sock: socket.socket,
        pidfd: int | None,
        error: str | None,
    ) -> None:
        self.proc = proc
        self.sock = sock
        self.pidfd = pidfd
        self.error = error  # why the sandbox cannot run steps (it failed to start, or died)

    @classmethod
    async def start(
        cls,
        bwrap: list[str],
        bwrap_args: list[str],
        init: list[str],
        *,
        uid: int,
        pass_fds: list[int],
        preload: list[str],
    ) -> Session:
        """Start bwrap as `uid`; wait for the init's "ready" (or say why it did not come)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        info_r, info_w = os.pipe2(os.O_CLOEXEC)
        args_fd = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
        try:
            data = "\0".join([*bwrap_args, "--info-fd", str(info_w)]).encode() + b"\0"
            os.write(args_fd, data)
            os.lseek(args_fd, 0, os.SEEK_SET)
            env = {"PATH": SANDBOX_PATH_ENV}
            if preload:
                # The wheel's bwrap finds its libcap beside itself ($ORIGIN), a host path
                # the slot's uid may not reach: hand it over preloaded, by fd.
                env["LD_PRELOAD"] = " ".join(preload)
            command, as_user = as_uid(
                [*bwrap, str(args_fd), "--", *init, str(theirs.fileno())], uid
            )
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                **as_user,  # type: ignore[arg-type]
                pass_fds=[*pass_fds, args_fd, info_w, theirs.fileno()],
                start_new_session=True,
                cwd="/",
                # bwrap itself gets no secrets either (--clearenv empties the program's).
                env=env,
            )
        finally:
            os.close(args_fd)
            os.close(info_w)
            theirs.close()
        ours.setblocking(False)
        loop = asyncio.get_running_loop()
        session = cls(proc, ours, None, None)
        try:
            ready = await asyncio.wait_for(loop.sock_recv(ours, 64), START_TIMEOUT_S)
        except (TimeoutError, OSError):
            ready = b""
        if ready != b"ready":
            session.error = await session._bwrap_said()
            await session.close()
            return session
        info = await asyncio.to_thread(_read_all, info_r)
        match = re.search(rb'"child-pid"\s*:\s*(\d+)', info)
        if match is not None:
            # Alive (it is waiting for us on its socket): no pid reuse can come between.
            session.pidfd = os.pidfd_open(int(match.group(1)))
        return session

    async def _bwrap_said(self) -> str:
        """What bwrap printed on the way out (why the sandbox did not start)."""
        assert self.proc.stderr is not None
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        try:
            said = await asyncio.wait_for(self.proc.stderr.read(65536), 5.0)
        except TimeoutError:
            said = b""
        return said.decode("utf-8", "replace").strip() or "the sandbox did not start"

    async def step(
        self,
        args: list[str],
        argv: list[str],
        stdin: bytes,
        limits: ExecLimits,
        *,
        extra_fds: list[int],
    ) -> Execution:
        """Run one step: feed stdin, read at most output_bytes of each stream, kill on wall."""
        result = Execution()
        start = time.monotonic()
        status = os.memfd_create("status", os.MFD_CLOEXEC)
        try:
            if self.error is None:
                await self._step(result, args, argv, stdin, limits, status, extra_fds)
            if self.error is not None and result.init_error is None:
                result.init_error = self.error
                result.stderr = result.stderr or self.error.encode()
            apply_status(result, read_channel(status, 4096), limits)
        finally:
            os.close(status)
        result.wall_ms = int((time.monotonic() - start) * 1000)
        return result

    async def _step(
        self,
        result: Execution,
        args: list[str],
        argv: list[str],
        stdin: bytes,
        limits: ExecLimits,
        status: int,
        extra_fds: list[int],
    ) -> None:
        pipes = self._send(args, argv, status, extra_fds)
        if pipes is None:
            return
        in_w, out_r, err_r = pipes
        loop = asyncio.get_running_loop()
        cut = asyncio.Event()
        feeding = asyncio.create_task(_feed(loop, in_w, stdin))
        out_task = asyncio.create_task(_drain(loop, out_r, limits.output_bytes, result, cut))
        err_task = asyncio.create_task(_drain(loop, err_r, limits.output_bytes, result, cut))
        done_task = asyncio.create_task(loop.sock_recv(self.sock, 256))
        cut_task = asyncio.create_task(cut.wait())
        await self._until_done(result, done_task, cut_task, limits.wall_s)
        cut_task.cancel()
        # Stdin a program never read would keep its pipe open.
        feeding.cancel()
        try:
            # Every process holding the pipes is gone by now: the streams end at once.
            result.stdout, result.stderr = await asyncio.wait_for(
                asyncio.gather(out_task, err_task), timeout=5.0
            )
        except TimeoutError:
            out_task.cancel()
            err_task.cancel()
            result.init_error = "the sandbox's pipes stayed open after it ended"
        self._read_done(result, done_task)

    def _send(
        self, args: list[str], argv: list[str], status: int, extra_fds: list[int]
    ) -> tuple[int, int, int] | None:
        """Hand the init the step (its arguments, stdin, stdout, stderr, status, extras): our
        ends of stdin, stdout and stderr; None when the sandbox is gone (`self.error` says)."""
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        message = b"\0".join(a.encode() for a in [*args, "--", *argv])
        try:
            socket.send_fds(self.sock, [message], [in_r, out_w, err_w, status, *extra_fds])
        except OSError as exc:
            for fd in (in_r, in_w, out_r, out_w, err_r, err_w):
                os.close(fd)
            self.error = f"the sandbox is gone: {exc}"
            return None
        for fd in (in_r, out_w, err_w):
            os.close(fd)
        return in_w, out_r, err_r

    async def _until_done(
        self,
        result: Execution,
        done_task: asyncio.Task[bytes],
        cut_task: asyncio.Task[Literal[True]],
        wall_s: float,
    ) -> None:
        """Wait for the init's "done", at most `wall_s` and not past the output's limit (`cut`):
        then the step is killed (`timed_out` "wall" when the wall ended it)."""
        finished, _ = await asyncio.wait(
            {done_task, cut_task}, timeout=wall_s, return_when=asyncio.FIRST_COMPLETED
        )
        if done_task in finished:
            return
        if cut_task not in finished:
            result.timed_out = "wall"
        # Killing the step's init ends its pid namespace: the whole process tree.
        with contextlib.suppress(OSError):
            self.sock.send(b"kill")
        try:
            await asyncio.wait_for(asyncio.shield(done_task), KILL_GRACE_S)
        except TimeoutError:
            self.error = "the sandbox did not end a step when told"
            await self.kill()

    def _read_done(self, result: Execution, done_task: asyncio.Task[bytes]) -> None:
        """What the init said at the step's end: "done …", an init error, or nothing (gone)."""
        if done_task.done() and not done_task.cancelled() and done_task.exception() is None:
            said = done_task.result()
            if said == b"":
                self.error = "the sandbox ended"
            elif not said.startswith(b"done "):
                result.init_error = said.decode("utf-8", "replace")
        else:
            done_task.cancel()
            self.error = self.error or "the sandbox ended"

    async def kill(self) -> None:
        """SIGKILL the request's pid 1: the kernel ends its pid namespace, every process in it."""
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    async def close(self) -> None:
        """End the request: EOF ends its init; wait until its pid 1 (so its namespace) is gone."""
        with contextlib.suppress(OSError):
            self.sock.close()
        try:
            await asyncio.wait_for(self.proc.wait(), KILL_GRACE_S)
        except TimeoutError:
            await self.kill()
        if self.pidfd is not None:
            try:
                # bwrap waits for its pid 1, but bwrap may be killed first (--die-with-parent
                # then kills pid 1): the pidfd says when pid 1, and with it every process of
                # the namespace, is gone.
                if not await _exited(self.pidfd, KILL_GRACE_S):
                    await self.kill()
                    await _exited(self.pidfd, KILL_GRACE_S)
            finally:
                os.close(self.pidfd)
                self.pidfd = None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), KILL_GRACE_S)


async def _feed(loop: asyncio.AbstractEventLoop, in_w: int, stdin: bytes) -> None:
    """Write `stdin` to the step's stdin pipe (`in_w`, closed at the end), then close it."""
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(in_w, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    try:
        # A program that does not read its stdin closes the pipe: that is not an error.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            writer.write(stdin)
            await writer.drain()
    finally:
        # Also when cancelled: stdin the program never read would keep the pipe.
        transport.close()


async def _drain(
    loop: asyncio.AbstractEventLoop,
    fd: int,
    limit: int,
    result: Execution,
    cut: asyncio.Event,
) -> bytes:
    """At most `limit` bytes of a step's stream, read until EOF; past the limit,
    `result.output_truncated` is set and `cut` told (the step is then killed)."""
    reader = asyncio.StreamReader(limit=1 << 20)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    data = bytearray()
    try:
        while chunk := await reader.read(65536):
            room = limit - len(data)
            if room > 0:
                data += chunk[:room]
            if len(chunk) > room and not result.output_truncated:
                # Over the limit: stop the whole case now rather than read forever.
                result.output_truncated = True
                cut.set()
            # Past the limit, keep reading (and dropping) until EOF: the case is
            # being killed, and its end closes the pipe.
    finally:
        transport.close()
    return bytes(data)


def _read_all(fd: int) -> bytes:
    """Everything written to `fd` until its writer closes it (bwrap's --info-fd); closes it."""
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


async def _exited(pidfd: int, timeout: float) -> bool:
    """Whether the process behind `pidfd` exits within `timeout` (a pidfd reads as exited)."""
    loop = asyncio.get_running_loop()
    gone: asyncio.Future[None] = loop.create_future()

    def exited() -> None:
        if not gone.done():
            gone.set_result(None)

    loop.add_reader(pidfd, exited)
    try:
        await asyncio.wait_for(gone, timeout)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(pidfd)


# util-linux's setpriv drops to the slot's uid between our fork and bwrap. Asking Python for
# `user=` instead makes it fork (no vfork) and switch ids in the child: measured here, 12.7 ms a
# spawn against 5.3 ms through setpriv, on every case. Same result either way: real, effective
# and saved uid and gid set, supplementary groups cleared, no capability kept.
SETPRIV = shutil.which("setpriv")


def as_uid(argv: list[str], uid: int) -> tuple[list[str], dict[str, object]]:
    """argv run as `uid`, and the extra subprocess arguments that make it so.

    A runner without root runs its sandboxes as itself: nothing to switch.
    """
    if uid == os.geteuid():
        return argv, {}
    if SETPRIV is None:
        return argv, {"user": uid, "group": uid, "extra_groups": []}
    return [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv], {}
