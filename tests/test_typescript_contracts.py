"""`make ts-check` with the real node, json-schema-to-typescript and tsc (issue 33).

The committed libs/contracts/ts is fresh and passes tsc --strict with every example; a stale
file and a wrong example each fail with their message. Skipped only where node or npm is
missing (make test says so); where they are, these run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "libs" / "contracts" / "ts"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("node") is None or shutil.which("npm") is None, reason="no node/npm"
    ),
]


def gen_ts(*args: str, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "gen_ts.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's scripts, docs/examples and libs/contracts/ts (node_modules linked)."""
    gen_ts("--check")  # installs node_modules from the lockfile when missing
    root = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "scripts", root / "scripts")
    shutil.copytree(ROOT / "docs" / "examples", root / "docs" / "examples")
    shutil.copytree(
        PACKAGE, root / "libs/contracts/ts", ignore=shutil.ignore_patterns("node_modules")
    )
    (root / "libs/contracts/ts/node_modules").symlink_to(PACKAGE / "node_modules")
    return root


def test_the_committed_types_are_fresh_and_pass_tsc_strict() -> None:
    result = gen_ts("--check")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "tsc --strict passes" in result.stdout


def test_a_stale_file_fails_and_says_run_make_ts(copy: Path) -> None:
    index = copy / "libs/contracts/ts/index.d.ts"
    saved = index.read_text()
    index.write_text(saved.replace("export interface ReviewRequest {", "export interface Old {"))
    try:
        result = gen_ts("--check", root=copy)
    finally:
        index.write_text(saved)
    assert result.returncode == 1
    assert "run `make ts`" in result.stderr


def test_each_wrong_docs_example_fails_tsc(copy: Path) -> None:
    """Two wrong lessons in one run (each run costs a generation and tsc): both are named."""
    wrong = {
        "lesson-wrong-title.json": {"title": 3, "sections": []},  # a number for a string
        "lesson-wrong-missing.json": {"title": "Bees"},  # a required field missing
        # (a Lesson keeps unknown fields, extra="allow": a misspelt one is not wrong there)
    }
    for name, example in wrong.items():
        (copy / "docs/examples" / name).write_text(json.dumps(example))
    try:
        result = gen_ts("--check", root=copy)
    finally:
        for name in wrong:
            (copy / "docs/examples" / name).unlink()
    assert result.returncode == 1
    errors = [line for line in result.stdout.splitlines() if "examples.ts(" in line]
    assert any("TS2322" in e and "number" in e for e in errors), result.stdout  # the title
    assert any("sections" in e for e in errors), result.stdout  # the missing field
    assert "wrong shape: docs/examples/lesson-wrong-title.json" in result.stderr
    assert "wrong shape: docs/examples/lesson-wrong-missing.json" in result.stderr


def test_a_wrong_typescript_example_fails_tsc(copy: Path) -> None:
    example = copy / "libs/contracts/ts/examples/wrong.ts"
    example.write_text(
        'import type { ReviewRequest } from "@quiz/contracts";\n'
        'export const r: ReviewRequest = { questionId: "q", version: "v" };\n'
    )
    try:
        result = gen_ts("--check", root=copy)
    finally:
        example.unlink()
    assert result.returncode == 1
    assert "wrong.ts" in result.stdout


def test_without_node_it_says_how_to_get_it(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_ts.py"), "--check"],
        capture_output=True,
        text=True,
        env={"PATH": str(bare)},
        timeout=60,
        check=False,
    )
    assert result.returncode == 3
    assert "needs node" in result.stderr and "nodejs.org" in result.stderr
