"""`make run`: the whole system on embedded defaults, as separate processes, with clean shutdown.

Starts a nats-server with JetStream (data under .data/nats) unless NATS_URL names one (or, comma-
separated, the nodes of a cluster: the services take the list, and NATS_STREAM_REPLICAS, from the
environment), creates a dev JWT signing key on first run, then runs the six services with
prefixed, coloured logs.
Ctrl-C (or SIGTERM) stops every child; children also die with this process (PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("QUIZ_DATA_DIR", ROOT / ".data")).resolve()
BIN = Path(sys.executable).parent
COLOURS = ["\033[36m", "\033[33m", "\033[32m", "\033[35m", "\033[34m", "\033[91m", "\033[37m"]
RESET = "\033[0m"


@dataclass
class Service:
    name: str
    module: str
    port: int


SERVICES = [
    Service("llm-gateway", "quiz_llm_gateway.main", 8101),
    Service("runner", "quiz_runner.main", 8102),
    Service("editor-assist", "quiz_editor_assist.main", 8103),
    Service("review", "quiz_review.main", 8104),
    Service("poll", "quiz_poll.main", 8105),
    Service("lesson-fix", "quiz_lesson_fix.main", 8106),
]


def port_free(port: int) -> bool:
    """Nobody listens on the port (a server using SO_REUSEADDR would not block a bind)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.3):
            return False
    except OSError:
        pass
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when this runner dies, however it dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


# The last lines each child printed: what `make run` repeats when that child fails.
TAILS: dict[str, deque[str]] = {}


def pump(prefix: str, colour: str, stream: object) -> None:
    """Copy a child's output line by line, prefixed and coloured; keep its last lines."""
    tty = sys.stdout.isatty()
    tail = TAILS.setdefault(prefix, deque(maxlen=40))
    for raw in iter(stream.readline, b""):  # type: ignore[attr-defined]
        line = raw.decode("utf-8", "replace").rstrip("\n")
        tail.append(line)
        tag = f"{colour}{prefix:>13} |{RESET}" if tty else f"{prefix:>13} |"
        print(f"{tag} {line}", flush=True)


# The line of a traceback that says what went wrong: "SomeError: why".
REASON = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Unavailable|Exit))\b.*")


def failure_report(name: str, returncode: int, tail: list[str], started: bool) -> str:
    """Which service failed, how, why (the exception it died of), and its last words."""
    when = "while running" if started else "at start-up"
    lines = [f"{name} failed {when} (exit code {returncode})."]
    reasons = [line.strip() for line in tail if REASON.match(line)]
    if reasons:
        lines.append(f"Why: {reasons[-1]}")
    lines.append("Its last output:")
    lines += [f"    {line}" for line in tail[-8:]] or ["    (nothing)"]
    lines.append(f"Stopping the system: fix {name} (above), then `make run` again.")
    return "\n".join(["", *lines, ""])


def start(name: str, argv: list[str], env: dict[str, str], colour: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        # Own process group: the terminal's Ctrl-C reaches the runner only, which stops the
        # children in order instead of all of them racing.
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    threading.Thread(target=pump, args=(name, colour, proc.stdout), daemon=True).start()
    return proc


def is_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=1) as r:  # noqa: S310 (our URL)
            return bool(r.status == 200)
    except OSError:
        return False


def exited(procs: list[tuple[str, subprocess.Popen[bytes]]], started: bool) -> str | None:
    """The failure report of a child that has exited, if any."""
    for name, p in procs:
        if p.poll() is not None:
            time.sleep(0.2)  # its last lines are still on their way through the pipe
            return failure_report(name, p.returncode, list(TAILS.get(name, ())), started)
    return None


def stop_all(procs: list[tuple[str, subprocess.Popen[bytes]]]) -> None:
    """Stop the services, then NATS (they drain through it): SIGTERM, then SIGKILL if stuck."""
    services = [(n, p) for n, p in procs if n != "nats"]
    broker = [(n, p) for n, p in procs if n == "nats"]
    for group in (services, broker):
        for _, p in group:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for name, p in group:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"{name} did not stop in time; killing it", flush=True)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def main() -> int:
    DATA.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT / "libs" / "testkit" / "src"))
    from quiz_testkit.jwt_keys import SigningKeys
    from quiz_testkit.nats_server import free_port

    keys = SigningKeys.load_or_create(DATA / "dev-keys")
    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    nats_url = os.environ.get("NATS_URL")
    credentials: dict[str, str] = {}
    if not nats_url:
        from quiz_contracts.bus import nats_accounts_config
        from quiz_testkit.nats_server import dev_credentials, with_credentials

        port = 4222 if port_free(4222) else free_port()
        # The locked bus (quiz_contracts.bus): a password per user under .data/nats-credentials,
        # each service connecting as itself; the URL printed below is the `ops` user's.
        credentials_dir = DATA / "nats-credentials"
        credentials = dev_credentials(credentials_dir)
        nats_url = with_credentials(f"nats://127.0.0.1:{port}", "ops", credentials["ops"])
        # max_payload as everywhere we ship NATS (quiz_contracts.subjects.NATS_MAX_PAYLOAD).
        config = DATA / "nats.conf"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(nats_accounts_config(credentials))
        argv = [str(BIN / "nats-server"), "-c", str(config), "-a", "127.0.0.1", "-p", str(port)]
        argv += ["-js", "-sd", str(DATA / "nats")]
        procs.append(("nats", start("nats", argv, dict(os.environ), COLOURS[6])))
        # Where the bus is, without credentials, for the tools run beside it (`make poll-demo`;
        # each adds its own user's password from .data/nats-credentials).
        (DATA / "nats-url").write_text(f"nats://127.0.0.1:{port}\n")
        time.sleep(0.3)
    env = dict(os.environ)
    env.update(
        {
            "NATS_URL": nats_url,
            "JWKS_FILE": str(keys.jwks_path),
            "QUIZ_DATA_DIR": str(DATA),
            "PYTHONUNBUFFERED": "1",
        }
    )
    if credentials:
        env["NATS_CREDENTIALS_DIR"] = str(DATA / "nats-credentials")
    # The runner's state under .data too (root or not), so `make clean` takes it away.
    env.setdefault("RUNNER_STATE_DIR", str(DATA / "runner"))
    # lesson-fix verifies people with a siteverify secret; without one, development runs it
    # with verification off (the service says so in its log and in /readyz).
    verification_off = not env.get("LESSON_FIX_VERIFY_SECRET")
    if verification_off:
        env.setdefault("LESSON_FIX_VERIFY_DISABLED", "true")
    urls: dict[str, str] = {}
    for i, svc in enumerate(SERVICES):
        port = svc.port if port_free(svc.port) else free_port()
        urls[svc.name] = f"http://127.0.0.1:{port}"
        child_env = {**env, "HTTP_PORT": str(port)}
        argv = [sys.executable, "-m", svc.module]
        procs.append((svc.name, start(svc.name, argv, child_env, COLOURS[i])))

    try:
        pending = dict(urls)
        deadline = time.monotonic() + 120
        while pending and not stopping.is_set() and time.monotonic() < deadline:
            if (why := exited(procs, started=False)) is not None:
                print(why, flush=True)
                return 1
            pending = {n: u for n, u in pending.items() if not is_ready(u)}
            stopping.wait(0.3)
        if stopping.is_set():
            return 0
        rows = [f"  {'service':<14} {'url':<26} ready"]
        rows += [f"  {n:<14} {u:<26} {'NO' if n in pending else 'yes'}" for n, u in urls.items()]
        print("\n".join(["", f"NATS: {nats_url}", *rows, ""]), flush=True)
        if credentials:
            print(
                "The bus is locked: each service connects as itself; the NATS URL above is the "
                "operators' (ops).\nOther users' passwords: .data/nats-credentials/<user>.password",
                flush=True,
            )
        notes = [
            "Mint a dev token:  make token SUB=teacher-1 GRANTS='question:42=contributor:mcq:7'",
            "          lessons: make token SUB=author-1 GRANTS='lessons=contributor'",
            "   review (owner): make token SUB=owner-1 GRANTS='pool:7=owner'",
            "Without ANTHROPIC_API_KEY the gateway answers llm_not_configured.",
        ]
        if verification_off:
            notes.append("lesson-fix: human verification is OFF (LESSON_FIX_VERIFY_SECRET unset).")
        print("\n".join([*notes, "Ctrl-C stops everything.", ""]), flush=True)
        while not stopping.is_set():
            if (why := exited(procs, started=True)) is not None:
                print(why, flush=True)
                return 1
            stopping.wait(0.5)
    finally:
        stop_all(procs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
