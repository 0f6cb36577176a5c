"""The wand's orchestration: the pure pipeline around its calls (the gateway, the runner, and
the review's lint of an mcq proposal)."""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.generate import (
    GenerateAvailability,
    GenerateRequest,
    GenerateResult,
    ProposalLint,
)
from quiz_contracts.llm import CompleteRequest, Effort, LlmMessage, Purpose
from quiz_contracts.review import LintReply, LintRequest
from quiz_contracts.runner import RunReply, RunRequest
from quiz_editor_assist.generators.pipeline import (
    apply_proposal,
    generate_result,
    plan_settle,
    prepare_generate,
    runner_failed,
    settle_reply,
    too_large_for_the_model,
    too_large_for_the_runner,
)
from quiz_editor_assist.generators.registry import generated_types
from quiz_editor_assist.metrics import EditorAssistMetrics
from quiz_editor_assist.runner_quota import PersonQuota
from quiz_editor_assist.settled import SettledRuns, settled_key
from quiz_servicekit.llm import LlmClient
from quiz_servicekit.natsio import request
from quiz_servicekit.request_ids import bounded_id

# The types the review's lint reads (issue 30), and the language sent when the editor names
# none: "und" (BCP 47 "undetermined") runs the language-free criteria only.
LINTED_TYPES = frozenset({"mcq"})
UNKNOWN_LANGUAGE = "und"


class GenerateService:
    """Completes a teacher's draft: prompt → gateway → merge → settle on the runner."""

    def __init__(
        self,
        nc: NATS,
        metrics: EditorAssistMetrics,
        *,
        llm_deadline_s: float,
        runner_timeout_s: float,
        settled: SettledRuns | None = None,
        quota: PersonQuota | None = None,
        lint_timeout_s: float = 2.0,
    ) -> None:
        """`llm_deadline_s`: the model's whole turn, retries included (s); `runner_timeout_s`:
        one settle call on the runner, compile and every case (s); `settled`: the runs kept
        with the gateway's stored replies; `quota`: settle runs per person at once;
        `lint_timeout_s`: the review's lint of an mcq proposal (s)."""
        self._nc = nc
        self._settled = settled
        self._quota = quota or PersonQuota(2)
        # Its errors are the four codes ADR-059 §5 lets the editor see.
        self._llm = LlmClient(nc)
        self._llm_deadline_s = llm_deadline_s
        self._runner_timeout_s = runner_timeout_s
        self._lint_timeout_s = lint_timeout_s
        self._metrics = metrics

    async def generate(
        self, question_type: str, teacher: str, draft: GenerateRequest, caller: str
    ) -> GenerateResult:
        """The merged draft; errors are the seeds' codes (statement_empty, rate_limited, …).

        `caller`: the request's caller key (`quiz_servicekit.request_ids.caller_key`); the
        model call's id is `generate:<type>:<caller>` (the type fixes the prompt as much as the
        draft does), so the same request sent again is answered from the gateway's stored
        reply, free."""
        try:
            result = await self._generate(question_type, teacher, draft, caller)
        except ContractError as e:
            self._metrics.generate.labels(question_type, e.code.value).inc()
            raise
        self._metrics.generate.labels(question_type, "ok").inc()
        for item in result.incomplete or []:
            self._metrics.incomplete.labels(question_type, item.code.value).inc()
        return result

    async def _generate(
        self, question_type: str, teacher: str, draft: GenerateRequest, caller: str
    ) -> GenerateResult:
        # Refusals (no wand, blank or over-long statement, draft over its type's size, item
        # not empty) all happen here, before anything is paid.
        call = prepare_generate(question_type, draft)
        complete = CompleteRequest(
            purpose=Purpose.generate,
            user=teacher,
            effort=Effort.low,
            system=call.system,
            messages=[LlmMessage(role="user", content=call.user)],
            output_schema=call.output_schema,
            max_output_tokens=call.max_output_tokens,
            request_id=bounded_id("generate", question_type, caller),
            deadline_s=self._llm_deadline_s,
        )
        # No request may exceed what the NATS hop carries: say so instead of failing to send.
        too_large = too_large_for_the_model(
            len(complete.model_dump_json().encode()), self._nc.max_payload
        )
        if too_large is not None:
            raise too_large
        completion = await self._llm.complete(complete)
        config, explanation = apply_proposal(call, draft, completion.output)
        step = plan_settle(question_type, config)
        incomplete = list(step.incomplete)
        if step.plan is not None:
            run = step.plan.request
            # An incomplete reason, not an error: the rest of the wand's work still comes back.
            too_large_run = too_large_for_the_runner(
                len(run.model_dump_json().encode()), self._nc.max_payload
            )
            if too_large_run is not None:
                incomplete.append(too_large_run)
            else:
                key = settled_key(complete.request_id or "", completion.call_id)
                try:
                    reply = await self._settle_run(question_type, teacher, key, run)
                except ContractError as e:
                    self._metrics.settle_runs.labels(question_type, e.code.value).inc()
                    incomplete.append(runner_failed(e))
                else:
                    config, left = settle_reply(question_type, config, step.plan, reply)
                    incomplete.extend(left)
        result = generate_result(draft, config, explanation, incomplete, step.notices)
        if question_type in LINTED_TYPES:
            result.lint = await self.lint(question_type, draft.language, result.config)
        return result

    async def lint(
        self, question_type: str, language: str | None, config: dict[str, Any]
    ) -> ProposalLint:
        """The review's lint of the proposed draft (`review.v1.lint`, issue 30). Never an error:
        a review that does not answer (`unavailable`, `timeout`) or refuses the draft
        (`draft_invalid`) leaves the proposal without findings, with the reason."""
        body = LintRequest(type=question_type, language=language or UNKNOWN_LANGUAGE, config=config)
        try:
            reply = await request(
                self._nc, subjects.REVIEW_LINT, body, LintReply, timeout=self._lint_timeout_s
            )
        except ContractError as e:
            self._metrics.proposal_lints.labels(e.code.value).inc()
            answered = e.code not in (ErrorCode.unavailable, ErrorCode.timeout)
            return ProposalLint(available=answered, reason=e.to_body())
        self._metrics.proposal_lints.labels("ok").inc()
        return ProposalLint(available=True, findings=reply.findings, checked=reply.checked)

    async def _settle_run(
        self, question_type: str, teacher: str, key: str, run: RunRequest
    ) -> RunReply:
        """The runner's reply to `run`: the one kept with this model reply (a replay: nothing
        runs, nothing is counted against the teacher), else a run within the teacher's bound
        (runner_busy past it), kept for the replays."""
        if self._settled is not None and (kept := await self._settled.get(key, run)):
            self._metrics.settle_runs.labels(question_type, "replayed").inc()
            return kept
        with self._quota.hold(teacher) as admitted:
            if not admitted:
                raise ContractError(
                    ErrorCode.runner_busy,
                    f"{self._quota.per_person} runs of yours are running already",
                    retry_after_s=1,
                )
            reply = await request(
                self._nc,
                subjects.RUNNER_RUN,
                run,
                RunReply,
                timeout=self._runner_timeout_s,
                unavailable_code=ErrorCode.runner_unavailable,
            )
        self._metrics.settle_runs.labels(question_type, "ok").inc()
        if self._settled is not None:
            await self._settled.put(key, run, reply)
        return reply

    async def availability(self) -> GenerateAvailability:
        """Whether to show the wand: a model can be called, and the types with a generator."""
        reply = await self._llm.availability(Purpose.generate)
        return GenerateAvailability(available=reply.available, types=generated_types())
