"""The rows poll's repository reads and writes: frozen, one per table (or per operation's input)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from quiz_contracts.poll import IdeaMark, MaskedPerson, PollAiError, PollParticipant


@dataclass(frozen=True, slots=True)
class PollRow:
    """One brainstorm as stored."""

    evaluation_id: str
    again_of: str | None
    teacher_id: str
    anonymous: bool
    classroom_id: str | None
    prompt: str
    max_ideas: int
    roster: tuple[MaskedPerson, ...]
    votes: bool
    moderation: bool
    ai: bool
    version: int
    opened_at: float
    closed_at: float | None
    frozen_at: float | None
    frozen_view: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Joined:
    """A joined attempt, and the account's name for masking (None for a guest)."""

    participant: PollParticipant
    person: MaskedPerson | None


@dataclass(frozen=True, slots=True)
class PollState:
    """Everything a replica needs to serve a poll, read in one transaction."""

    poll: PollRow
    answers: list[tuple[str, object]]
    marks: list[IdeaMark]
    joined: list[Joined]


@dataclass(frozen=True, slots=True)
class AiRunRow:
    """The row of `poll_ai_runs`."""

    lease_at: float | None
    heartbeat_at: float | None
    calls: int
    error: PollAiError | None
    error_at: float | None


@dataclass(frozen=True, slots=True)
class AnswerToSave:
    """One participant's whole answer, for `save_answers`."""

    evaluation_id: str
    participant: PollParticipant
    ideas: list[str]


@dataclass(frozen=True, slots=True)
class NewPoll:
    """What `open` stores."""

    evaluation_id: str
    again_of: str | None
    teacher_id: str
    anonymous: bool
    classroom_id: str | None
    prompt: str
    max_ideas: int
    roster: Sequence[MaskedPerson]
    moderation: bool
