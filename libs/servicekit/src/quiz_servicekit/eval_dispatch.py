"""`quiz-eval <name> [args]`: the evaluation harnesses of the services, one command.

Each service registers its harness in the `quiz_eval` entry-point group (`lesson-fix`,
`review`, …) as a `main(argv) -> int`; this dispatcher finds it by name and passes the rest of
the command line on. `quiz-eval` alone lists them. What the harnesses share is here once: their
options (`harness_parser`), their gateway client (`harness_gateway`) and the flow of their
`main` (`run_harness`: choose the cases, evaluate, print, exit status).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from importlib.metadata import entry_points
from typing import Any, TypeVar

import nats

from quiz_contracts.errors import NO_MODEL_HINT, ContractError, ErrorCode
from quiz_contracts.llm import Purpose
from quiz_servicekit.llm import LlmClient
from quiz_servicekit.natsio import inbox_prefix_for, nats_servers

GROUP = "quiz_eval"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness named by the first argument; exit status is the harness's."""
    args = list(sys.argv[1:] if argv is None else argv)
    harnesses = {e.name: e for e in entry_points(group=GROUP)}
    if not args or args[0] in ("-h", "--help"):
        print("usage: quiz-eval <harness> [options]   (quiz-eval <harness> --help)")
        print("harnesses: " + (", ".join(sorted(harnesses)) or "none installed"))
        return 0 if args else 2
    name, rest = args[0], args[1:]
    entry = harnesses.get(name)
    if entry is None:
        print(
            f"quiz-eval: no harness {name!r} (have: {', '.join(sorted(harnesses))})",
            file=sys.stderr,
        )
        return 2
    return int(entry.load()(rest) or 0)


# What a harness reports as "could not run" (exit 2) rather than as a crash.
HARNESS_ERRORS = (ContractError, OSError, nats.errors.Error)
Case = TypeVar("Case")
Result = TypeVar("Result")


def run_harness(
    prog: str,
    cases: Sequence[Case],
    *,
    key: Callable[[Case], str],
    noun: str,
    only: Sequence[str] | None,
    keep: Callable[[Case], bool] | None = None,
    evaluate: Callable[[list[Case]], Coroutine[Any, Any, Result]],
    as_json: Callable[[Result], object] | None,
    report: Callable[[Result], str],
    status: Callable[[Result], int],
) -> int:
    """A harness's `main` once its options are parsed: the flow every harness shares.

    `cases` narrowed to the `key`s in `only` (the repeatable `--case`/`--question`; a key no
    case has: exit 2, naming it as an unknown `noun`) and to those `keep` keeps
    (`--language`); `evaluate` run on them (a HARNESS_ERRORS: exit 2, the reason on stderr
    after `prog`); the result printed as JSON when `as_json` is given (`--json`), else as
    `report`; then `status(result)`, the harness's exit status (0, 1 under its threshold, 2
    when nothing could be measured).
    """
    chosen = list(cases)
    if only:
        unknown = set(only) - {key(c) for c in chosen}
        if unknown:
            print(f"unknown {noun}(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        chosen = [c for c in chosen if key(c) in only]
    if keep is not None:
        chosen = [c for c in chosen if keep(c)]
    try:
        result = asyncio.run(evaluate(chosen))
    except HARNESS_ERRORS as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    if as_json is not None:
        print(json.dumps(as_json(result), ensure_ascii=False, indent=1))
    else:
        print(report(result))
    return status(result)


def harness_parser(
    prog: str,
    description: str,
    *,
    unit: str,
    deadline_s: float,
) -> argparse.ArgumentParser:
    """The options every harness takes: --nats-url, --user, --concurrency (`unit`s at once),
    --deadline-s (each model call's, default `deadline_s`) and --json. A harness adds its own."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument(
        "--nats-url",
        default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"),
        help="the bus of a running llm-gateway (default: $NATS_URL or nats://127.0.0.1:4222)",
    )
    p.add_argument("--user", default="quiz-eval", help="the person the calls are made for")
    p.add_argument("--concurrency", type=int, default=4, help=f"{unit} at once")
    p.add_argument(
        "--deadline-s", type=float, default=deadline_s, help="each model call's deadline"
    )
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    return p


async def _quiet(_: Exception) -> None:
    """nats-py reports each failed connection attempt; the command reports the outcome once."""


@asynccontextmanager
async def harness_gateway(nats_url: str, name: str, purpose: Purpose) -> AsyncIterator[LlmClient]:
    """The gateway client a harness calls through, once a model can be called for `purpose`.

    Connects as `name` to `nats_url` (credentials in the URL on the locked bus) and fails fast
    when the bus is not there (nats-py would otherwise retry for two minutes). Raises
    ContractError with the gateway's reason (`llm_not_configured`, `llm_budget_exhausted`,
    `llm_failed`) when `llm.v1.availability` says no model can be called. Drains on exit.
    """
    nc = await nats.connect(
        servers=nats_servers(nats_url),
        name=name,
        connect_timeout=5,
        max_reconnect_attempts=2,
        reconnect_time_wait=0.5,
        error_cb=_quiet,
        inbox_prefix=inbox_prefix_for(nats_url),
    )
    try:
        llm = LlmClient(nc)
        availability = await llm.availability(purpose)
        if not availability.available:
            reason = availability.reason.value if availability.reason else "unavailable"
            # Without a key the way out is the key or the demo; a spent cap or an open circuit
            # is waited out (the reason says which).
            hint = f": {NO_MODEL_HINT}" if reason == ErrorCode.llm_not_configured else ""
            raise ContractError(
                availability.reason or ErrorCode.llm_failed,
                f"no model can be called for {purpose.value} ({reason}){hint}",
            )
        yield llm
    finally:
        await nc.drain()


if __name__ == "__main__":
    sys.exit(main())
