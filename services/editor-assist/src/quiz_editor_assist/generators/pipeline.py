"""The wand as pure steps the route chains around its two I/O calls (the gateway, the runner).

call = prepare_generate(type_name, request)          # statement_empty, item_not_empty
proposal = <llm.v1.complete with call.system, call.user, call.output_schema>
config, explanation = apply_proposal(call, request, proposal)
step = plan_settle(type_name, config)                 # a RunRequest, or what is left to do
if step.request: config, incomplete = settle_reply(type_name, config, <runner.v1.run>)
(or incomplete = [runner_failed(error)] when the runner is unavailable or busy)
return generate_result(request, config, explanation, incomplete)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.generate import GenerateRequest, GenerateResult, Incomplete, draft_hash
from quiz_contracts.llm import OutputSchema
from quiz_contracts.questions import read_draft
from quiz_contracts.questions.common import asset_links, strings_in
from quiz_contracts.runner import RunReply, RunRequest
from quiz_editor_assist.generators.base import Merge, merge_explanation
from quiz_editor_assist.generators.prompt import system_prompt, user_message
from quiz_editor_assist.generators.registry import generator_for


@dataclass(frozen=True)
class GenerateCall:
    """One model call: the prompt, the forced tool's schema, and the merge of its output."""

    type_name: str
    system: str
    user: str
    output_schema: OutputSchema
    merge: Merge
    item: int | None


def prepare_generate(type_name: str, request: GenerateRequest) -> GenerateCall:
    """Refuse an empty statement or a non-empty item; else the call to make."""
    generator = generator_for(type_name)
    if not generator.statement(request.config).strip():
        raise ContractError(ErrorCode.statement_empty, "Write the statement first.")
    item = generator.item(request.config, request.item) if request.item is not None else None
    schema = item.schema if item is not None else generator.proposal_schema
    return GenerateCall(
        type_name=type_name,
        system=system_prompt(generator, item),
        user=user_message(type_name, request.config, request.explanation, request.item),
        output_schema=OutputSchema(
            name=f"propose_{type_name}",
            json_schema=schema.model_json_schema(),
            description=f"What completes the {type_name} question; the teacher decides.",
        ),
        merge=item.merge if item is not None else generator.merge,
        item=request.item,
    )


def apply_proposal(
    call: GenerateCall, request: GenerateRequest, proposal: Any
) -> tuple[dict[str, Any], str]:
    """The merged config and explanation; a reply of the wrong shape merges as nothing."""
    raw = dict(proposal) if isinstance(proposal, Mapping) else {}
    config = call.merge(request.config, raw)
    # The item wand proposes one element; the explanation is the whole wand's.
    explanation = (
        request.explanation
        if call.item is not None
        else merge_explanation(request.explanation, raw)
    )
    return config, explanation


@dataclass(frozen=True)
class SettleStep:
    """What settle needs: a run, or nothing to run, with what is already known left to do."""

    request: RunRequest | None = None
    incomplete: list[Incomplete] = field(default_factory=list)


def plan_settle(type_name: str, config: dict[str, Any]) -> SettleStep:
    """Run only a merged draft valid under the type's schema (as Try does)."""
    generator = generator_for(type_name)
    if not generator.has_settle:
        return SettleStep()
    reading = read_draft(type_name, config)
    if not reading.valid:
        where = "; ".join(f"{p.path or 'config'}: {p.message}" for p in reading.problems[:3])
        what = "the expected outputs" if type_name == "code" else "the target picture"
        return SettleStep(
            incomplete=[
                Incomplete(
                    code=ErrorCode.draft_invalid,
                    message=f"Complete the draft to compute {what} ({where}).",
                )
            ]
        )
    return SettleStep(request=generator.settle_plan(config))


def settle_reply(
    type_name: str, config: dict[str, Any], reply: RunReply
) -> tuple[dict[str, Any], list[Incomplete]]:
    """Apply the runner's reply to the merged draft."""
    return generator_for(type_name).settle_apply(config, reply)


def runner_failed(error: ContractError | None) -> Incomplete:
    """The run did not happen: None (no responders) is runner_unavailable."""
    if error is None or error.code == ErrorCode.runner_unavailable:
        return Incomplete(
            code=ErrorCode.runner_unavailable,
            message="No runner is available: the outputs are left to compute.",
        )
    if error.code == ErrorCode.runner_busy:
        return Incomplete(
            code=ErrorCode.runner_busy, message="The runner is busy: try again in a moment."
        )
    return Incomplete(code=error.code, message=error.message)


def generate_result(
    request: GenerateRequest,
    config: dict[str, Any],
    explanation: str,
    incomplete: list[Incomplete] | None = None,
) -> GenerateResult:
    """The reply: the merged draft, what is left, notices, and the hash of the draft received."""
    notices: list[str] = []
    if any(asset_links(text) for text in strings_in(request.config)):
        notices.append("Images were not sent: the proposal was made without seeing them.")
    if config == request.config and explanation == request.explanation:
        notices.append("Nothing was added: the draft already holds what the wand proposes.")
    return GenerateResult(
        config=config,
        explanation=explanation,
        incomplete=incomplete or None,
        notices=notices,
        draft_hash=draft_hash(request.config, request.explanation),
    )
