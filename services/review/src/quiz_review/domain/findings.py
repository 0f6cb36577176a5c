"""The findings kept from the model's reply (ADR-060 §2; HQ review.ts keptFindings, FACTS E).

In order:
1. only the first 20 items of `findings` are read; the cut comes BEFORE anything is dropped,
   so a reply of 25 whose first 20 are all dropped keeps nothing;
2. an item that is not a finding (wrong severity, missing field) is dropped, and a fix that is
   not `{from, to}` strings is none — the gateway validates the reply against
   `REVIEW_OUTPUT_SCHEMA`, so this is a second belt only;
3. a finding whose path names no value of the REVIEWED version is dropped (`explanation`, or a
   dot path into its config; see `paths`); any value keeps it, a list, an object or null too;
4. the message is trimmed and cut to 1000 characters;
5. the fix is kept only when it applies to the reviewed version's value (`fixes.apply_fix`);
   otherwise the finding stays without it: a fix that does not even apply there is the model's
   mistake, not the question's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.review import (
    FINDING_MESSAGE_MAX,
    FINDING_PATH_MAX,
    REVIEW_MAX_FINDINGS,
    FindingFix,
    ReviewFinding,
    ReviewState,
    Severity,
)
from quiz_review.domain.fixes import apply_fix
from quiz_review.domain.paths import MISSING, field_value


def read_reply(output: Any) -> list[Any]:
    """The reply's raw `findings` list; ContractError `llm_failed` when there is none."""
    findings = output.get("findings") if isinstance(output, Mapping) else None
    if not isinstance(findings, list):
        raise ContractError(ErrorCode.llm_failed, "the model's reply has no findings list")
    return findings


def kept_findings(config: Any, explanation: str, raw_findings: list[Any]) -> list[ReviewFinding]:
    """The findings of a reply worth keeping for the version reviewed (see module docstring)."""
    kept: list[ReviewFinding] = []
    for raw in raw_findings[:REVIEW_MAX_FINDINGS]:
        item = _as_finding(raw)
        if item is None:
            continue
        severity, path, message, fix = item
        value = field_value(config, explanation, path)
        if value is MISSING:
            continue
        if fix is not None and apply_fix(value, fix.from_, fix.to) is None:
            fix = None
        kept.append(
            ReviewFinding(
                severity=severity,
                path=path,
                # Code points; the platform's cut counts UTF-16 units (differs past U+FFFF only).
                message=message.strip()[:FINDING_MESSAGE_MAX],
                fix=fix,
            )
        )
    return kept


def review_state_for(findings: list[ReviewFinding]) -> ReviewState:
    """clean when nothing was kept, findings otherwise."""
    return ReviewState.findings if findings else ReviewState.clean


def _as_finding(raw: Any) -> tuple[Severity, str, str, FindingFix | None] | None:
    if not isinstance(raw, Mapping):
        return None
    severity, path, message = raw.get("severity"), raw.get("path"), raw.get("message")
    if not isinstance(severity, str) or severity not in Severity.__members__:
        return None
    if not isinstance(path, str):
        return None
    if not isinstance(message, str) or len(path) > FINDING_PATH_MAX:
        return None
    fix_raw = raw.get("fix")
    fix: FindingFix | None = None
    if fix_raw is not None:
        try:
            fix = FindingFix.model_validate(fix_raw, by_alias=True, by_name=False)
        except ValidationError:
            fix = None  # a fix that is not {from, to} applies to nothing: the finding stays
    return Severity(severity), path, message, fix
