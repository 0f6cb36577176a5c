"""The generators by question type: a type gets the wand by being listed here (ADR-059 §7).

cloze, circuit, diagram and brainstorm have none, as on the platform: the wand answers
`generate_unsupported` for them.
"""

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
    """The generator of a type; a type without one is `generate_unsupported`."""
    found = GENERATORS.get(type_name)
    if found is None:
        raise ContractError(
            ErrorCode.generate_unsupported, f"The {type_name} question type has no wand."
        )
    return found
