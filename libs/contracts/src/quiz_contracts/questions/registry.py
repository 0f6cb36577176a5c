"""The question types: each one's config schema, fresh draft, student and solution views.

`to_student` builds the student's view field by field from a validated config (an allow list),
so a field added to a config never reaches a student by default. `forbidden_student_keys` are
the names the registry-wide leak test (libs/contracts/tests) refuses anywhere in a student view
(heig-quiz's own leak tests, `packages/qt-*/src/toStudent.test.ts`, list the same kind of keys).
The explanation is kept beside the config and is in neither view.
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
from quiz_contracts.questions.common import DraftBudget, Problem, StudentView, measure_draft

# Names only the staff's side of a question carries; each type adds or lifts a few.
STAFF_ONLY_KEYS: frozenset[str] = frozenset(
    {
        "explanation", "correct", "matchers", "answers", "pattern", "tolerance", "policy",
        "rubric", "reference", "referenceSolution", "compileArgs", "grading", "expected",
        "internalName", "tags", "difficulty",
    }
)  # fmt: skip


@dataclass(frozen=True)
class QuestionType:
    """A question type: its config schema and the two views a config is served through."""

    name: str
    config_model: type[BaseModel]
    config_version: int
    has_key: bool
    takes_variables: bool  # ADR-056: only mcq, short and cloze
    empty_draft: Callable[[], dict[str, Any]]
    student_view: Callable[[Any, StudentView], dict[str, Any]]
    solution_view: Callable[[Any], dict[str, Any] | None]
    budget: DraftBudget
    forbidden_student_keys: frozenset[str] = field(default=STAFF_ONLY_KEYS)

    def validate(self, config: BaseModel | Mapping[str, Any]) -> BaseModel:
        """The config as this type's model; an invalid one is `draft_invalid`."""
        if isinstance(config, self.config_model):
            return config
        reading = read_draft(self.name, config)
        if reading.config is None:
            first = reading.problems[0] if reading.problems else None
            detail = f"{first.path or 'config'}: {first.message}" if first else "invalid"
            raise ContractError(ErrorCode.draft_invalid, f"{self.name} config: {detail}")
        return reading.config

    def to_student(
        self, config: BaseModel | Mapping[str, Any], view: StudentView | None = None
    ) -> dict[str, Any]:
        """What a student receives before answering (the teacher's preview without a view)."""
        return self.student_view(self.validate(config), view or StudentView())

    def to_solution(self, config: BaseModel | Mapping[str, Any]) -> dict[str, Any] | None:
        """The key, as released with the correction; None for a keyless type."""
        return self.solution_view(self.validate(config))


def _type(
    module: Any,
    name: str,
    model: type[BaseModel],
    *,
    has_key: bool = True,
    takes_variables: bool = False,
    allowed: frozenset[str] = frozenset(),
    extra_forbidden: frozenset[str] = frozenset(),
) -> QuestionType:
    prefix = name.upper()
    return QuestionType(
        name=name,
        config_model=model,
        config_version=getattr(module, f"{prefix}_CONFIG_VERSION"),
        has_key=has_key,
        takes_variables=takes_variables,
        empty_draft=getattr(module, f"empty_{name}_draft"),
        student_view=getattr(module, f"{name}_to_student"),
        solution_view=getattr(module, f"{name}_to_solution"),
        budget=getattr(module, f"{prefix}_BUDGET"),
        forbidden_student_keys=(STAFF_ONLY_KEYS - allowed) | extra_forbidden,
    )


_VALUE = frozenset({"value"})
_FILE_BYTES = frozenset({"content"})
QUESTION_TYPES: dict[str, QuestionType] = {
    t.name: t
    for t in (
        _type(mcq, "mcq", mcq.McqConfig, takes_variables=True),
        _type(short, "short", short.ShortConfig, takes_variables=True, extra_forbidden=_VALUE),
        _type(rich, "rich", rich.RichConfig),
        _type(categorize, "categorize", categorize.CategorizeConfig),
        # A VISIBLE case's expected output is published on purpose (the compare options too).
        _type(
            code,
            "code",
            code.CodeConfig,
            allowed=frozenset({"expected"}),
            extra_forbidden=_FILE_BYTES,
        ),
        _type(codeimage, "codeimage", codeimage.CodeImageConfig, extra_forbidden=_FILE_BYTES),
        _type(cloze, "cloze", cloze.ClozeConfig, takes_variables=True, extra_forbidden=_VALUE),
        _type(circuit, "circuit", circuit.CircuitConfig, extra_forbidden=frozenset({"mode"})),
        _type(diagram, "diagram", diagram.DiagramConfig),
        _type(brainstorm, "brainstorm", brainstorm.BrainstormConfig, has_key=False),
    )
}


def check_draft_size(type_name: str, config: Any) -> None:
    """Refuse a draft that holds more than any valid config of its type could (limit_exceeded).

    Cheap and I/O-free: run it before a draft costs anything (a model call, a write).
    """
    qtype = question_type(type_name)
    size = measure_draft(config, qtype.budget)
    if size.over(qtype.budget):
        raise ContractError(
            ErrorCode.limit_exceeded,
            f"The draft is larger than any {type_name} question can be (at most "
            f"{qtype.budget.text:,} characters of text, {qtype.budget.values:,} values, nested "
            f"{qtype.budget.depth} deep).",
            details={"limit_text": qtype.budget.text, "limit_values": qtype.budget.values},
        )


def question_type(name: str) -> QuestionType:
    """The type of that name; an unknown one is `invalid_request`."""
    found = QUESTION_TYPES.get(name) if isinstance(name, str) else None
    if found is None:
        raise ContractError(ErrorCode.invalid_request, f"unknown question type {name!r}")
    return found


@dataclass(frozen=True)
class DraftReading:
    """A draft read against its type: the config when valid, else the problems found.

    `misread` are the problems that mean the draft is not one of this type at all, however
    unfinished (D16 lets a draft be empty, short, too long or inconsistent, never another
    shape): a value of the wrong JSON kind (`"choices": "oops"`), another type's literal
    (`configVersion` 2 in a short), an unknown variant, a key the type forbids.
    """

    config: BaseModel | None
    problems: list[Problem]
    misread: list[Problem] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """True when the draft is a valid config of its type."""
        return self.config is not None

    @property
    def reads_as_type(self) -> bool:
        """True when the draft is of its type, complete or not (no `misread` problem)."""
        return not self.misread


# pydantic error types that say a value is not of the kind the type gives its place (besides
# every "…_type"); the others (missing, too short or long, bounds, refinements) say a draft
# is unfinished, as D16 allows.
_MISREAD_ERRORS = frozenset(
    {
        "literal_error",
        "enum",
        "union_tag_invalid",
        "union_tag_not_found",
        "int_from_float",
        "extra_forbidden",
        "is_instance_of",
        "none_required",
    }
)


def _misreads(error_type: str) -> bool:
    return error_type.endswith("_type") or error_type in _MISREAD_ERRORS


def _path(loc: Any) -> list[str]:
    # "~kind" segments are our discriminated unions' tags; zod's paths have none.
    return [str(p) for p in loc if not (isinstance(p, str) and p.startswith("~"))]


def _problems(exc: ValidationError) -> tuple[list[Problem], list[Problem]]:
    """Every problem, and those of them that misread the type (see DraftReading)."""
    problems: list[Problem] = []
    misread: list[Problem] = []
    for err in exc.errors(include_url=False):
        base = _path(err["loc"])
        ctx = err.get("ctx") or {}
        if err["type"] == "refinement" and isinstance(ctx.get("issues"), list):
            for path, key in ctx["issues"]:
                problems.append(Problem(path=".".join(base + _path(path)), message=str(key)))
        else:
            problem = Problem(path=".".join(base), message=err["msg"])
            problems.append(problem)
            if _misreads(err["type"]):
                misread.append(problem)
    return problems, misread


def read_draft(type_name: str, raw: Any) -> DraftReading:
    """Read any JSON value as a draft of that type; never raises but for an unknown type.

    A refinement reports the platform's i18n key (`mcq.single_needs_one`) at its own path;
    `misread` names what is of another shape than the type's (DraftReading).
    """
    model = question_type(type_name).config_model
    if not isinstance(raw, Mapping):
        not_object = [Problem(path="", message="the config is not an object")]
        return DraftReading(None, not_object, not_object)
    try:
        return DraftReading(model.model_validate(dict(raw)), [])
    except ValidationError as exc:
        return DraftReading(None, *_problems(exc))
    except (ValueError, TypeError, RecursionError) as exc:
        # A garbage draft (deep nesting, odd numbers) must come back as a problem, not a 500.
        garbage = [Problem(path="", message=str(exc) or type(exc).__name__)]
        return DraftReading(None, garbage, garbage)
