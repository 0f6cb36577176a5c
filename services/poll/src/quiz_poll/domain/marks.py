"""Marks (ADR-071 §3–§4): visibility, clusters, and the teacher's actions on the board.

A mark is keyed by idea key, never by attempt, so it follows the text across edits and two
participants who wrote the same idea share it. A cluster is headed by the end of the
`mergedInto` chain. The teacher's actions (heig-quiz `applyIdeaAction`, FACTS D):

- approve / hide / reset set the status of each key (reset: back to unmoderated);
- merge moves the HEADS of the keys under the target's head and clears their labels; a key
  already in the target's cluster is skipped, so no `mergedInto` chain can loop;
- detach clears `mergedInto` of each key that has one;
- rename names the cluster through its head; a blank label clears it.

Only one mark per key is written, and every written mark is the teacher's (source "teacher"):
the model never overwrites it afterwards. Each action returns the marks to upsert and the audit
record (`poll.ideas`, ADR-071 §6).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import (
    DetachAction,
    IdeaMark,
    IdeaStatus,
    MergeAction,
    PollIdeaAction,
    PollSettings,
    RenameAction,
    StatusAction,
)
from quiz_poll.domain.ideas import idea_key

AUDIT_ACTION = "poll.ideas"

Marks = Mapping[str, IdeaMark]


def blank_mark(key: str) -> IdeaMark:
    """A mark nobody wrote yet: unmoderated, alone, unnamed, uncorrected."""
    return IdeaMark(key=key)


def status_of(mark: IdeaMark | None) -> IdeaStatus:
    """approved, hidden, or pending (no mark, or a mark with no status)."""
    if mark is None or mark.status is None:
        return "pending"
    return mark.status


def is_visible(status: IdeaStatus, moderation: bool) -> bool:
    """Moderation on: approved only. Off: everything but hidden. Hidden: never (ADR-071 §4)."""
    return status == "approved" or (status == "pending" and not moderation)


def default_settings(anonymous: bool) -> PollSettings:
    """A new brainstorm's switches: moderation ON for an anonymous poll, OFF for a classroom's."""
    return PollSettings(anonymous=anonymous, moderation=anonymous)


def cluster_head(key: str, marks: Marks) -> str:
    """The head of `key`'s cluster: its `mergedInto` chain followed to the end.

    Actions never write a loop, but two writers racing could (a model's attach and a teacher's
    merge). A loop is stopped when read, and its head is its smallest key, so every member of
    the loop agrees on one cluster (the platform stops at the key before the repeat, which puts
    the members of one loop in different clusters depending on where the walk started).
    """
    seen: list[str] = [key]
    index = {key: 0}
    current = key
    while True:
        mark = marks.get(current)
        nxt = mark.merged_into if mark is not None else None
        if nxt is None:
            return current
        if nxt in index:
            return min(seen[index[nxt] :])
        index[nxt] = len(seen)
        seen.append(nxt)
        current = nxt


@dataclass(frozen=True)
class IdeaAudit:
    """What one teacher action wrote, for the audit log (`poll.ideas`): before and after."""

    action: str
    change: dict[str, object]
    before: dict[str, IdeaMark | None]
    after: dict[str, IdeaMark]
    action_name: str = AUDIT_ACTION


@dataclass(frozen=True)
class ActionResult:
    """The marks to upsert (one per key, whole) and the audit record of the action."""

    marks: list[IdeaMark]
    audit: IdeaAudit
    keys: list[str] = field(default_factory=list)


def _require_keys(keys: Iterable[str]) -> None:
    """400 for a key that is not a normalised idea key: it could only write a mark nobody has."""
    bad = [key for key in keys if idea_key(key) != key]
    if bad:
        raise ContractError(
            ErrorCode.invalid_request,
            "Not an idea key: send the keys the board lists.",
            details={"keys": bad[:10]},
        )


def apply_idea_action(current: Marks, change: PollIdeaAction) -> ActionResult:
    """The marks a teacher action writes, whole, each the teacher's, with its audit record."""
    marks = dict(current)
    written: dict[str, IdeaMark] = {}

    def teachers(key: str) -> IdeaMark:
        mark = marks.get(key) or blank_mark(key)
        return mark if mark.source == "teacher" else mark.model_copy(update={"source": "teacher"})

    def write(mark: IdeaMark) -> None:
        marks[mark.key] = mark
        written[mark.key] = mark

    if isinstance(change, StatusAction):
        _require_keys(change.keys)
        status = {"approve": "approved", "hide": "hidden", "reset": None}[change.action]
        for key in change.keys:
            write(teachers(key).model_copy(update={"status": status}))
    elif isinstance(change, MergeAction):
        _require_keys([*change.keys, change.into])
        into = cluster_head(change.into, marks)
        for key in change.keys:
            head = cluster_head(key, marks)
            if head == into:  # already in the target's cluster: nothing to move, no loop
                continue
            write(teachers(head).model_copy(update={"merged_into": into, "label": None}))
    elif isinstance(change, DetachAction):
        _require_keys(change.keys)
        for key in change.keys:
            mark = marks.get(key)
            if mark is not None and mark.merged_into is not None:
                write(teachers(key).model_copy(update={"merged_into": None}))
    elif isinstance(change, RenameAction):
        _require_keys([change.key])
        label = (change.label or "").strip() or None
        write(teachers(cluster_head(change.key, marks)).model_copy(update={"label": label}))
    else:  # pragma: no cover - the discriminated union is closed
        raise TypeError(type(change))

    out = list(written.values())
    audit = IdeaAudit(
        action=change.action,
        change=change.model_dump(),
        before={key: current.get(key) for key in written},
        after=dict(written),
    )
    return ActionResult(marks=out, audit=audit, keys=list(written))


def upsert(current: Marks, marks: Iterable[IdeaMark]) -> dict[str, IdeaMark]:
    """The marks after writing `marks` over `current` (what the repository's upsert does)."""
    merged = dict(current)
    for mark in marks:
        merged[mark.key] = mark
    return merged
