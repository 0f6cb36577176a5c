"""`make ts` and `make ts-check`: how long the TypeScript types take (issue 33: `make ts` < 30 s).

Run: `uv run python bench/contracts_ts.py [--runs 3]` (needs node and npm; node_modules is
installed from the lockfile first when missing, and that install is not timed).

Each run, in this process where it can be: the baseline, `make docs`'s rendering of
docs/asyncapi.json (the same contracts' JSON Schemas, in Python alone); the bundle of
`quiz_contracts.typescript` (every shape in its role); json-schema-to-typescript on it
(`node libs/contracts/ts/scripts/generate.mjs`, a process); the whole of `make ts` into a
temporary directory (scripts/gen_ts.py `generate`); and `make ts-check` (generation, the stale
comparison, one tsc --strict pass). Prints the median seconds of `--runs` runs and each one's
ratio to the baseline.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from quiz_contracts.typescript import typescript_bundle

ROOT = Path(__file__).resolve().parent.parent


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(step: Callable[[], Any]) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    gen_ts, gen_asyncapi = load("gen_ts"), load("gen_asyncapi")
    if gen_ts.node_tools():
        print(gen_ts.node_tools(), file=sys.stderr)
        return 3
    gen_ts.ensure_node_modules()
    bundle_text = json.dumps(typescript_bundle(), ensure_ascii=False)
    compile_cmd = ["node", str(gen_ts.PACKAGE / "scripts" / "generate.mjs")]

    def compile_only() -> None:
        subprocess.run(compile_cmd, input=bundle_text, capture_output=True, text=True, check=True)

    def make_ts() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            gen_ts.generate(Path(tmp))

    def make_ts_check() -> None:
        if gen_ts.check() != 0:
            raise SystemExit("make ts-check fails: run make ts first")

    steps: dict[str, Callable[[], Any]] = {
        "baseline: docs/asyncapi.json (Python)": gen_asyncapi.render,
        "bundle (quiz_contracts.typescript)": typescript_bundle,
        "json-schema-to-typescript (node)": compile_only,
        "make ts (whole, temp dir)": make_ts,
        "make ts-check (gen + stale + tsc)": make_ts_check,
    }
    figures: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(runs):
        for name, step in steps.items():
            figures[name].append(timed(step))
    baseline = statistics.median(next(iter(figures.values())))
    defs = len(json.loads(bundle_text)["schema"]["$defs"])
    print(f"{defs} exported shapes, {runs} runs, median seconds (ratio to the baseline)")
    for name, values in figures.items():
        median = statistics.median(values)
        print(f"  {name:40s} {median:7.2f} s  {median / baseline:7.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
