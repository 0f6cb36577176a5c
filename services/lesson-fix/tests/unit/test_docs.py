"""docs/lesson-checks.md stays true to the checker: every code, its level and fix, an example
that fires it with the key it shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

from quiz_lesson_fix.domain.checks import CHECK_CODES, validate_lesson

DOC = Path(__file__).resolve().parents[4] / "docs" / "lesson-checks.md"
SECTION = re.compile(
    r"^### (?P<code>[EW]_[A-Z_]+)\n\n\| level \| fix \| key identity \|\n\|---\|---\|---\|\n"
    r"\| (?P<level>\w+) \| (?P<fix>[^|]+) \| `(?P<identity>[^`]+)` \|\n\n(?P<trigger>.+?)\n\n"
    r"Fires on \(its key: `(?P<key>[^`]+)`\):\n\n```json\n(?P<lesson>.+?)\n```",
    re.MULTILINE | re.DOTALL,
)


def test_every_code_is_documented_with_a_lesson_that_fires_it() -> None:
    found = {m["code"]: m for m in SECTION.finditer(DOC.read_text(encoding="utf-8"))}
    assert set(found) == set(CHECK_CODES)
    for code, m in found.items():
        info = CHECK_CODES[code]
        assert m["level"] == info.level, code
        assert m["identity"] == info.key, code
        assert m["trigger"] == info.trigger, code
        expected_fix = {"ai": "AI (`AI_FIX_CODES`)", "quick": "quick fix", None: "none"}[info.fix]
        assert m["fix"].strip().startswith(expected_fix), code
        findings = validate_lesson(json.loads(m["lesson"])).findings
        assert m["key"] in [f.key for f in findings if f.code == code], code
