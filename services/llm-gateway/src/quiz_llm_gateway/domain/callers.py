"""Who may spend on what: the calling service's purposes and payers (issue 29 item 5). Pure.

The caller is the bus user nats-server let publish on `llm.v1.complete.<user>` (each user may
publish its own subject only: quiz_contracts.bus), never a field of the payload. Each service
may call for its own purposes (quiz_contracts.llm.CALLER_PURPOSES: editor-assist `generate`,
review `review`, poll `poll`, lesson-fix `lesson_fix`; the platform, issue 31, its own purposes
that none of ours makes: test, grade, assist/assistant, describe, domain, concepts — FACTS E2);
only a purpose that bills someone other than the person acting (BILLING_PURPOSES: the poll
billing its teacher) may set `billed_to`.
The plain `llm.v1.complete` (caller None) is the operators' alone (`ops` is account-wide):
any purpose.
"""

from __future__ import annotations

from collections.abc import Mapping

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import BILLING_PURPOSES, CALLER_PURPOSES, Purpose


def authorize(
    caller: str | None,
    purpose: Purpose,
    billed_to: str | None,
    user: str | None,
    *,
    purposes: Mapping[str, frozenset[Purpose]] = CALLER_PURPOSES,
    billing: frozenset[Purpose] = BILLING_PURPOSES,
) -> None:
    """Nothing when `caller` may make this call; ContractError `forbidden` otherwise (before
    anything is held or spent): a caller the table does not know, another service's purpose,
    or a `billed_to` other than `user` for a purpose that does not bill someone else."""
    if caller is None:
        return
    allowed = purposes.get(caller)
    if allowed is None:
        raise ContractError(ErrorCode.forbidden, f"{caller} may not call a model")
    if purpose not in allowed:
        raise ContractError(
            ErrorCode.forbidden, f"{caller} may not call for purpose {purpose.value}"
        )
    if billed_to is not None and billed_to != user and purpose not in billing:
        raise ContractError(
            ErrorCode.forbidden,
            f"purpose {purpose.value} bills the person acting: billed_to may not name another",
        )
