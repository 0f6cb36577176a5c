"""The lint's findings in a review (issue 30), when the pool's owner turned them on.

`with_lint_notices(model_findings, type, config, language)`:
1. nothing changes for a type the lint does not read, or a config that does not validate (a
   published version always does; the rule is a belt);
2. each lint finding becomes a `notice` with its `code` (`iwf.…`), no fix;
3. it is dropped when one of the model's findings is about the same field: the same path, or
   one on whole segments below or above it (`choices.2.text` and `choices.2`) — the model's
   word on a field comes first;
4. the model's findings come first, then the notices, cut at the platform's 20
   (`REVIEW_MAX_FINDINGS`).

The lint's findings are never sent to the model: the review call is built from the version's
type, config and explanation alone (`prompt.review_request`), before they exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from quiz_contracts.errors import ContractError
from quiz_contracts.review import REVIEW_MAX_FINDINGS, ReviewFinding, Severity
from quiz_review.domain.iwf.lint import lint_mcq, read_mcq

# A version whose event named no language is linted with the language-free criteria only.
UNKNOWN_LANGUAGE = "und"


def _same_field(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def with_lint_notices(
    model_findings: Sequence[ReviewFinding],
    type_name: str,
    config: Mapping[str, Any],
    language: str | None,
) -> list[ReviewFinding]:
    """The model's findings, then the lint's notices not about a field the model named."""
    kept = list(model_findings)
    try:
        mcq = read_mcq(type_name, config)
    except ContractError:
        return kept
    flaws, _ = lint_mcq(mcq, language or UNKNOWN_LANGUAGE)
    for flaw in flaws:
        if len(kept) >= REVIEW_MAX_FINDINGS:
            break
        if any(_same_field(flaw.path, f.path) for f in kept if f.code is None):
            continue
        kept.append(
            ReviewFinding(
                severity=Severity.notice, path=flaw.path, message=flaw.message, code=flaw.code
            )
        )
    return kept
