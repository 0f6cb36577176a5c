"""runner.v1.run: run a reference program on test cases in a sandbox (ADR-059 settle).

The micro service `runner` answers `runner.v1.run` with a `RunReply`. Compilation happens once
per request; every case then runs in a fresh sandbox. A program that does not compile is a reply
state (`compile.ok == false`, no case results), not an error. Errors on the wire:

- `runner_busy` (with `retry_after_s`): every slot is taken; nothing is queued.
- `limit_exceeded`: a limit, the stdin, the argv, the files or the number of cases is over its
  hard maximum (`RUN_LIMIT_MAXIMA`, `MAX_*` below), `memory_mb` is under the language's floor
  (`MEMORY_FLOOR_MB`), or the request or its reply cannot fit in one NATS message; the message
  names the limit.
- `unsupported_language`: a language this runner does not offer.
- `invalid_request`: a malformed request (bad file path, no file).

Callers map NATS "no responders" to `runner_unavailable`.

Sizes on the bus. A request and its reply each travel as one NATS message, so both are bounded
by the `max_payload` our NATS configurations set (`subjects.NATS_MAX_PAYLOAD`, 8 MiB) less room
for headers: `MAX_REQUEST_BYTES` and `MAX_REPLY_BYTES`. The maxima below are chosen so that
every one of them can be reached, all at once, in one message each way:

- the request: 32 files of at most 256 KiB each, together at most `MAX_FILES_WIRE_BYTES`
  (3 MiB) as they travel (each `RunFile` JSON-encoded: base64 takes 4 bytes per 3, text 1 a
  byte for printable ASCII and up to 6 for a control character); 100 cases of at most 256 KiB
  of stdin and 16 KiB of args each, together at most `MAX_CASES_WIRE_BYTES` (4.5 MiB) as they
  travel; the whole request at most `MAX_REQUEST_BYTES`.
- the reply: stdout and stderr of each case at most `output_bytes` (≤ 512 KiB), and all of them
  together at most `MAX_OUTPUT_TOTAL_BYTES` (1 MiB): 2 × output_bytes × cases ≤ 1 MiB, so
  `max_output_bytes(cases)` is the largest `output_bytes` a request of that many cases may ask.
  Output travels as escaped text plus base64 at worst 7 bytes a byte: 1 MiB of the worst
  output, beside the compile output, the statuses of 100 cases and a 128 × 128 picture, fits in
  `MAX_REPLY_BYTES`. So within the maxima every output comes back whole (`reply_cut` stays
  false); the cut is the backstop of a runner whose NATS takes smaller messages.

Over any → `limit_exceeded` naming it, before anything runs. Why not out of band (a JetStream
object store): every caller would fetch and reassemble, and the store would hold copies of
teachers' code and outputs; settle needs expected outputs a student's program is compared with,
which these maxima carry (30 cases, the platform's most, get 17 KiB of each stream).

Bytes on the wire. Program output is bytes; the reply carries it as text plus, only when the
bytes are not valid UTF-8, their exact base64: `stdout` is the output decoded as UTF-8 with every
invalid byte written as `\\xNN` (readable, for display) and `stdout_b64` holds the exact bytes
(lossless). `stdout_b64 is None` means `stdout` is exactly the UTF-8 decoding. The same holds for
`stderr`/`stderr_b64` and for `CompileResult.output`/`output_b64`. `CaseResult.stdout_bytes()`
returns the exact bytes either way.

Picture protocol (codeimage, heig-quiz `packages/qt-code/src/image/pixels.ts`). With `picture`
set, the program prints the picture as `width × height` integers separated by any ASCII
whitespace, row by row from the top left, in the palette `palette` (bw: 0 black, 1 white;
color16: 0–15; gray256: 0–255). It prints them on stdout (`source="stdout"`, the default) or
into the file `path` of its work directory (`source="file"`; a regular file only, never a
symlink). The runner reads the first width × height tokens: a token that is not an integer of
the palette's range (`+1`, `007` are integers; `1.0`, `a`, `256` in gray256 are not) is an
*invalid* pixel; pixels the output never reached are *missing*; tokens after the last pixel are
ignored and counted as *extra*. The reply's `Picture` is the platform's target shape
`{width, height, palette, pixels}` — `pixels` in the compact encoding of
`quiz_contracts.pictures`, `x` (`xx` in gray256) where a pixel is invalid or missing — plus
`missing_pixels`, `invalid_pixels` and `extra_tokens`. Settle makes it the target only when no
pixel is missing or invalid. The picture is the one the FIRST case draws (with no case given,
the runner runs one case named `image` with empty stdin) and comes back as `RunReply.picture`;
in stdout mode that case's `stdout` is left empty (the picture is the output) to keep replies
small, and its picture is None only when the case produced no output at all
(`missing_pixels` = width × height says the same).
"""

from __future__ import annotations

import base64
from enum import StrEnum
from typing import Literal

from pydantic import Field

from quiz_contracts.base import WireModel
from quiz_contracts.pictures import IMAGE_MAX_SIDE, Palette
from quiz_contracts.subjects import NATS_MAX_PAYLOAD


class RunLanguage(StrEnum):
    """Languages the runner offers (a given host may offer fewer: `unsupported_language`)."""

    python = "python"  # Python 3
    c = "c"  # C (gcc, -O2, C17)
    cpp = "cpp"  # C++ (g++, -O2, C++17)
    javascript = "javascript"  # Node.js
    java = "java"  # Java 17; runs the one class that declares `public static void main`


# Hard maxima of the parts of a request that are not limits: over any → `limit_exceeded`.
MAX_CASES = 100
MAX_FILES = 32
MAX_FILE_BYTES_IN = 256 * 1024  # one source or extra file, decoded
MAX_STDIN_BYTES = 256 * 1024  # per case
MAX_ARGS = 64
MAX_ARGV_BYTES = 16 * 1024  # sum of the UTF-8 lengths of one case's args
# Together, as they travel (the sum of each RunFile's / RunCase's JSON): what one message holds.
MAX_FILES_WIRE_BYTES = 3 * 1024 * 1024
MAX_CASES_WIRE_BYTES = 4 * 1024 * 1024 + 512 * 1024
# Program output one reply carries whole, whatever its bytes: stdout and stderr of every case.
MAX_OUTPUT_TOTAL_BYTES = 1024 * 1024

# Headers (trace context, error codes) and framing travel in the same NATS message.
MESSAGE_HEADROOM = 64 * 1024
MAX_REQUEST_BYTES = NATS_MAX_PAYLOAD - MESSAGE_HEADROOM  # a RunRequest, JSON-encoded
MAX_REPLY_BYTES = NATS_MAX_PAYLOAD - MESSAGE_HEADROOM  # a RunReply, JSON-encoded

# The smallest `memory_mb` each language runs a program in (a smaller one → limit_exceeded):
# its runtime's own start-up (interpreter, JVM, V8 heap) plus room for a small program.
MEMORY_FLOOR_MB: dict[str, int] = {
    "c": 8,
    "cpp": 8,
    "python": 8,
    "javascript": 16,
    "java": 16,
}


class RunFile(WireModel):
    """One file of the job, placed in the program's work directory (read-only there)."""

    path: str = Field(
        description="Relative path: letters, digits, '._-' and '/' only; no '..', no leading '/'."
    )
    content: str = Field(default="", description="UTF-8 text, or base64 when encoding=base64.")
    encoding: Literal["utf-8", "base64"] = "utf-8"

    def content_bytes(self) -> bytes:
        """The exact bytes of the file."""
        if self.encoding == "base64":
            return base64.b64decode(self.content, validate=True)
        return self.content.encode("utf-8")


class RunCase(WireModel):
    """One execution of the program: its stdin and its command-line arguments."""

    name: str = Field(min_length=1, max_length=200)
    stdin: str = ""
    args: list[str] = Field(default_factory=list)


class RunLimits(WireModel):
    """Per-case limits (compile has its own fixed ones). Over `RUN_LIMIT_MAXIMA` → refused."""

    cpu_s: float = Field(
        default=2.0,
        gt=0,
        description="CPU seconds of the program (its threads and the children it waited for), "
        "to the millisecond; more ends the case as timed_out='cpu'.",
    )
    wall_s: float = Field(default=5.0, gt=0, description="Wall clock of the whole case.")
    memory_mb: int = Field(
        default=256,
        gt=0,
        description="Memory of the program, MiB: its address space (C, C++, Python) or its "
        "runtime's heap (Java -Xmx, V8 heap); at least MEMORY_FLOOR_MB of the language.",
    )
    processes: int = Field(default=16, gt=0, description="Processes and threads at once.")
    output_bytes: int | None = Field(
        default=None,
        gt=0,
        description="stdout and stderr, each; more is cut (output_truncated). With the other "
        "cases: 2 × output_bytes × cases ≤ MAX_OUTPUT_TOTAL_BYTES (max_output_bytes). Not "
        "given (null): 64 KiB, or the most that fits for the request's cases when that is "
        "less (default_output_bytes); the reply's `limits` says what was applied.",
    )
    file_bytes: int = Field(
        default=1024 * 1024, gt=0, description="Largest file written; also bounds the work dir."
    )

    def over_maxima(self) -> list[str]:
        """Names of the limits above `RUN_LIMIT_MAXIMA`, empty when the request may run."""
        return [
            name
            for name in type(self).model_fields
            if (value := getattr(self, name)) is not None
            and value > getattr(RUN_LIMIT_MAXIMA, name)
        ]

    def output_bytes_for(self, cases: int) -> int:
        """The `output_bytes` a request of `cases` cases runs with: the one asked, else
        `default_output_bytes(cases)`."""
        return self.output_bytes if self.output_bytes is not None else default_output_bytes(cases)

    def applied(self, cases: int) -> RunLimits:
        """These limits as a request of `cases` cases runs them: `output_bytes` filled in."""
        return self.model_copy(update={"output_bytes": self.output_bytes_for(cases)})


# Hard maxima: a request asking more is refused with `limit_exceeded`, never clamped silently.
RUN_LIMIT_MAXIMA = RunLimits(
    cpu_s=10.0,
    wall_s=20.0,
    memory_mb=1024,
    processes=64,
    output_bytes=512 * 1024,  # one case's two streams: MAX_OUTPUT_TOTAL_BYTES
    file_bytes=16 * 1024 * 1024,
)
MAX_OUTPUT_BYTES = 512 * 1024  # RUN_LIMIT_MAXIMA.output_bytes, typed
# `output_bytes` when a request names none and its cases leave room for it (issue 34 item 7).
DEFAULT_OUTPUT_BYTES = 64 * 1024


def max_output_bytes(cases: int) -> int:
    """The largest `output_bytes` a request of `cases` cases may ask (bytes, per stream).

    Every case may print `output_bytes` on stdout and on stderr, and one reply carries
    `MAX_OUTPUT_TOTAL_BYTES` of output whole: min(512 KiB, 1 MiB // (2 × cases)); 5,242 at
    100 cases, 17,476 at 30, 26,214 at 20. A request of no case counts as one (a picture's).
    """
    return min(MAX_OUTPUT_BYTES, MAX_OUTPUT_TOTAL_BYTES // (2 * max(1, cases)))


def default_output_bytes(cases: int) -> int:
    """`output_bytes` of a request of `cases` cases that names none (bytes, per stream).

    `DEFAULT_OUTPUT_BYTES` (64 KiB) up to 8 cases, then `max_output_bytes(cases)`: the most that
    fits in one reply, so a request without limits runs at every allowed case count (before,
    64 KiB was refused `limit_exceeded` from 9 cases on). 58,254 at 9, 5,242 at 100.
    """
    return min(DEFAULT_OUTPUT_BYTES, max_output_bytes(cases))


class PictureSpec(WireModel):
    """Ask for the picture the program draws (codeimage); protocol in the module docstring."""

    width: int = Field(ge=1, le=IMAGE_MAX_SIDE)
    height: int = Field(ge=1, le=IMAGE_MAX_SIDE)
    palette: Palette = Field(description="bw (0–1), color16 (0–15) or gray256 (0–255).")
    source: Literal["stdout", "file"] = "stdout"
    path: str = Field(default="picture.txt", description="With source=file: relative path.")


class RunRequest(WireModel):
    """Compile once, then run every case (subject `runner.v1.run`)."""

    language: str = Field(description="One of RunLanguage; others → unsupported_language.")
    files: list[RunFile] = Field(min_length=1, description="The source(s) plus extra files.")
    entry: str | None = Field(
        default=None,
        description="Path of the main source among files; default: the first file.",
    )
    cases: list[RunCase] = Field(default_factory=list)
    limits: RunLimits = Field(default_factory=RunLimits)
    picture: PictureSpec | None = None


class CompileResult(WireModel):
    """Outcome of the compile step (interpreted languages: ok, a syntax check where cheap)."""

    ok: bool
    output: str = Field(default="", description="Compiler messages, bounded, escaped.")
    output_b64: str | None = None
    output_truncated: bool = False
    timed_out: bool = False
    wall_ms: int = 0


class Picture(WireModel):
    """The picture a case drew, read against the expected size: the platform's target shape."""

    width: int
    height: int
    palette: Palette
    pixels: str = Field(
        description="Compact encoding (quiz_contracts.pictures): one hex digit a pixel, two in "
        "gray256; x (xx) where a pixel is invalid or missing."
    )
    missing_pixels: int = Field(default=0, description="Pixels the output never reached.")
    invalid_pixels: int = Field(default=0, description="Tokens that are not a palette value.")
    extra_tokens: int = Field(default=0, description="Tokens after the last pixel, ignored.")
    error: str | None = Field(default=None, description="Why pixels are missing or invalid.")

    @property
    def complete(self) -> bool:
        """Every pixel holds a value of the palette: the picture can be a target."""
        return self.missing_pixels == 0 and self.invalid_pixels == 0


class CaseResult(WireModel):
    """What one case did."""

    name: str
    stdout: str = ""
    stdout_b64: str | None = None
    stderr: str = ""
    stderr_b64: str | None = None
    exit_code: int | None = Field(default=None, description="None when killed by a signal.")
    signal: str | None = Field(default=None, description='e.g. "SIGKILL", "SIGSEGV".')
    cpu_ms: int = 0
    wall_ms: int = 0
    timed_out: Literal["cpu", "wall"] | None = None
    output_truncated: bool = False
    memory_exceeded: bool = Field(
        default=False, description="The memory limit stopped the program (it did not succeed)."
    )
    reply_cut: bool = Field(
        default=False,
        description="stdout/stderr cut to keep the reply within MAX_REPLY_BYTES; the program "
        "was not stopped.",
    )

    def stdout_bytes(self) -> bytes:
        """The exact bytes the program wrote to stdout (up to the output limit)."""
        if self.stdout_b64 is not None:
            return base64.b64decode(self.stdout_b64)
        return self.stdout.encode("utf-8")

    def stderr_bytes(self) -> bytes:
        """The exact bytes the program wrote to stderr (up to the output limit)."""
        if self.stderr_b64 is not None:
            return base64.b64decode(self.stderr_b64)
        return self.stderr.encode("utf-8")

    @property
    def completed(self) -> bool:
        """Ran to its own end and came back whole: no timeout, no cut, no memory limit hit."""
        return (
            self.timed_out is None
            and not self.output_truncated
            and not self.memory_exceeded
            and not self.reply_cut
        )


class RunReply(WireModel):
    """Reply of `runner.v1.run`: the compile step, then one result per case, in order."""

    language: str
    compile: CompileResult
    cases: list[CaseResult] = Field(default_factory=list)
    picture: Picture | None = Field(
        default=None, description="With a picture spec: what the first case drew."
    )
    backend: str = Field(default="", description="bwrap or docker: which sandbox ran it.")
    limits: RunLimits | None = Field(
        default=None,
        description="The limits every case ran under: the request's, `output_bytes` filled in "
        "when it named none (default_output_bytes). Added in v1; None from older runners.",
    )


def text_and_b64(data: bytes) -> tuple[str, str | None]:
    """Wire form of output bytes: readable text, plus exact base64 when not valid UTF-8."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="backslashreplace"), base64.b64encode(data).decode()


class SlotsReply(WireModel):
    """`GET /slots` on the runner (operators, the `ops` grant): its slots and its sandbox now.

    v1 of the runner's HTTP contract, as `runner.v1.run`: fields are only ever added.
    """

    total: int = Field(description="Slots (RUNNER_SLOTS): requests run at once, at most.")
    busy: int = Field(description="Slots running a request now.")
    free: int = Field(description="total - busy: a request more is answered runner_busy at 0.")
    refused: int = Field(description="Requests answered runner_busy since the process started.")
    backend: str = Field(description="bwrap or docker: the sandbox the runner runs.")
    sandbox_ready: bool = Field(description="Whether the sandbox can start a job now.")
    sandbox_detail: str = Field(description="Why it cannot, or what it runs on (free text).")
    languages: list[RunLanguage] = Field(description="The languages this runner offers.")
