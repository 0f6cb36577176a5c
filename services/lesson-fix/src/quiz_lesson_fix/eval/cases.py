"""The seeded-defect lessons: each holds one planted defect whose code is in AI_FIX_CODES.

Stored as JSON next to this module (`lessons/*.json`): `{name, language, defect, planted,
reference, lesson}`, where `planted` says in words what was broken, `reference` is one fix that
passes checkFix (the model's reply, with only the fields it changes), and `lesson` is a stored
lesson in the tool's shape. Our own lessons, in English, French, German, Italian and Spanish.

The reference fixes prove each planted defect fixable under our checks, and script the stub
when `quiz-eval lesson-fix` runs in CI; a real model never sees them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from quiz_contracts.lesson import Finding
from quiz_lesson_fix.domain.aifix import has_ai_fix
from quiz_lesson_fix.domain.checks import CheckResult, validate_lesson

EMPTY_EDIT: dict[str, Any] = {
    "blockId": "",
    "text": "",
    "words": [],
    "questionType": "",
    "prompt": "",
    "answer": "",
    "answers": [],
    "steps": [],
}
"""An edit of FIX_SCHEMA that keeps everything: every field, empty."""


@dataclass(frozen=True)
class EvalCase:
    """One seeded lesson and the finding its planted defect raises."""

    name: str
    language: str
    defect: str
    planted: str
    lesson: dict[str, Any]
    reference: dict[str, Any]

    def checked(self) -> CheckResult:
        """The full checks of the unchanged lesson (the "before" of its fix)."""
        return validate_lesson(self.lesson)

    def finding(self, checked: CheckResult | None = None) -> Finding:
        """The planted defect's finding; ValueError if the lesson does not raise exactly one."""
        found = [f for f in (checked or self.checked()).findings if f.code == self.defect]
        if len(found) != 1 or not has_ai_fix(found[0]):
            raise ValueError(
                f"{self.name}: expected one AI-fixable {self.defect}, got {len(found)}"
            )
        return found[0]

    def reference_reply(self) -> dict[str, Any]:
        """The reference fix as a model answers FIX_SCHEMA: every field of every edit present."""
        return {
            "explanation": self.reference["explanation"],
            "edits": [{**EMPTY_EDIT, **edit} for edit in self.reference["edits"]],
        }


def load_cases() -> list[EvalCase]:
    """Every seeded lesson, by name."""
    folder = resources.files(__package__) / "lessons"
    cases = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            data = json.loads(entry.read_text(encoding="utf-8"))
            cases.append(
                EvalCase(
                    data["name"],
                    data["language"],
                    data["defect"],
                    data["planted"],
                    data["lesson"],
                    data["reference"],
                )
            )
    return cases
