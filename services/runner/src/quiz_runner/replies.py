"""A reply that always fits in one NATS message: room reserved up front, outputs cut to fit.

The script, for a request of N cases (quiz_contracts.runner, "Sizes on the bus"):

1. Before anything runs, reserve the reply's skeleton, the compile output at its worst, the
   picture at its worst and, for every case, its result with empty outputs. More than
   `limit` → `limit_exceeded` (nothing was spent).
2. Once compiled, the compile result replaces its reservation.
3. Each case, as it comes back, takes what is left after the reservations of the cases still to
   come. A result that does not fit keeps the longest prefixes of its stdout, then its stderr,
   that do (`reply_cut`); its status always fits, being reserved.
4. The picture, once drawn, replaces its reservation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.pictures import chars_per_pixel
from quiz_contracts.runner import (
    CaseResult,
    CompileResult,
    Picture,
    PictureSpec,
    RunLimits,
    RunReply,
    text_and_b64,
)

# A case result whose every field is at its widest, outputs aside.
_WIDEST_STATUS = {
    "exit_code": -(2**31),
    "signal": "SIG" + "X" * 13,
    "cpu_ms": 10**12,
    "wall_ms": 10**12,
    "timed_out": "wall",
    "output_truncated": True,
    "memory_exceeded": True,
    "reply_cut": True,
}


def wire_size(model: CaseResult | CompileResult | Picture | RunReply) -> int:
    """Bytes of the model as the reply carries it (pydantic's JSON, as the endpoint sends)."""
    return len(model.model_dump_json())


def empty_case_size(name: str) -> int:
    """The most a case's result takes with empty outputs."""
    return wire_size(CaseResult(name=name, **_WIDEST_STATUS))


def output_bound(output_bytes: int) -> int:
    """The most `output_bytes` of program output take on the wire, escaped text plus base64.

    Each byte that is not UTF-8 is written `\\xNN` (5 bytes once JSON escapes the backslash)
    and the base64 of the whole adds 4 bytes per 3; a valid control character takes at most
    6 (`\\u0001`). 7 bytes a byte covers both.
    """
    return 7 * output_bytes + 64


def picture_bound(spec: PictureSpec) -> int:
    """The most the picture of `spec` takes on the wire: its compact pixel string (one or two
    ASCII characters a pixel, quiz_contracts.pictures) plus the Picture's other fields, of which
    the error message is the longest (bounded below 1 KiB)."""
    return spec.width * spec.height * chars_per_pixel(spec.palette) + 2048


class ReplyBudget:
    """The bytes a reply may still take, per the module docstring."""

    def __init__(
        self,
        limit: int,
        *,
        language: str,
        backend: str,
        case_names: Sequence[str],
        compile_output_bytes: int,
        picture: PictureSpec | None,
        limits: RunLimits | None = None,
    ) -> None:
        skeleton = RunReply(
            language=language, compile=CompileResult(ok=True), backend=backend, limits=limits
        )
        self.limit = limit
        self.used = wire_size(skeleton) - wire_size(CompileResult(ok=True))
        self.compile_reserved = wire_size(
            CompileResult(
                ok=False, output_b64="", output_truncated=True, timed_out=True, wall_ms=10**12
            )
        ) + output_bound(compile_output_bytes)
        self.picture_reserved = picture_bound(picture) if picture is not None else 0
        self.case_reserved = [empty_case_size(name) + 1 for name in case_names]  # +1: a comma
        self.next_case = 0
        reserved = self.used + self.compile_reserved + self.picture_reserved
        reserved += sum(self.case_reserved)
        if reserved > limit:
            what = f"{len(case_names)} cases"
            if picture is not None:
                what += f" and a {picture.width}x{picture.height} picture"
            raise ContractError(
                ErrorCode.limit_exceeded,
                f"the reply to {what} takes at least {reserved} bytes; one message carries at "
                f"most {limit} (MAX_REPLY_BYTES)",
            )

    @property
    def room(self) -> int:
        """What the next case may take: the limit less what is used and still reserved."""
        left = self.limit - self.used - self.compile_reserved - self.picture_reserved
        return left - sum(self.case_reserved[self.next_case + 1 :])

    def compiled(self, result: CompileResult) -> None:
        """The compile result takes the place of its reservation."""
        self.used += wire_size(result)
        self.compile_reserved = 0

    def drawn(self, picture: Picture) -> None:
        """The picture takes the place of its reservation."""
        self.used += wire_size(picture) - len("null")
        self.picture_reserved = 0

    def fit(self, result: CaseResult) -> CaseResult:
        """The next case's result, its outputs cut to the room left if they do not fit."""
        room = self.room - 1  # the comma before it
        if wire_size(result) > room:
            result = cut_outputs(result, room)
        self.used += wire_size(result) + 1
        self.next_case += 1
        return result


def _streams(stdout: bytes, stderr: bytes) -> dict[str, object]:
    out, out_b64 = text_and_b64(stdout)
    err, err_b64 = text_and_b64(stderr)
    return {"stdout": out, "stdout_b64": out_b64, "stderr": err, "stderr_b64": err_b64}


def cut_outputs(result: CaseResult, room: int) -> CaseResult:
    """`result` with the longest prefixes of stdout, then stderr, that fit in `room` bytes."""
    stdout, stderr = result.stdout_bytes(), result.stderr_bytes()

    def sized(out: bytes, err: bytes) -> CaseResult:
        return result.model_copy(update={**_streams(out, err), "reply_cut": True})

    keep_out = _longest_prefix(stdout, lambda k: wire_size(sized(stdout[:k], b"")) <= room)
    kept = stdout[:keep_out]
    keep_err = _longest_prefix(stderr, lambda k: wire_size(sized(kept, stderr[:k])) <= room)
    return sized(kept, stderr[:keep_err])


def _longest_prefix(data: bytes, fits: Callable[[int], bool]) -> int:
    """The largest k with fits(k); text is cut between characters so that it stays text."""
    low, high = 0, len(data)
    while low < high:  # the wire size grows with the prefix: bisect
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return low
    while low > 0 and (data[low] & 0xC0 if low < len(data) else 0) == 0x80:
        low -= 1  # a continuation byte: back to the start of its character
    return low
