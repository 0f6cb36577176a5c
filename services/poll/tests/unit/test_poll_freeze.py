"""Thirty days after close (ADR-071 as amended 2026-10-15): guests purged, ideas frozen,
moderation read-only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import IdeaMark, PollParticipant
from quiz_poll.domain.freeze import (
    ensure_moderation_open,
    freeze,
    guests_to_purge,
    is_frozen,
)
from quiz_poll.domain.tally import BrainstormTally

CLOSED = datetime(2026, 10, 20, 10, 0, tzinfo=UTC)


def test_a_poll_freezes_thirty_days_after_it_closed() -> None:
    assert not is_frozen(None, CLOSED + timedelta(days=400))  # still running
    assert not is_frozen(CLOSED, CLOSED + timedelta(days=30) - timedelta(seconds=1))
    assert is_frozen(CLOSED, CLOSED + timedelta(days=30))


def test_moderation_is_read_only_once_frozen() -> None:
    ensure_moderation_open(CLOSED, CLOSED + timedelta(days=29))
    with pytest.raises(ContractError) as refused:
        ensure_moderation_open(CLOSED, CLOSED + timedelta(days=31))
    assert refused.value.code == ErrorCode.poll_frozen
    assert refused.value.status == 409


def test_the_frozen_poll_keeps_what_the_class_saw_after_the_guests_go() -> None:
    guest = PollParticipant(attempt_id="a1", kind="guest")
    account = PollParticipant(attempt_id="a2", kind="account", user_id="u2")
    tally = BrainstormTally(
        moderation=True, marks=[IdeaMark(key="bouge", status="approved", seen=("bouge",))]
    )
    tally.set_answer(guest.attempt_id, {"ideas": ["bouge", "juron"]})
    tally.set_answer(account.attempt_id, {"ideas": ["Bouge !"]})
    now = CLOSED + timedelta(days=30)
    frozen = freeze(tally, now)
    assert guests_to_purge([guest, account]) == ["a1"]
    for attempt in guests_to_purge([guest, account]):
        tally.remove_participant(attempt)
    assert tally.cloud()[0].count == 1  # the live tally would shrink
    assert frozen.tally.cloud[0].count == 2  # the frozen one does not
    assert frozen.tally.pending == 1 and frozen.board.answered == 2
    assert frozen.frozen_at == now
