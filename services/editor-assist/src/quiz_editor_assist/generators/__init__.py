"""Answer generators of ADR-059: per type, what the model may propose and the pure merge."""

from quiz_editor_assist.generators.base import AnswerGenerator, ItemWand, SettlePlan
from quiz_editor_assist.generators.pipeline import (
    GenerateCall,
    SettleStep,
    apply_proposal,
    generate_result,
    merge_explanation,
    plan_settle,
    prepare_generate,
    runner_failed,
    settle_reply,
    too_large_for_the_model,
    too_large_for_the_runner,
    wand_schema,
)
from quiz_editor_assist.generators.registry import GENERATORS, generated_types, generator_for

__all__ = [
    "GENERATORS",
    "AnswerGenerator",
    "GenerateCall",
    "ItemWand",
    "SettlePlan",
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
    "too_large_for_the_model",
    "too_large_for_the_runner",
    "wand_schema",
]
