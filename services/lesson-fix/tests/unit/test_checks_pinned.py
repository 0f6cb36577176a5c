"""The findings of every stored example lesson, pinned whole: code, key, level, place, params,
message, and their order.

The lessons are `docs/examples/*.json`, each code's example of `docs/lesson-checks.md`, and the
seeded evaluation lessons (`eval/lessons/*.json`) before and after their reference fix (the
"after" checked with `reuse`, as checkFix checks it). The pins are `pinned_findings.json`
beside this file; a change to the checks that changes a finding shows here as a diff. After a
deliberate change, write them again with
`uv run --no-sync python services/lesson-fix/tests/unit/test_checks_pinned.py`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from quiz_lesson_fix.domain.aifix import ai_edits_to_operations, apply_fix_operations
from quiz_lesson_fix.domain.checks import validate_lesson
from quiz_lesson_fix.domain.checks.codes import counted
from quiz_lesson_fix.eval.cases import load_cases

ROOT = Path(__file__).resolve().parents[4]
PINS = Path(__file__).with_name("pinned_findings.json")
_EXAMPLE = re.compile(r"^### (?P<code>[EW]_[A-Z_]+)\n.+?```json\n(?P<lesson>.+?)\n```", re.M | re.S)


def _ids() -> Any:
    count = iter(range(1_000_000))
    return lambda: f"new{next(count)}"


def pinned_runs() -> dict[str, list[dict[str, Any]]]:
    """Each stored lesson's findings, by a name saying where the lesson comes from."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((ROOT / "docs" / "examples").glob("*.json")):
        result = validate_lesson(json.loads(path.read_text(encoding="utf-8")))
        runs[f"docs/examples/{path.name}"] = [f.model_dump() for f in result.findings]
    text = (ROOT / "docs" / "lesson-checks.md").read_text(encoding="utf-8")
    for m in _EXAMPLE.finditer(text):
        result = validate_lesson(json.loads(m["lesson"]))
        runs[f"docs/lesson-checks.md#{m['code']}"] = [f.model_dump() for f in result.findings]
    for case in load_cases():
        before = case.checked()
        runs[f"eval/{case.name}"] = [f.model_dump() for f in before.findings]
        finding = case.finding(before)
        operations = ai_edits_to_operations(case.lesson, finding, case.reference_reply()["edits"])
        fixed = apply_fix_operations(case.lesson, operations, make_id=_ids())
        after = validate_lesson(fixed, reuse=before)
        runs[f"eval/{case.name}+reference"] = [f.model_dump() for f in after.findings]
    return runs


RUNS = pinned_runs()
PINNED: dict[str, list[dict[str, Any]]] = (
    json.loads(PINS.read_text(encoding="utf-8")) if PINS.exists() else {}
)


def test_the_pins_cover_every_stored_lesson() -> None:
    assert sorted(PINNED) == sorted(RUNS)
    assert len(RUNS) > 60  # 1 example, 36 codes, 16 seeded lessons twice


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_findings_are_the_pinned_ones(name: str) -> None:
    assert RUNS[name] == PINNED.get(name)


def test_counts_in_messages_have_their_plural() -> None:
    """Issue 34: "1 question(s)", "0 spelling word(s)", "1 section(s)" read as a form, not a
    sentence; the count's noun is singular for one and plural otherwise."""
    messages = [f["message"] for findings in RUNS.values() for f in findings]
    # E_RETIRED_STEM quotes the retired stem itself: "word(s) that come(s) to mind".
    said = [m for m in messages if re.search(r"\d+ [\w ]+\(s\)", m)]
    assert said == []
    assert any(re.search(r"\bhas 1 question in\b", m) for m in messages)
    assert any("has 0 spelling words;" in m for m in messages)
    assert any("The lesson has 1 section;" in m for m in messages)


def test_counted_uses_the_singular_for_one_only() -> None:
    assert [counted(n, "spelling word") for n in (0, 1, 2)] == [
        "0 spelling words",
        "1 spelling word",
        "2 spelling words",
    ]
    assert counted(1, "answer") == "1 answer" and counted(3, "box", "boxes") == "3 boxes"


if __name__ == "__main__":
    PINS.write_text(json.dumps(RUNS, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{PINS}: {len(RUNS)} lessons, {sum(map(len, RUNS.values()))} findings")
