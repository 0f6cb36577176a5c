"""Published question versions for load: the platform's `question.version.published` payload.

The chaos suite and the benches publish many versions that must each be a valid mcq of the
platform's shape (heig-quiz `packages/qt-mcq/src/schema.ts`, `configVersion` 2) and each differ a
little, so that no two reviews are the same call. One builder, so a change of the contract
changes them all.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from quiz_contracts.review import QuestionVersionPublished


def arithmetic_mcq(
    n: int,
    *,
    question_id: str,
    version_id: str,
    pool_id: str,
    prompt_tag: str = "Question",
    published_at: datetime | None = None,
    internal_name: str | None = None,
) -> dict[str, Any]:
    """Version `n` of an mcq asking a sum of `n` (one right, one wrong choice), as the JSON
    object the platform publishes; validated against `QuestionVersionPublished` before it is
    returned (ValueError if the contract no longer accepts it)."""
    a, b = n % 97, n % 89
    event: dict[str, Any] = {
        "questionId": question_id,
        "poolId": pool_id,
        "versionId": version_id,
        "versionNumber": 1,
        "type": "mcq",
        "config": {
            "configVersion": 2,
            "prompt": f"{prompt_tag} : combien font {a} + {b} ?",
            "choices": [
                {"text": str(a + b), "correct": True},
                {"text": str(a + b + 1), "correct": False},
            ],
            "mode": "single",
            "policy": "inherit",
            "shuffleChoices": True,
        },
        "explanation": "",
        "publishedAt": (published_at or datetime.now(UTC)).isoformat(),
        "live": True,
    }
    if internal_name is not None:
        event["internalName"] = internal_name
    QuestionVersionPublished.model_validate(event)
    return event
