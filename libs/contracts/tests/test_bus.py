"""The permission table's reply design (issue 21, issue 20): per-user reply prefixes and the
reply rights derived from who may call whom."""

from __future__ import annotations

import pytest

from quiz_contracts import bus
from quiz_contracts.catalog import OPERATIONS


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ("llm.v1.complete", "llm.v1.complete", True),
        ("llm.v1.>", "llm.v1.complete", True),
        ("llm.v1.complete", "llm.v1.>", True),
        (">", "$SRV.PING", True),
        ("poll.v1.*.tally", "poll.v1.>", True),
        ("poll.v1.*.tally", "poll.v1.open", False),
        ("review.v1.requests", "review.v1.*", True),
        ("llm.v1.>", "llm.v1", False),  # `>` stands for one token at least
        ("runner.v1.run", "llm.v1.>", False),
        ("a.b", "a.b.c", False),
        ("_INBOX.>", "_INBOX_review.x", False),  # a different first token
    ],
)
def test_subjects_overlap(a: str, b: str, overlap: bool) -> None:
    assert bus.subjects_overlap(a, b) is overlap
    assert bus.subjects_overlap(b, a) is overlap


def test_every_operation_is_answered_by_a_user_that_receives_it() -> None:
    """The reply rights come from the catalog's responders: each must exist in the table and
    subscribe to its subject, or it would hold rights for requests it never gets."""
    for op in OPERATIONS:
        u = bus.user(op.service)
        assert any(bus.subjects_overlap(p, op.subject) for p in u.subscribe), op.subject
