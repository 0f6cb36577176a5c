"""The wand as pure steps the service chains around its two I/O calls (the gateway, the runner).

heig-quiz `apps/api/src/modules/pool/generate.ts` (`generateAnswers`), step by step:

call = prepare_generate(type_name, request)
    # generate_unsupported (no wand, or no item wand), statement_empty, limit_exceeded
    # (a statement over 20,000 characters, a draft larger than its type allows), draft_invalid
    # (a draft of another shape than its type's), item_not_empty
<check that call's request fits the NATS hop: fits_nats(...) — limit_exceeded otherwise>
output = <llm.v1.complete: call.system, call.user, call.output_schema, call.max_output_tokens>
config, explanation = apply_proposal(call, request, output)
    # whole wand: merge(config, output.proposal); the explanation is the model's, trimmed and
    # cut to 20,000, only when the teacher's is blank (and "" when the model gave none);
    # item wand: place(config, item, output), the explanation untouched
step = plan_settle(type_name, config)
    # settle only a merged draft valid under the type's schema, else draft_invalid
if step.plan: config, left = settle_reply(type_name, config, step.plan, <runner.v1.run>)
    (or left = [runner_failed(error)]: unavailable, busy, timed out → runner_unavailable)
return generate_result(request, config, explanation, incomplete, notices)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.generate import (
    EXPLANATION_MAX,
    GENERATE_ITEM_MAX_OUTPUT_TOKENS,
    GENERATE_MAX_OUTPUT_TOKENS,
    GenerateRequest,
    GenerateResult,
    Incomplete,
    draft_hash,
)
from quiz_contracts.llm import OutputSchema
from quiz_contracts.questions import check_draft_size, read_draft
from quiz_contracts.questions.common import PROMPT_MAX, asset_links, js_trim, strings_in, utf16_len
from quiz_contracts.runner import RunReply
from quiz_editor_assist.generators.base import SettlePlan, trimmed_cut
from quiz_editor_assist.generators.prompt import EXPLANATION_RULE, system_prompt, user_message
from quiz_editor_assist.generators.registry import generator_for

# Room left in a NATS message for its headers (trace context, the micro service's own).
NATS_HEADER_ALLOWANCE = 4 * 1024


@dataclass(frozen=True)
class GenerateCall:
    """One model call: the prompt, the forced tool's schema, the budget, and how to merge."""

    type_name: str
    system: str
    user: str
    output_schema: OutputSchema
    max_output_tokens: int
    item: int | None
    merge: Callable[[dict[str, Any], Any], dict[str, Any]]


def wand_schema(proposal: type[BaseModel]) -> dict[str, Any]:
    """The whole wand's tool: `{proposal: <the type's narrow schema>, explanation}`."""
    inner = proposal.model_json_schema()
    defs = inner.pop("$defs", None)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "proposal": inner,
            "explanation": {"type": "string", "description": EXPLANATION_RULE},
        },
        "required": ["proposal", "explanation"],
    }
    if defs:
        schema["$defs"] = defs
    return schema


def check_statement(statement: str) -> None:
    """statement_empty for a blank statement; limit_exceeded over the platform's 20,000."""
    if not js_trim(statement):
        raise ContractError(ErrorCode.statement_empty, "Write the statement first.")
    length = utf16_len(statement)
    if length > PROMPT_MAX:
        raise ContractError(
            ErrorCode.limit_exceeded,
            f"The statement is {length:,} characters long; a question's is at most {PROMPT_MAX:,}.",
            details={"limit": PROMPT_MAX, "size": length},
        )


def check_reads_as_type(type_name: str, config: dict[str, Any]) -> None:
    """draft_invalid, with the type's own messages, for a draft of another shape than its type's.

    A draft may be unfinished (D16: empty, missing, too short or inconsistent) and still be
    completed; one that is not of the grant's type at all (an mcq draft under a short grant, a
    `"choices": "oops"`) would be merged into a hybrid or come back unchanged without a word.
    """
    misread = read_draft(type_name, config).misread
    if misread:
        where = "; ".join(f"{p.path or 'config'}: {p.message}" for p in misread[:3])
        raise ContractError(
            ErrorCode.draft_invalid,
            f"The draft does not read as a {type_name} question ({where}).",
            details={"problems": [p.model_dump() for p in misread[:20]]},
        )


def prepare_generate(type_name: str, request: GenerateRequest) -> GenerateCall:
    """Everything refused before a model is paid, then the call to make."""
    generator = generator_for(type_name)
    check_statement(generator.statement(request.config))
    check_draft_size(type_name, request.config)
    check_reads_as_type(type_name, request.config)
    user = user_message(type_name, request.config, request.explanation, request.item)
    if request.item is None:
        return GenerateCall(
            type_name=type_name,
            system=system_prompt(generator),
            user=user,
            output_schema=OutputSchema(
                name=f"propose_{type_name}",
                json_schema=wand_schema(generator.proposal_schema),
                description=f"What completes the {type_name} question; the teacher decides.",
            ),
            max_output_tokens=GENERATE_MAX_OUTPUT_TOKENS,
            item=None,
            merge=lambda config, output: generator.merge(config, _proposal_of(output)),
        )
    item = generator.item
    if item is None:
        raise ContractError(
            ErrorCode.generate_unsupported, f"The {type_name} question type has no item wand."
        )
    index = request.item
    if index > item.max_index or not item.accepts(request.config, index):
        raise ContractError(ErrorCode.item_not_empty, f"Element {index + 1} is not an empty row.")
    return GenerateCall(
        type_name=type_name,
        system=system_prompt(generator, item),
        user=user,
        output_schema=OutputSchema(
            name=f"propose_{type_name}_item",
            json_schema=item.schema.model_json_schema(),
            description=f"One element of the {type_name} question; the teacher decides.",
        ),
        max_output_tokens=GENERATE_ITEM_MAX_OUTPUT_TOKENS,
        item=index,
        merge=lambda config, output: item.place(config, index, _mapping(output)),
    )


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _proposal_of(output: Any) -> dict[str, Any]:
    return _mapping(_mapping(output).get("proposal"))


def merge_explanation(explanation: str, output: Any) -> str:
    """The teacher's explanation; when blank, the model's trimmed and cut to 20,000 (or "")."""
    if js_trim(explanation):
        return explanation
    proposed = _mapping(output).get("explanation")
    return trimmed_cut(proposed, EXPLANATION_MAX) if isinstance(proposed, str) else ""


def apply_proposal(
    call: GenerateCall, request: GenerateRequest, output: Any
) -> tuple[dict[str, Any], str]:
    """The merged config and explanation; a reply of the wrong shape merges as nothing."""
    config = call.merge(request.config, output)
    # The item wand proposes one element; the explanation is the whole wand's.
    if call.item is not None:
        return config, request.explanation
    return config, merge_explanation(request.explanation, output)


@dataclass(frozen=True)
class SettleStep:
    """What settle needs: a run (or none), what is already left to do, what to tell."""

    plan: SettlePlan | None = None
    incomplete: list[Incomplete] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def plan_settle(type_name: str, config: dict[str, Any]) -> SettleStep:
    """Run only a merged draft valid under the type's schema (as Try does)."""
    generator = generator_for(type_name)
    if not generator.has_settle:
        return SettleStep()
    reading = read_draft(type_name, config)
    if reading.config is None:
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
    plan = generator.settle_plan(reading.config)
    notice = generator.settle_notice(reading.config) if plan is None else None
    return SettleStep(plan=plan, notices=[notice] if notice else [])


def settle_reply(
    type_name: str, config: dict[str, Any], plan: SettlePlan, reply: RunReply
) -> tuple[dict[str, Any], list[Incomplete]]:
    """Write what the run produced into the merged draft."""
    return generator_for(type_name).settle_apply(config, plan, reply)


def runner_failed(error: ContractError | None) -> Incomplete:
    """The run did not happen: no runner, a busy or silent one, or a request it refused.

    The seed's incomplete codes have no `runner_busy`: a busy runner is `runner_unavailable`
    (the platform maps RunnerUnavailable and RunnerBusy alike).
    """
    if error is None or error.code in (
        ErrorCode.runner_unavailable,
        ErrorCode.runner_busy,
        ErrorCode.timeout,
    ):
        busy = error is not None and error.code == ErrorCode.runner_busy
        why = "The runner is busy" if busy else "No runner is available"
        return Incomplete(
            code=ErrorCode.runner_unavailable,
            message=f"{why}: what running produces is left to compute; try again in a moment.",
        )
    if error.code == ErrorCode.limit_exceeded:
        return Incomplete(
            code=ErrorCode.partial, message=f"The run was refused as too large: {error.message}"
        )
    return Incomplete(
        code=ErrorCode.runner_unavailable, message=f"The runner could not run it: {error.message}"
    )


def nats_overflow(payload_bytes: int, max_payload: int) -> int | None:
    """How many bytes a message is over what the NATS hop carries (headers allowed), or None."""
    room = max_payload - NATS_HEADER_ALLOWANCE
    return payload_bytes - room if payload_bytes > room else None


def too_large_for_the_model(payload_bytes: int, max_payload: int) -> ContractError | None:
    """limit_exceeded when the call cannot reach the gateway in one NATS message."""
    over = nats_overflow(payload_bytes, max_payload)
    if over is None:
        return None
    return ContractError(
        ErrorCode.limit_exceeded,
        f"The draft is too large to send to the model: the call is {payload_bytes:,} bytes, "
        f"{over:,} over what the message bus carries ({max_payload:,}).",
        details={"limit": max_payload - NATS_HEADER_ALLOWANCE, "size": payload_bytes},
    )


def too_large_for_the_runner(payload_bytes: int, max_payload: int) -> Incomplete | None:
    """partial when the run cannot reach the runner in one NATS message: nothing is lost."""
    over = nats_overflow(payload_bytes, max_payload)
    if over is None:
        return None
    return Incomplete(
        code=ErrorCode.partial,
        message=f"The run is too large to send to the runner ({payload_bytes:,} bytes, "
        f"{over:,} over the message bus's {max_payload:,}): run it from Try.",
    )


def generate_result(
    request: GenerateRequest,
    config: dict[str, Any],
    explanation: str,
    incomplete: list[Incomplete] | None = None,
    notices: list[str] | None = None,
) -> GenerateResult:
    """The reply: the merged draft, what is left, notices, and the hash of the draft received."""
    told = list(notices or [])
    if any(asset_links(text) for text in strings_in(request.config)):
        told.append("Images were not sent: the proposal was made without seeing them.")
    if config == request.config and explanation == request.explanation:
        told.append("Nothing was added: the draft already holds what the wand proposes.")
    return GenerateResult(
        config=config,
        explanation=explanation,
        incomplete=incomplete or None,
        notices=told,
        draft_hash=draft_hash(request.config, request.explanation),
    )
