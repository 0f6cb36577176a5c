"""Docker backend: one throwaway container per sandboxed step, on an image of the host toolchains.

Every container: network none, read-only root, tmpfs work dir, /tmp and /dev/shm, all
capabilities dropped, no-new-privileges, the slot's non-root uid, memory and pids limits, no log
driver (output is read through the attach stream, bounded). The same init as bwrap sets the
rlimits and reports the status, here through a file in a per-step host dir read without
following symlinks.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound, NotFound
from docker.models.containers import Container
from docker.types import LogConfig, Mount, Ulimit
from requests.exceptions import RequestException

from quiz_runner.languages import (
    BUILD_DIR,
    INIT_PATH,
    SANDBOX_PATH_ENV,
    SOURCE_DIR,
    TMP_DIR,
    WORK_DIR,
)
from quiz_runner.sandbox.base import (
    INIT_SOURCE,
    MAX_BUILD_BYTES,
    MAX_BUILD_FILES,
    BuildEntry,
    ExecLimits,
    Execution,
    Job,
    apply_status,
    archive_argv,
    init_argv,
    judge_memory,
    kill_uid,
    parse_archive,
    sweepable,
)

DEFAULT_HOST = "unix:///run/quiz-docker.sock"
DEFAULT_DATA_ROOT = Path("/var/lib/quiz-docker")
IMAGE_REPOSITORY = "quiz-runner-sandbox"
IMAGE_LAYOUT = "3"  # bump when ensure_image lays the image out differently
REPORT_DIR = "/run/quiz"
# What the image holds: the toolchains of languages.Toolchain and the libraries they load.
IMAGE_PATHS = (
    "usr/bin/python3",
    "usr/bin/python3.11",
    "usr/lib/python3.11",
    "usr/bin/gcc",
    "usr/bin/gcc-12",
    "usr/bin/g++",
    "usr/bin/g++-12",
    "usr/bin/cc",
    "usr/bin/c++",
    "usr/bin/cpp",
    "usr/bin/cpp-12",
    "usr/bin/as",
    "usr/bin/ld",
    "usr/bin/ld.bfd",
    "usr/bin/x86_64-linux-gnu-as",
    "usr/bin/x86_64-linux-gnu-ld",
    "usr/bin/x86_64-linux-gnu-ld.bfd",
    "usr/bin/x86_64-linux-gnu-gcc-12",
    "usr/bin/x86_64-linux-gnu-g++-12",
    "usr/bin/x86_64-linux-gnu-cpp-12",
    "usr/lib/gcc",
    "usr/libexec/gcc",
    "usr/include",
    "usr/bin/node",
    "usr/bin/nodejs",
    "usr/bin/java",
    "usr/bin/javac",
    "usr/lib/jvm",
    "usr/lib/x86_64-linux-gnu",
    "usr/lib64",
    "etc/alternatives",
    "etc/java-17-openjdk",
    "etc/ld.so.cache",
    "etc/ld.so.conf",
    "etc/ld.so.conf.d",
    "bin",
    "lib",
    "lib64",
)


class EngineUnavailable(RuntimeError):
    """No Docker engine answers and none could be started."""


def _ping(host: str) -> docker.DockerClient | None:
    try:
        client = docker.DockerClient(base_url=host, timeout=120)
        client.ping()
        return client
    except DockerException:
        return None


def connect_or_start(
    host: str = DEFAULT_HOST, data_root: Path = DEFAULT_DATA_ROOT, wait_s: float = 60.0
) -> docker.DockerClient:
    """A client of the engine on `host`; as root, start `dockerd` there when none answers."""
    client = _ping(host)
    if client is not None:
        return client
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise EngineUnavailable("dockerd is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        raise EngineUnavailable("dockerd is not running and starting it needs root")
    if not host.startswith("unix://"):
        raise EngineUnavailable(f"{host} does not answer and is not a local socket")
    data_root.mkdir(parents=True, exist_ok=True)
    log = open(data_root.parent / "quiz-dockerd.log", "ab")
    # Its own socket, data and exec roots: never the host's default engine. No iptables and
    # no bridge: the sandboxes use network "none" only.
    proc = subprocess.Popen(
        [
            dockerd,
            "--iptables=false",
            "--bridge=none",
            "-H",
            host,
            "--data-root",
            str(data_root),
            "--exec-root",
            "/run/quiz-docker",
            "--pidfile",
            "/run/quiz-docker.pid",
        ],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        client = _ping(host)
        if client is not None:
            return client
        if proc.poll() is not None:
            raise EngineUnavailable(f"dockerd exited with {proc.returncode}, see {log.name}")
        time.sleep(0.5)
    raise EngineUnavailable(f"dockerd did not answer on {host} within {wait_s:.0f}s")


def image_tag(init_path: Path) -> str:
    """The image's tag: changes with the init and with the list of toolchain paths."""
    listing = "\n".join((IMAGE_LAYOUT, *IMAGE_PATHS)).encode()
    digest = hashlib.sha256(INIT_SOURCE.read_bytes() + listing)
    return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:16]}"


def ensure_image(client: docker.DockerClient, init_path: Path) -> str:
    """Import the sandbox image from the host's toolchains (no registry), once per tag."""
    tag = image_tag(init_path)
    with contextlib.suppress(ImageNotFound):
        client.images.get(tag)
        return tag
    with tempfile.TemporaryDirectory(prefix="quiz-runner-image-") as tmp:
        stage = Path(tmp) / "stage"
        for d in (".quiz", "work", "build", "src", "tmp", "run/quiz"):
            (stage / d).mkdir(parents=True)
        # Docker copies a tmpfs mount point's mode from the image: these must be 1777 here.
        for d in ("work", "tmp", "build"):
            os.chmod(stage / d, 0o1777)  # noqa: S103 - sticky, world-writable like any /tmp
        shutil.copy2(init_path, stage / INIT_PATH.lstrip("/"))
        tarball = Path(tmp) / "image.tar"
        present = [p for p in IMAGE_PATHS if os.path.lexists(f"/{p}")]
        subprocess.run(["tar", "-C", "/", "-cf", str(tarball), *present], check=True)
        subprocess.run(
            [
                "tar",
                "-C",
                str(stage),
                "-rf",
                str(tarball),
                ".quiz",
                "work",
                "build",
                "src",
                "tmp",
                "run",
            ],
            check=True,
        )
        repository, version = tag.split(":")
        client.api.import_image_from_file(str(tarball), repository=repository, tag=version)
    return tag


def read_report(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of a regular file the sandbox wrote, never through a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as fh:
        # O_NONBLOCK: a FIFO planted there must not hang the runner; only regular files count.
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return fh.read(limit)


# A job's host dir is a tmpfs of its own when the runner may mount one: the containers' bind
# mounts then name paths inside it ("/src/main.py"), not the state dir or the job's id. It
# holds the job's files, its build and the steps' report dirs (the archive of the build).
JOB_TMPFS_BYTES = 2 * MAX_BUILD_BYTES + 64 * 1024 * 1024
JOB_TMPFS_INODES = 4 * MAX_BUILD_FILES + 4096
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def mount_tmpfs(path: Path, size: int, inodes: int) -> bool:
    """Mount a private tmpfs on `path` (root only); False when this process may not mount."""
    options = f"size={size},nr_inodes={inodes},mode=0711".encode()
    flags = _MS_NOSUID | _MS_NODEV
    return _libc().mount(b"quiz-job", bytes(path), b"tmpfs", flags, options) == 0


def unmount(path: Path) -> None:
    """Detach the tmpfs on `path` (its files go with it)."""
    _libc().umount2(bytes(path), _MNT_DETACH)


def write_tree(root: Path, entries: dict[str, BuildEntry]) -> None:
    """Write `entries` under `root`, root-owned, read-only to everybody else."""
    root.mkdir(mode=0o755, exist_ok=True)
    for rel, entry in sorted(entries.items()):
        path = root / rel
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        if entry.data is None:
            path.mkdir(mode=0o755, exist_ok=True)
            continue
        path.write_bytes(entry.data)
        os.chmod(path, 0o755 if entry.mode & 0o111 else 0o644)


class DockerSandbox:
    """Runs each step as a fresh container of the sandbox image under the slot's uid."""

    name = "docker"

    def __init__(self, client: docker.DockerClient, image: str, state_dir: Path) -> None:
        self.client = client
        self.image = image
        self.jobs_dir = state_dir / "jobs"

    async def prepare(self, job: Job) -> None:
        """The job's host dir (its own tmpfs when possible) holding its files under src/."""
        await asyncio.to_thread(self._prepare, job)

    def _prepare(self, job: Job) -> None:
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.jobs_dir, 0o711)  # noqa: S103 - dockerd binds from here
        root = self.jobs_dir / uuid.uuid4().hex
        root.mkdir(mode=0o711)
        job.root = root
        if os.geteuid() == 0 and mount_tmpfs(root, JOB_TMPFS_BYTES, JOB_TMPFS_INODES):
            job.mounted = True
        write_tree(root / "src", {p: BuildEntry(0o644, d) for p, d in job.files.items()})

    async def release(self, job: Job) -> None:
        """Unmount and remove the job's host dir."""
        await asyncio.to_thread(self._release, job)

    def _release(self, job: Job) -> None:
        if job.root is None:
            return
        if job.mounted:
            unmount(job.root)
        shutil.rmtree(job.root, ignore_errors=True)

    def ready(self) -> tuple[bool, str]:
        """The engine answers and the image exists."""
        try:
            self.client.ping()
            self.client.images.get(self.image)
        except DockerException as exc:
            return False, f"docker: {exc}"
        return True, "ok"

    async def compile(self, job: Job, argv: list[str], limits: ExecLimits) -> Execution:
        """Compile with the sources read-only at /src; what it writes in /build is kept."""
        assert job.root is not None
        mounts = [Mount(SOURCE_DIR, str(job.root / "src"), type="bind", read_only=True)]
        result = await asyncio.to_thread(
            self._execute, job, mounts, BUILD_DIR, argv, b"", limits, None
        )
        if result.build_error is None:
            await asyncio.to_thread(write_tree, job.root / "build", job.build)
        return result

    async def run(
        self,
        job: Job,
        argv: list[str],
        stdin: bytes,
        limits: ExecLimits,
        collect: str | None,
    ) -> Execution:
        """Run one case in a fresh container: tmpfs work dir with the job's files read-only."""
        assert job.root is not None
        src = job.root / "src"
        mounts = [
            Mount(f"{WORK_DIR}/{entry}", str(src / entry), type="bind", read_only=True)
            for entry in job.entries
        ]
        (job.root / "build").mkdir(mode=0o755, exist_ok=True)
        mounts.append(Mount(BUILD_DIR, str(job.root / "build"), type="bind", read_only=True))
        return await asyncio.to_thread(
            self._execute, job, mounts, WORK_DIR, argv, stdin, limits, collect
        )

    def _execute(
        self,
        job: Job,
        mounts: list[Mount],
        workdir: str,
        argv: list[str],
        stdin: bytes,
        limits: ExecLimits,
        collect: str | None,
    ) -> Execution:
        assert job.root is not None
        reports = job.root / f"report-{uuid.uuid4().hex[:12]}"
        reports.mkdir(mode=0o700)
        if sweepable(job.uid):
            os.chown(reports, job.uid, job.uid)
        # +1: the init is the container's pid 1, under the same uid as the program.
        init = init_argv(limits, pid1_processes=1, status=f"{REPORT_DIR}/status")
        if collect is not None:
            init += ["--collect", collect, "--collect-out", f"{REPORT_DIR}/collect"]
            init += ["--collect-max", str(limits.file_bytes)]
        compiling = workdir == BUILD_DIR
        if compiling:
            init += archive_argv(BUILD_DIR, f"{REPORT_DIR}/archive")
        size = f"size={limits.tmpfs_bytes},nr_inodes={limits.tmpfs_inodes},mode=1777"
        writable = (BUILD_DIR if compiling else WORK_DIR, TMP_DIR, "/dev/shm")  # noqa: S108
        # The memory cgroup also counts tmpfs pages: the program's budget plus its tmpfs.
        memory = limits.address_mb * 1024 * 1024 + 3 * limits.tmpfs_bytes
        api = self.client.api
        host_config = api.create_host_config(
            network_mode="none",
            read_only=True,
            tmpfs=dict.fromkeys(writable, size),
            mounts=[*mounts, Mount(REPORT_DIR, str(reports), type="bind", read_only=False)],
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=memory,
            memswap_limit=memory,
            pids_limit=limits.processes + 2,
            ulimits=[Ulimit(name="core", soft=0, hard=0)],
            # Its own IPC namespace, and no /dev/shm of the engine's: ours, with inode limits.
            ipc_mode="none",
            log_config=LogConfig(type="none"),
        )
        created = api.create_container(
            self.image,
            command=[*init, "--", *argv],
            user=f"{job.uid}:{job.uid}",
            working_dir=workdir,
            environment={"PATH": SANDBOX_PATH_ENV, "LANG": "C.UTF-8", "HOME": TMP_DIR},
            hostname="sandbox",
            # With detach=False the SDK also sets StdinOnce: EOF on the attach stream closes
            # the program's stdin.
            stdin_open=True,
            detach=False,
            tty=False,
            network_disabled=True,
            labels={"quiz-runner": "sandbox"},
            host_config=host_config,
        )
        container = self.client.containers.get(created["Id"])
        try:
            result = self._attach_and_wait(container, stdin, limits)
            state = self.client.api.inspect_container(container.id)["State"]
            if state.get("OOMKilled"):
                result.memory_exceeded = True
            apply_status(result, read_report(reports / "status", 4096), limits)
            if collect is not None:
                result.collected = read_report(reports / "collect", limits.file_bytes + 1)
            if compiling:
                archive = read_report(reports / "archive", MAX_BUILD_BYTES + (1 << 20))
                job.build, result.build_error = parse_archive(archive)
        finally:
            with contextlib.suppress(NotFound, RequestException):
                container.remove(force=True)
            shutil.rmtree(reports, ignore_errors=True)
            if sweepable(job.uid):
                kill_uid(job.uid, wait_s=1.0)
        judge_memory(result, limits)
        return result

    def _attach_and_wait(self, container: Container, stdin: bytes, limits: ExecLimits) -> Execution:
        """Feed stdin and read the multiplexed output, bounded, until exit, cut or wall clock."""
        result = Execution()
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        attached = self.client.api.attach_socket(container.id, params=params)
        raw: socket.socket = attached._sock
        start = time.monotonic()
        container.start()

        def feed() -> None:
            with contextlib.suppress(OSError):
                raw.sendall(stdin)
            with contextlib.suppress(OSError):
                raw.shutdown(socket.SHUT_WR)  # EOF on the program's stdin (stdin_once)

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        deadline = start + limits.wall_s
        streams = {1: bytearray(), 2: bytearray()}
        buf = bytearray()
        ended = False
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    result.timed_out = "wall"
                    break
                raw.settimeout(left)
                try:
                    chunk = raw.recv(65536)
                except TimeoutError:
                    result.timed_out = "wall"
                    break
                if not chunk:
                    ended = True
                    break
                buf += chunk
                while len(buf) >= 8:
                    size = int.from_bytes(buf[4:8], "big")
                    if len(buf) < 8 + size:
                        break
                    kind, payload = buf[0], bytes(buf[8 : 8 + size])
                    del buf[: 8 + size]
                    target = streams.get(kind)
                    if target is None:
                        continue
                    room = limits.output_bytes - len(target)
                    target += payload[: max(room, 0)]
                    if len(payload) > room:
                        result.output_truncated = True
                if result.output_truncated:
                    break
        except OSError:
            ended = True
        if not ended:
            # Close the stream first: dockerd blocks a kill while it cannot deliver output that
            # nobody reads any more.
            with contextlib.suppress(OSError):
                raw.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                raw.close()
            with contextlib.suppress(DockerException, RequestException):
                container.kill()
        with contextlib.suppress(DockerException, RequestException, OSError):
            container.wait(timeout=10)
        result.wall_ms = int((time.monotonic() - start) * 1000)
        with contextlib.suppress(OSError):
            raw.close()
        writer.join(timeout=1)
        result.stdout, result.stderr = bytes(streams[1]), bytes(streams[2])
        return result
