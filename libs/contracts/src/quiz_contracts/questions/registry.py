"""The question types: each one's config model, key, student and solution views.

`to_student` builds the student's view field by field from a validated config (an allow list),
so a field added to a config never reaches a student by default. `forbidden_student_keys` are the
names the leak test (libs/contracts/tests) refuses anywhere in a student view. The explanation is
kept beside the config (common.py) and is in neither view.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.questions import (
    brainstorm,
    categorize,
    circuit,
    cloze,
    code,
    codeimage,
    diagram,
    mcq,
    rich,
    short,
)
from quiz_contracts.questions.common import Problem

# Names that only the staff's side of a question carries: refused in every student view.
STAFF_ONLY_KEYS: frozenset[str] = frozenset(
    {"explanation", "correct", "matchers", "reference", "rubric", "placements", "expected"}
)


@dataclass(frozen=True)
class QuestionType:
    """A question type: its config schema and the two views a config is served through."""

    name: str
    config_model: type[BaseModel]
    has_key: bool
    takes_variables: bool  # ADR-056: only mcq, short and cloze
    student_view: Callable[[Any], dict[str, Any]]
    solution_view: Callable[[Any], dict[str, Any] | None]
    forbidden_student_keys: frozenset[str] = field(default=STAFF_ONLY_KEYS)

    def validate(self, config: BaseModel | Mapping[str, Any]) -> BaseModel:
        """The config as this type's model; an invalid one is `draft_invalid`."""
        if isinstance(config, self.config_model):
            return config
        reading = read_draft(self.name, config)
        if reading.config is None:
            first = reading.problems[0] if reading.problems else None
            detail = f"{first.path}: {first.message}" if first else "invalid"
            raise ContractError(ErrorCode.draft_invalid, f"{self.name} config: {detail}")
        return reading.config

    def to_student(self, config: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
        """What a student receives before answering."""
        return self.student_view(self.validate(config))

    def to_solution(self, config: BaseModel | Mapping[str, Any]) -> dict[str, Any] | None:
        """The key, as released with the correction; None for a keyless type."""
        return self.solution_view(self.validate(config))


def _type(
    name: str,
    model: type[BaseModel],
    student: Callable[[Any], dict[str, Any]],
    solution: Callable[[Any], dict[str, Any] | None],
    *,
    has_key: bool = True,
    takes_variables: bool = False,
    extra_forbidden: frozenset[str] = frozenset(),
) -> QuestionType:
    return QuestionType(
        name=name,
        config_model=model,
        has_key=has_key,
        takes_variables=takes_variables,
        student_view=student,
        solution_view=solution,
        forbidden_student_keys=STAFF_ONLY_KEYS | extra_forbidden,
    )


QUESTION_TYPES: dict[str, QuestionType] = {
    t.name: t
    for t in (
        _type("mcq", mcq.McqConfig, mcq.mcq_to_student, mcq.mcq_to_solution, takes_variables=True),
        _type(
            "short",
            short.ShortConfig,
            short.short_to_student,
            short.short_to_solution,
            takes_variables=True,
        ),
        _type("rich", rich.RichConfig, rich.rich_to_student, rich.rich_to_solution),
        _type(
            "categorize",
            categorize.CategorizeConfig,
            categorize.categorize_to_student,
            categorize.categorize_to_solution,
            extra_forbidden=frozenset({"column_id"}),
        ),
        _type("code", code.CodeConfig, code.code_to_student, code.code_to_solution),
        _type(
            "codeimage",
            codeimage.CodeImageConfig,
            codeimage.codeimage_to_student,
            codeimage.codeimage_to_solution,
        ),
        _type(
            "cloze",
            cloze.ClozeConfig,
            cloze.cloze_to_student,
            cloze.cloze_to_solution,
            takes_variables=True,
        ),
        _type(
            "circuit",
            circuit.CircuitConfig,
            circuit.circuit_to_student,
            circuit.circuit_to_solution,
            extra_forbidden=frozenset({"nodes", "wires"}),
        ),
        _type(
            "diagram",
            diagram.DiagramConfig,
            diagram.diagram_to_student,
            diagram.diagram_to_solution,
            extra_forbidden=frozenset({"label"}),
        ),
        _type(
            "brainstorm",
            brainstorm.BrainstormConfig,
            brainstorm.brainstorm_to_student,
            brainstorm.brainstorm_to_solution,
            has_key=False,
        ),
    )
}


def question_type(name: str) -> QuestionType:
    """The type of that name; an unknown one is `invalid_request`."""
    found = QUESTION_TYPES.get(name) if isinstance(name, str) else None
    if found is None:
        raise ContractError(ErrorCode.invalid_request, f"unknown question type {name!r}")
    return found


@dataclass(frozen=True)
class DraftReading:
    """A draft read against its type: the config when valid, else the problems found."""

    config: BaseModel | None
    problems: list[Problem]

    @property
    def valid(self) -> bool:
        """True when the draft is a valid config of its type."""
        return self.config is not None


def read_draft(type_name: str, raw: Any) -> DraftReading:
    """Read any JSON value as a draft of that type; never raises but for an unknown type."""
    model = question_type(type_name).config_model
    if not isinstance(raw, Mapping):
        return DraftReading(None, [Problem(path="", message="the config is not an object")])
    try:
        return DraftReading(model.model_validate(dict(raw)), [])
    except ValidationError as exc:
        problems = [
            Problem(path=".".join(str(p) for p in err["loc"]), message=err["msg"])
            for err in exc.errors(include_url=False)
        ]
        return DraftReading(None, problems)
    except (ValueError, TypeError, RecursionError) as exc:
        # A garbage draft (deep nesting, odd numbers) must come back as a problem, not a 500.
        return DraftReading(None, [Problem(path="", message=str(exc) or type(exc).__name__)])
