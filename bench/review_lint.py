"""The item-writing-flaw lint (issue 30): one mcq, and a pool of 1,000, against a baseline.

Run: `uv run --no-sync python bench/review_lint.py [--rounds 20] [--pool 1000]`.

What is timed is the service's own function, `quiz_review.domain.iwf.lint.lint_question` (the
body of `review.v1.lint` and of its HTTP route): the config validated as the platform's mcq,
read into words, the eleven criteria run, the wire reply built.

- one mcq: every item of the labelled set (`quiz_review/eval/iwf.json`, 180 mcq in four
  languages) linted `--rounds` times; per-call p50/p99 (target p50 ≤ 1 ms);
- a pool: `--pool` distinct mcq (the labelled items, each prompt and choice given a word of its
  own so no lemma is reused from the previous item) linted in one pass (target ≤ 1 s);
- baseline, in the same run on the same configs: validating the config alone
  (`read_draft("mcq", config)`, the pydantic model of the platform's schema) — what any
  handler of an mcq pays before it does anything. The ratio is what the lint costs on top of
  reading the question at all.
- the first call of a process loads the lemmatiser's dictionaries (printed apart: the service
  loads them at start-up, `warm()`).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from quiz_contracts.questions.registry import read_draft
from quiz_review.domain.iwf.lint import lint_question
from quiz_review.domain.iwf.text import warm
from quiz_review.eval.iwf import IwfItem, load_items


def per_call(fn: Callable[[IwfItem], object], items: list[IwfItem], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        for item in items:
            t = time.perf_counter()
            fn(item)
            times.append(time.perf_counter() - t)
    return times


def pool_of(items: list[IwfItem], size: int) -> list[IwfItem]:
    """`size` distinct mcq: the labelled ones, each text given a word of its own."""
    out = []
    for n in range(size):
        base = items[n % len(items)]
        config: dict[str, Any] = copy.deepcopy(base.config)
        config["prompt"] = f"{config['prompt']} (Q{n}x)"
        for i, choice in enumerate(config["choices"]):
            if not choice["text"][:1].isdigit():  # numbers stay numbers (criterion 16)
                choice["text"] = f"{choice['text']} w{n}c{i}"
        out.append(IwfItem(f"{base.id}#{n}", base.language, base.subject, base.flaws, config))
    return out


def timed(fn: Callable[[IwfItem], object], items: list[IwfItem]) -> tuple[float, float]:
    """(wall, CPU of this process) seconds for one pass; on a shared host the CPU time is the
    steadier figure (the wall clock counts the other processes' turns)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for item in items:
        fn(item)
    return time.perf_counter() - wall, time.process_time() - cpu


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--pool", type=int, default=1000)
    args = p.parse_args()
    items = load_items()

    t = time.perf_counter()
    warm()
    loaded = time.perf_counter() - t
    print(f"lemmatiser dictionaries (fr, en, de, it) loaded once per process: {ms(loaded)}")

    def lint(item: IwfItem) -> object:
        return lint_question("mcq", item.language, item.config)

    def validate(item: IwfItem) -> object:
        return read_draft("mcq", item.config)

    lint(items[0])  # lazily built word lists
    cpu = time.process_time()
    base = per_call(validate, items, args.rounds)
    base_cpu = time.process_time() - cpu
    cpu = time.process_time()
    lints = per_call(lint, items, args.rounds)
    lint_cpu = time.process_time() - cpu
    p50, b50 = statistics.median(lints), statistics.median(base)
    q, qb = statistics.quantiles(lints, n=100), statistics.quantiles(base, n=100)
    print(f"one mcq ({len(items)} items x {args.rounds} rounds = {len(lints)} calls)")
    print(f"  lint      p50 {ms(p50)}  p99 {ms(q[98])}  CPU/call {ms(lint_cpu / len(lints))}")
    print(f"  baseline  p50 {ms(b50)}  p99 {ms(qb[98])}  CPU/call {ms(base_cpu / len(base))}")
    print(f"  ratio lint / validation alone (p50): {p50 / b50:.1f}x  (target: lint p50 <= 1 ms)")

    pool = pool_of(items, args.pool)
    base_pool, base_pool_cpu = timed(validate, pool)
    lint_pool, lint_pool_cpu = timed(lint, pool)
    print(f"a pool of {len(pool)} distinct mcq, one pass")
    print(f"  lint      {ms(lint_pool)}  CPU {ms(lint_pool_cpu)}  (target <= 1 s)")
    print(f"  baseline  {ms(base_pool)}  CPU {ms(base_pool_cpu)}")
    print(f"  ratio (CPU): {lint_pool_cpu / base_pool_cpu:.1f}x")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
