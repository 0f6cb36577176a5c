"""Answer generators of ADR-059: per type, what the model may propose and the pure merge."""

from quiz_editor_assist.generators.base import AnswerGenerator, ItemCall, merge_explanation
from quiz_editor_assist.generators.pipeline import (
    GenerateCall,
    SettleStep,
    apply_proposal,
    generate_result,
    plan_settle,
    prepare_generate,
    runner_failed,
    settle_reply,
)
from quiz_editor_assist.generators.registry import GENERATORS, generated_types, generator_for

__all__ = [
    "GENERATORS",
    "AnswerGenerator",
    "GenerateCall",
    "ItemCall",
    "SettleStep",
    "apply_proposal",
    "generate_result",
    "generated_types",
    "generator_for",
    "merge_explanation",
    "plan_settle",
    "prepare_generate",
    "runner_failed",
    "settle_reply",
]
