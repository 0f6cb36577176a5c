"""The generators by question type: a type gets the wand by being listed here (ADR-059 §7)."""

from __future__ import annotations

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_editor_assist.generators.base import AnswerGenerator
from quiz_editor_assist.generators.categorize import CategorizeGenerator
from quiz_editor_assist.generators.code import CodeGenerator
from quiz_editor_assist.generators.codeimage import CodeImageGenerator
from quiz_editor_assist.generators.mcq import McqGenerator
from quiz_editor_assist.generators.rich import RichGenerator
from quiz_editor_assist.generators.short import ShortGenerator

GENERATORS: dict[str, AnswerGenerator] = {
    g.type_name: g
    for g in (
        McqGenerator(),
        ShortGenerator(),
        RichGenerator(),
        CategorizeGenerator(),
        CodeGenerator(),
        CodeImageGenerator(),
    )
}


def generated_types() -> list[str]:
    """The types that have a generator, for GenerateAvailability.types."""
    return sorted(GENERATORS)


def generator_for(type_name: str) -> AnswerGenerator:
    """The generator of a type; a type without one is `invalid_request`."""
    found = GENERATORS.get(type_name)
    if found is None:
        raise ContractError(ErrorCode.invalid_request, f"{type_name!r} has no answer generator")
    return found
