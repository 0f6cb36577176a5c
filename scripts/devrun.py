"""`make run`: the whole system on embedded defaults, as separate processes, with clean shutdown.

Starts a nats-server with JetStream (data under .data/nats) unless NATS_URL names one (or, comma-
separated, the nodes of a cluster: the services take the list, and NATS_STREAM_REPLICAS, from the
environment), creates a dev JWT signing key on first run, then runs the six services with
prefixed, coloured logs.
Ctrl-C (or SIGTERM) stops every child; children also die with this process (PDEATHSIG).

One at a time per data dir (scripts/runinfo.py): a second `make run` refuses, naming the first's
pid and URLs. The URLs it uses (a port taken moves to a free one; the table says why) are in
`.data/urls` while it runs, read by `make -s url S=<service>` and every documented command.

DEMO=1 without ANTHROPIC_API_KEY (`make run DEMO=1`): the test kit's stub in demo mode is one
more child (`demo-stub`), the gateway's provider, answering canned replies labelled as such.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import runinfo

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


def dev_journal_key(directory: Path) -> Path:
    """`<directory>/journal.key` (0600, 64 hex digits), created when missing."""
    import secrets

    path = directory / "journal.key"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    return path


def port_free(port: int) -> bool:
    """Nobody listens on the port (a server using SO_REUSEADDR would not block a bind)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.3):
            return False
    except OSError:
        pass
    with socket.socket() as s:
        # As uvicorn and nats-server bind: the last run's connections in TIME_WAIT must not
        # move every port of the next run (they did, after each stop).
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def port_holder(port: int) -> str:
    """Who listens on `port`, as far as we may see ("pid 42 (nats-server -p 4222)")."""
    try:
        import psutil
    except ImportError:
        return "another program"
    with contextlib.suppress(psutil.Error, OSError):
        for c in psutil.net_connections(kind="tcp"):
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
                with contextlib.suppress(psutil.Error):
                    cmd = " ".join(psutil.Process(c.pid).cmdline())
                    return f"pid {c.pid} ({cmd[:60]})"
                return f"pid {c.pid}"
    # Only root sees who holds another user's socket: say so, and how to find out.
    return (
        f"a program of another user (only root may see which: `sudo ss -ltnp 'sport = :{port}'` "
        "names it)"
    )


def free_port() -> int:
    from quiz_testkit.nats_server import free_port as testkit_free_port

    return testkit_free_port()


def choose_port(preferred: int) -> tuple[int, str]:
    """`preferred` when free, else a free port and why it moved (for the table)."""
    if port_free(preferred):
        return preferred, ""
    return free_port(), f"{preferred} is in use by {port_holder(preferred)}"


def refuse_second_run(lock: runinfo.Lock) -> str:
    """What a second `make run` of one data dir says: the first's pid and URLs."""
    pid = lock.holder()
    who = f"pid {pid}" if pid else "its pid not written yet"
    lines = [f"make run is already running with this data dir ({DATA}): {who}."]
    try:
        info = runinfo.read(DATA)
        lines += ["Its URLs:", *(f"  {n:<14} {u}" for n, u in info.urls.items())]
    except runinfo.NotRunning:
        lines.append("It is still starting: its URLs are not known yet.")
    lines.append(
        "Use that one, or stop it first (Ctrl-C in its terminal"
        + (f", or kill {pid}" if pid else "")
        + ")."
    )
    return "\n".join(lines)


def plural(n: int, one: str, many: str) -> str:
    """ "1 process", "2 processes"."""
    return f"{n} {one if n == 1 else many}"


def wait_for_leftovers(pids: list[int], say: Callable[[str], object] | None = None) -> list[int]:
    """Children of a killed `make run` still stopping (they get SIGTERM when it dies): wait
    up to 20 s for them to release the ports and the JetStream store; those still alive.
    `say` is told once what is waited for, when anything is (never a silent wait)."""
    deadline = time.monotonic() + 20
    left = [p for p in pids if p != os.getpid() and runinfo.alive(p)]
    if left and say is not None:
        say(
            f"Waiting (up to 20 s) for {plural(len(left), 'process', 'processes')} of the "
            f"previous `make run` to stop: pids {' '.join(map(str, left))}…"
        )
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [p for p in left if runinfo.alive(p)]
    return left


# How many times a service that lost its port at start-up is moved again.
PORT_RETRIES: dict[str, int] = {}


def lost_its_port(name: str) -> bool:
    """The child died at start-up because its port was taken meanwhile (and may move again)."""
    time.sleep(0.2)  # its last lines are still on their way through the pipe
    if not any("Address already in use" in line for line in TAILS.get(name, ())):
        return False
    PORT_RETRIES[name] = PORT_RETRIES.get(name, 0) + 1
    return PORT_RETRIES[name] <= 3


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


# The line that says what went wrong: a traceback's "SomeError: why", or a configuration's
# refusal, "quiz-<service>: refused to start: why" (servicekit's run_service).
REASON = re.compile(
    r"^\s*(([A-Za-z_][\w.]*(Error|Exception|Unavailable|Exit))\b|[\w-]+: refused to start: ).*"
)


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


def start_demo_stub(env: dict[str, str], procs: list[tuple[str, subprocess.Popen[bytes]]]) -> str:
    """`make run DEMO=1`: the test kit's model stub in demo mode as one more child, and the
    gateway pointed at it with the model id `demo-canned-replies` for every purpose, so its logs
    and /admin/availability say so too. Returns the line `make run` prints about it."""
    from quiz_testkit.demo_replies import DEMO_LABEL, DEMO_MODEL
    from quiz_testkit.nats_server import free_port as stub_port

    port = stub_port()
    argv = [sys.executable, "-m", "quiz_testkit.anthropic_stub", "--demo", "--port", str(port)]
    procs.append(("demo-stub", start("demo-stub", argv, dict(os.environ), COLOURS[5])))
    from quiz_contracts.llm import Purpose

    env["ANTHROPIC_API_KEY"] = "demo"
    env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{port}"
    env["PURPOSE_MODELS"] = json.dumps({p.value: DEMO_MODEL for p in Purpose})
    # Priced as Haiku: the daily cap and /admin/usage behave as with a model (a $0 price is
    # refused: an unknown price is not free).
    env["MODEL_PRICES"] = json.dumps({DEMO_MODEL: {"input": 1, "output": 5}})
    return (
        f"DEMO: no model is called. Every model reply is canned by the test kit's stub at "
        f"{env['ANTHROPIC_BASE_URL']}\n      (model {DEMO_MODEL}; texts start with "
        f'{DEMO_LABEL!r}; rules for the documented examples only, docs: README "Demo mode").'
    )


def main() -> int:
    DATA.mkdir(parents=True, exist_ok=True)
    lock = runinfo.Lock(DATA)
    if not lock.acquire():
        print(refuse_second_run(lock), file=sys.stderr, flush=True)
        return 1
    # A previous run killed with -9 leaves its URL file (its pid dead: readers ignore it) and
    # children still stopping; they are waited for, the file replaced below.
    if left := wait_for_leftovers(lock.previous_pids(), say=print):
        print(f"processes of the previous `make run` are still alive: {left}", file=sys.stderr)
        return 1
    lock.record([os.getpid()])
    # Older runs wrote the bus's URL there (and left it behind): .data/urls replaces it.
    (DATA / "nats-url").unlink(missing_ok=True)
    sys.path.insert(0, str(ROOT / "libs" / "testkit" / "src"))
    from quiz_testkit.jwt_keys import DEV_AUDIENCE, DEV_ISSUER, SigningKeys

    keys = SigningKeys.load_or_create(DATA / "dev-keys")
    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    # A closed terminal (SIGHUP) stops as Ctrl-C does: the services first, then NATS, the lock
    # released. Its default (die at once) left the children to PDEATHSIG, all at once, and the
    # next run waiting for them in silence (issue 34).
    signal.signal(signal.SIGHUP, on_signal)

    # DEMO=1 (`make run DEMO=1`): canned replies instead of a model; a key set wins.
    asked = os.environ.get("DEMO", "") not in ("", "0")
    demo = asked and not os.environ.get("ANTHROPIC_API_KEY")
    # Everything a demo run keeps is its own, under .data/demo: its databases and its JetStream
    # store (streams, durable consumers, KV). A plain run never reads a demo message (a canned
    # review.v1.completed, a consumed durable, a dedupe window), nor the reverse (issue 34).
    kept = DATA / "demo" if demo else DATA
    nats_url = os.environ.get("NATS_URL")
    if demo and nats_url:
        print(
            "DEMO=1 refused with NATS_URL set: the demo keeps its own JetStream store, and on "
            f"that bus its messages would mix with a real run's. Unset NATS_URL ({nats_url}).",
            file=sys.stderr,
            flush=True,
        )
        return 1
    credentials: dict[str, str] = {}
    # Why a port moved, by row of the table.
    moved: dict[str, str] = {}
    if not nats_url:
        from quiz_contracts.bus import nats_accounts_config
        from quiz_testkit.nats_server import dev_credentials, with_credentials

        port, moved["nats"] = choose_port(4222)
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
        kept.mkdir(exist_ok=True)
        argv += ["-js", "-sd", str(kept / "nats")]
        procs.append(("nats", start("nats", argv, dict(os.environ), COLOURS[6])))
        time.sleep(0.3)
    # The bus provisioned as operations do, before any service starts (issue 29: no service
    # creates a stream, consumer or bucket): `make provision`, as the ops user.
    provisioned = subprocess.run(
        [
            sys.executable,
            "-m",
            "quiz_servicekit.provision",
            "--nats-url",
            nats_url,
            "--wait-s",
            "20",
        ],
        capture_output=True,
        text=True,
    )
    if provisioned.returncode == 0:
        print("bus provisioned (make provision): streams, consumers, KV buckets", flush=True)
    elif credentials:
        print(f"make run: provisioning the bus failed:\n{provisioned.stderr}", file=sys.stderr)
        stop_all(procs)
        return 1
    else:
        # NATS_URL given: its operators may provision it themselves; a service that finds
        # something missing says what at start.
        print(
            f"make run: could not provision {runinfo.without_credentials(nats_url)} "
            f"(NATS_URL without the ops user?):\n{provisioned.stderr}",
            file=sys.stderr,
        )
    env = dict(os.environ)
    env.update(
        {
            "NATS_URL": nats_url,
            "JWKS_FILE": str(keys.jwks_path),
            "QUIZ_DATA_DIR": str(DATA),
            "PYTHONUNBUFFERED": "1",
        }
    )
    # Checked on every token, as in production (docs/security.md, "Tokens"): the dev key's
    # issuer and audience, which `make token` mints.
    env.setdefault("JWT_ISSUER", DEV_ISSUER)
    env.setdefault("JWT_AUDIENCE", DEV_AUDIENCE)
    if credentials:
        env["NATS_CREDENTIALS_DIR"] = str(DATA / "nats-credentials")
    # The gateway's journal key (issue 29: only its own journal entries are replayed), made
    # once under .data like the dev JWT key; a key in the environment wins.
    if not env.get("LLM_GATEWAY_JOURNAL_KEY"):
        env["LLM_GATEWAY_JOURNAL_KEY_FILE"] = str(dev_journal_key(DATA / "dev-keys"))
    # The runner's state under .data too (root or not), so `make clean` takes it away.
    env.setdefault("RUNNER_STATE_DIR", str(kept / "runner"))
    demo_line = start_demo_stub(env, procs) if demo else ""
    if demo:
        # The demo's databases are its own: a reply a real model gave (kept for its request id's
        # repeats, within idempotency_ttl_s) is never answered as a demo one, nor a demo call
        # counted in the real ledger or reviews.
        env["QUIZ_DATA_DIR"] = str(kept)
    if asked and not demo:
        demo_line = "DEMO=1 ignored: ANTHROPIC_API_KEY is set, the gateway calls that provider."
    # lesson-fix verifies people with a siteverify secret; without one, development runs it
    # with verification off (the service says so in its log and in /readyz).
    verification_off = not env.get("LESSON_FIX_VERIFY_SECRET")
    if verification_off:
        env.setdefault("LESSON_FIX_VERIFY_DISABLED", "true")
    urls: dict[str, str] = {}

    def launch(i: int, port: int) -> subprocess.Popen[bytes]:
        svc = SERVICES[i]
        urls[svc.name] = f"http://127.0.0.1:{port}"
        child_env = {**env, "HTTP_PORT": str(port)}
        argv = [sys.executable, "-m", svc.module]
        return start(svc.name, argv, child_env, COLOURS[i])

    def publish_urls() -> None:
        """The URLs every tool beside us reads (without credentials: each tool adds its own
        user's password from .data/nats-credentials), our children for the next run."""
        bus = runinfo.without_credentials(nats_url)
        runinfo.write(DATA, runinfo.RunInfo(os.getpid(), {"nats": bus, **urls}))
        lock.record([os.getpid(), *(p.pid for _, p in procs)])

    for i, svc in enumerate(SERVICES):
        port, moved[svc.name] = choose_port(svc.port)
        procs.append((svc.name, launch(i, port)))
    publish_urls()

    try:
        pending = dict(urls)
        deadline = time.monotonic() + 120
        while pending and not stopping.is_set() and time.monotonic() < deadline:
            # A port seen free may be taken before the service binds it (another `make run`
            # or test starting on this machine at the same moment): that one moves again.
            for j, (name, p) in enumerate(procs):
                if p.poll() is not None and name in pending and lost_its_port(name):
                    i = [s.name for s in SERVICES].index(name)
                    old = urls[name].rpartition(":")[2]
                    TAILS[name].clear()
                    procs[j] = (name, launch(i, free_port()))
                    moved[name] = f"{old} was taken while it started"
                    pending[name] = urls[name]
                    publish_urls()
            if (why := exited(procs, started=False)) is not None:
                print(why, flush=True)
                return 1
            pending = {n: u for n, u in pending.items() if not is_ready(u)}
            stopping.wait(0.3)
        if stopping.is_set():
            return 0
        rows = [f"  {'service':<14} {'url':<26} ready"]
        for n, u in urls.items():
            why = f"  moved: {moved[n]}" if moved.get(n) else ""
            rows.append(f"  {n:<14} {u:<26} {'NO' if n in pending else 'yes'}{why}")
        nats_why = f"  (moved: {moved['nats']})" if moved.get("nats") else ""
        rows += [
            f"URLs in {runinfo.urls_path(DATA)}: `make -s url S=<service>` prints one "
            "(the documented commands read them)."
        ]
        print("\n".join(["", f"NATS: {nats_url}{nats_why}", *rows, ""]), flush=True)
        if credentials:
            print(
                "The bus is locked: each service connects as itself; the NATS URL above is the "
                "operators' (ops).\nOther users' passwords: .data/nats-credentials/<user>.password",
                flush=True,
            )
        if demo_line:
            print(demo_line, flush=True)
        notes = [
            "Mint a dev token:  make token SUB=teacher-1 GRANTS='question:42=contributor:mcq:7'",
            "          lessons: make token SUB=author-1 GRANTS='lessons=contributor'",
            "   review (owner): make token SUB=owner-1 GRANTS='pool:7=owner'",
        ]
        if env.get("LLM_DATA_RESIDENCY") == "local":
            where = env.get("OPENAI_COMPAT_BASE_URL") or "no server (OPENAI_COMPAT_BASE_URL unset)"
            notes.append(
                f"LLM_DATA_RESIDENCY=local: only the self-hosted server is called ({where});\n"
                "      a purpose on another provider's model answers llm_not_configured."
            )
        elif not env.get("ANTHROPIC_API_KEY"):
            notes.append(
                "Without ANTHROPIC_API_KEY the gateway answers llm_not_configured.\n"
                "      Set it for a model, or `make run DEMO=1` for canned replies without a key."
            )
        else:
            where = env.get("ANTHROPIC_BASE_URL") or "Anthropic's API"
            notes.append(f"The gateway calls models at {where} (ANTHROPIC_API_KEY is set).")
        if verification_off:
            notes.append("lesson-fix: human verification is OFF (LESSON_FIX_VERIFY_SECRET unset).")
        if demo:
            # The key is the demo's (the DEMO line above): no line about a provider's key holds.
            notes = [n for n in notes if "ANTHROPIC_API_KEY" not in n]
        print("\n".join([*notes, "Ctrl-C stops everything.", ""]), flush=True)
        while not stopping.is_set():
            if (why := exited(procs, started=True)) is not None:
                print(why, flush=True)
                return 1
            stopping.wait(0.5)
    finally:
        stop_all(procs)
        runinfo.remove(DATA, os.getpid())
        lock.record([])  # stopped cleanly: nothing for the next run to wait for
    return 0


if __name__ == "__main__":
    sys.exit(main())
