"""Every command the README and docs/*.md mark runnable works as written (issue 22).

The runnable blocks carry an HTML comment just above their fence (invisible on GitHub):

    <!-- runnable -->                         run it; it must exit 0 and answer no error body
                                              (a line `{"code": ..., "message": ...}`)
    <!-- runnable: may answer no_fix, ... --> these `{"code": ...}` error codes are its honest
                                              outcome (a stub's reply may be refused)
    <!-- runnable: prints "TEXT" -->          its output must contain TEXT
    <!-- runnable: in another terminal -->    started aside before the blocks after it, stopped
                                              at the end of the document (a watcher)
    <!-- runnable: starts the system -->      the README's way to start everything

Fences are ```sh (bash) or ```python (run by the workspace's Python in the same session, so it
sees what the shell blocks exported). The blocks of one document run in order in one bash
session, in this checkout, with `set -euo pipefail`: a function or variable defined by one
block is there for the next, as in the terminal of a reader pasting them. The system is the
README's: the stub and `make run` started by that block's very lines, only the stub's port
swapped for a free one; its data dir is a temporary one (QUIZ_DATA_DIR, which `make url`,
`make token` and `make poll-demo` read too).

The default ports 8101…8106 are held, while free, by servers answering 401
`{"code": "unauthorized"}` (what a reader met when another program held a port): `make run`
moves every service, and a command that assumes a port instead of reading `make -s url` fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from quiz_testkit.nats_server import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKED = re.compile(
    r"^<!-- runnable(?::\s*(?P<options>.*?))?\s*-->\n"
    r"```(?P<lang>sh|bash|python)\n(?P<code>.*?)^```$",
    re.M | re.S,
)
DEFAULT_PORTS = range(8101, 8107)


@dataclass
class Block:
    document: Path
    line: int
    lang: str
    code: str
    may_answer: set[str] = field(default_factory=set)
    prints: list[str] = field(default_factory=list)
    aside: bool = False
    starts_system: bool = False

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def runnable_blocks(document: Path) -> list[Block]:
    """The marked blocks of one markdown file, in order."""
    text = document.read_text()
    blocks = []
    for m in MARKED.finditer(text):
        block = Block(document, text[: m.start()].count("\n") + 2, m["lang"], m["code"])
        for option in filter(None, (o.strip() for o in (m["options"] or "").split(";"))):
            if option.startswith("may answer "):
                block.may_answer |= {c.strip() for c in option[11:].split(",")}
            elif option.startswith("prints "):
                block.prints.append(json.loads(option[7:]))
            elif option == "in another terminal":
                block.aside = True
            elif option == "starts the system":
                block.starts_system = True
            else:
                raise AssertionError(f"{document.name}: unknown runnable option {option!r}")
        blocks.append(block)
    return blocks


ALL = {d: runnable_blocks(d) for d in DOCUMENTS}


def test_the_documents_mark_their_commands() -> None:
    """The blocks the issue names are marked (a block left unmarked is a block never run)."""
    counts = {d.name: len(b) for d, b in ALL.items() if b}
    for name in ("README.md", "lesson-fix.md", "review.md", "operations.md", "poll.md"):
        assert counts.get(name, 0) >= 1, counts
    starts = [b for blocks in ALL.values() for b in blocks if b.starts_system]
    assert len(starts) == 1 and starts[0].document.name == "README.md", starts
    # Nothing marked runnable assumes where a service listens.
    for blocks in ALL.values():
        for b in blocks:
            if not b.starts_system:
                assert not re.search(r"127\.0\.0\.1:81\d\d|localhost:81\d\d", b.code), b.where


class Impostor(BaseHTTPRequestHandler):
    """What holds a default port: another program, answering 401 to anything."""

    def _answer(self) -> None:
        body = b'{"code": "unauthorized", "message": "not the service you meant"}'
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *_: object) -> None:
        pass


@contextlib.contextmanager
def impostors_on_default_ports() -> Iterator[list[int]]:
    servers = []
    for port in DEFAULT_PORTS:
        with contextlib.suppress(OSError):
            servers.append(ThreadingHTTPServer(("127.0.0.1", port), Impostor))
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    try:
        yield [s.server_address[1] for s in servers]
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()


@dataclass
class Running:
    data: Path
    env: dict[str, str]
    log: Path


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """The README's start block, as written but for the stub's port, in a fresh data dir."""
    (start,) = [b for b in ALL[ROOT / "README.md"] if b.starts_system]
    port = free_port()
    code = re.sub(r"(--port |127\.0\.0\.1:)8199\b", rf"\g<1>{port}", start.code)
    assert code != start.code, "the start block names the stub's port 8199"
    data = tmp_path_factory.mktemp("documented")
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "ANTHROPIC_API_KEY")}
    env["QUIZ_DATA_DIR"] = str(data)
    log = data / "system.log"
    with impostors_on_default_ports(), log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", code],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 180
            while "Ctrl-C stops everything" not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the README's start block did not start:\n{log.read_text()}")
                time.sleep(0.5)
            yield Running(data, env, log)
        finally:
            # Ctrl-C in that terminal: make run and the stub (a job of the same shell).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for pid in _stub_pids(port):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)


def _stub_pids(port: int) -> list[int]:
    """The stub started in the background of the start block (it has its own process group
    only if the shell gave it one; a Ctrl-C to the shell's group reaches it either way)."""
    import psutil

    return [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if "quiz_testkit.anthropic_stub" in " ".join(p.info["cmdline"] or [])
        and str(port) in " ".join(p.info["cmdline"] or [])
    ]


def test_the_start_block_says_a_key_is_set_and_why_ports_moved(system: Running) -> None:
    """With a key, no "Without ANTHROPIC_API_KEY" line; every port held is named as moved."""
    log = system.log.read_text(errors="replace")
    assert "Without ANTHROPIC_API_KEY" not in log
    assert "The gateway calls models at http://127.0.0.1:" in log
    rows = re.findall(r"^  (\S+)\s+http://127\.0\.0\.1:(\d+)\s+yes(.*)$", log, re.M)
    assert len(rows) == 6, log[-3000:]
    for name, port, note in rows:
        if int(port) not in DEFAULT_PORTS:
            assert re.search(r"moved: 81\d\d is in use by ", note), (name, note)


DOCUMENTED = [d for d, blocks in ALL.items() if any(not b.starts_system for b in blocks)]


@pytest.mark.parametrize("document", DOCUMENTED, ids=[d.name for d in DOCUMENTED])
def test_documented_commands_work_as_written(document: Path, system: Running) -> None:
    blocks = [b for b in ALL[document] if not b.starts_system]
    work = system.data / f"doc-{document.stem}"
    work.mkdir(exist_ok=True)
    script = ["set -euo pipefail"]
    for i, b in enumerate(blocks):
        body = work / f"block{i}.{'py' if b.lang == 'python' else 'sh'}"
        body.write_text(b.code)
        run = (
            f"uv run --no-sync python {shlex.quote(str(body))}"
            if b.lang == "python"
            else f"source {shlex.quote(str(body))}"
        )
        if b.aside:
            run = (
                f"setsid bash -c {shlex.quote(run.replace('source ', 'bash ', 1))} "
                f"> {work}/aside{i}.out 2>&1 < /dev/null & echo $! >> {work}/aside.pids"
            )
        script += [f"printf '\\n@@block {i}@@\\n'", run]
    proc = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=ROOT,
        env=system.env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    outputs = dict.fromkeys(range(len(blocks)), "")
    pieces = re.split(r"\n@@block (\d+)@@\n", "\n" + proc.stdout)
    for n, text in zip(pieces[1::2], pieces[2::2], strict=True):
        outputs[int(n)] = text
    last = max((int(n) for n in pieces[1::2]), default=-1)
    try:
        assert proc.returncode == 0, (
            f"{blocks[last].where if last >= 0 else document.name} failed "
            f"({proc.returncode}):\n{outputs.get(last, '')[-3000:]}\n{proc.stderr[-3000:]}"
        )
        for i, b in enumerate(blocks):
            if b.aside:
                outputs[i] = _aside_output(work / f"aside{i}.out", b.prints)
            check(b, outputs[i])
    finally:
        pids = work / "aside.pids"
        for pid in pids.read_text().split() if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pid), signal.SIGTERM)


def _aside_output(path: Path, wanted: list[str], timeout_s: float = 60) -> str:
    """What a block started aside printed, once it printed what it should (or timed out)."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = path.read_text(errors="replace") if path.exists() else ""
        if all(w in text for w in wanted) or time.monotonic() > deadline:
            return text
        time.sleep(0.5)


def error_codes(output: str) -> set[str]:
    """The codes of the error bodies in an output: each line that is a JSON `{code, message}`
    (an HTTP error reply) or carries one as `error` (an event's outcome). What a reply reports
    inside itself (the wand's `incomplete`, a finding's code) is its content, not an error."""
    codes = set()
    for line in output.splitlines():
        try:
            body = json.loads(line)
        except ValueError:
            continue
        if isinstance(body, dict):
            for err in (body, body.get("error")):
                if isinstance(err, dict) and "code" in err and "message" in err:
                    codes.add(str(err["code"]))
    return codes


def check(block: Block, output: str) -> None:
    codes = error_codes(output)
    unexpected = codes - block.may_answer
    assert not unexpected, f"{block.where} answered {sorted(unexpected)}:\n{output[-3000:]}"
    for text in block.prints:
        assert text in output, f"{block.where} did not print {text!r}:\n{output[-3000:]}"
