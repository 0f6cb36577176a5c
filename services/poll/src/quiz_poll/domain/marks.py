"""Marks (ADR-071 §3–§4): visibility, clusters, and the teacher's actions on the board.

A mark is keyed by idea key, never by attempt, so it follows the text across edits and two
participants who wrote the same idea share it. A cluster is headed by the end of the
`mergedInto` chain. The teacher's actions (heig-quiz `applyIdeaAction`, FACTS D):

- approve / hide / reset set the status of each key (reset: back to unmoderated);
- merge moves the HEADS of the keys under the target's head and clears their labels; a key
  already in the target's cluster is skipped, so no `mergedInto` chain can loop;
- detach clears `mergedInto` of each key that has one;
- rename names the cluster through its head; a blank label clears it.

What an approval covers (issue 21): a key is one idea, but it has many spellings ("vélo",
"VELO 🖕"), and under moderation the room reads only the spellings approved (`IdeaMark.seen`,
as the room reads them, `room_text`). Approving records the spellings the teacher saw — those
the action names (`spellings`, the board page sends what it showed), else the text the board
lists for the key now — when somebody holds them; hide and reset clear them. A spelling typed
after the approval is listed on the board as new (`new_spellings`) and changes nothing the room
reads until the teacher approves it. Whatever the switch, the room reads `room_text` of a text.

Only one mark per key is written, and every written mark is the teacher's (source "teacher"):
the model never overwrites it afterwards. Each action returns the marks to upsert and the audit
record (`poll.ideas`, ADR-071 §6).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import (
    SEEN_MAX,
    DetachAction,
    IdeaMark,
    IdeaStatus,
    MergeAction,
    PollIdeaAction,
    PollSettings,
    RenameAction,
    StatusAction,
)
from quiz_poll.domain.ideas import idea_key, room_text

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


def mark_visible(mark: IdeaMark | None, moderation: bool) -> bool:
    """`is_visible`, and under moderation an approved idea also needs an approved spelling.

    An approval that covered no spelling (the key was approved while nobody held it, or a mark
    written before spellings were recorded) shows nothing until the teacher approves again.
    """
    if moderation and mark is not None and mark.status == "approved":
        return bool(mark.seen)
    return is_visible(status_of(mark), moderation)


def waiting_ideas(ideas: Sequence[str], marks: Marks, moderation: bool) -> list[str]:
    """The ideas of one answer that wait for the teacher: moderation on, not hidden, not visible.

    A pending idea, and an approved one with no approved spelling yet, are off the wall until
    the teacher approves them (ADR-071 §4); the participant page says so under each. A hidden
    idea is not listed (the teacher decided; it is never shown), nor one whose key is empty
    (only emoji or punctuation: no board lists it, so no approval will come). Moderation off: none.
    """
    if not moderation:
        return []
    out: list[str] = []
    for text in ideas:
        key = idea_key(text)
        mark = marks.get(key)
        if key and status_of(mark) != "hidden" and not mark_visible(mark, moderation):
            out.append(text)
    return out


def hidden_ideas(ideas: Sequence[str], marks: Marks) -> list[str]:
    """The ideas of one answer the teacher or the model hid (issue 34): whatever the switches,
    the room never reads them, so the participant page marks them "not shown" (a hidden idea
    looked like the others). Their order is the answer's; an empty key is never hidden."""
    return [
        text for text in ideas if (key := idea_key(text)) and status_of(marks.get(key)) == "hidden"
    ]


def room_spelling(ranked: Sequence[str], mark: IdeaMark | None, moderation: bool) -> str:
    """What the room reads of a key's typed text (before any correction).

    `ranked`: the spellings participants hold, most typed first (a tie: the first met). Under
    moderation, for an approved key: the best ranked spelling that was approved, else the first
    one approved (nobody holds it any more: the room keeps reading what the teacher saw). Else
    the best ranked. Always as the room reads it (`room_text`).
    """
    if moderation and mark is not None and mark.status == "approved" and mark.seen:
        approved = set(mark.seen)
        for raw in ranked:
            form = room_text(raw)
            if form in approved:
                return form
        return mark.seen[0]
    return room_text(ranked[0]) if ranked else ""


def new_spellings(ranked: Sequence[str], mark: IdeaMark | None) -> tuple[str, ...]:
    """An approved key's spellings held now and not approved, as the room would read them,
    in rank order, once each; () for a key that is not approved."""
    if mark is None or mark.status != "approved":
        return ()
    approved = set(mark.seen)
    out: dict[str, None] = {}
    for raw in ranked:
        form = room_text(raw)
        if form not in approved:
            out.setdefault(form)
    return tuple(out)


def _approved_spellings(
    mark: IdeaMark, ranked: Sequence[str], named: Sequence[str] | None
) -> tuple[str, ...]:
    """The spellings an approval records: those already approved, then the ones the teacher saw
    (named by the action, else the board's text) that somebody holds, at most SEEN_MAX."""
    held = {room_text(raw) for raw in ranked}
    saw = [room_text(s) for s in named] if named is not None else [room_text(r) for r in ranked[:1]]
    out = dict.fromkeys(mark.seen if mark.status == "approved" else ())
    for form in saw:
        if form in held:
            out.setdefault(form)
    return tuple(out)[:SEEN_MAX]


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

    def record(self) -> dict[str, object]:
        """What `poll_audit.record` stores (JSON): the change, the marks before and after."""
        return {
            "change": self.change,
            "before": {k: None if m is None else m.model_dump() for k, m in self.before.items()},
            "after": {k: m.model_dump() for k, m in self.after.items()},
        }


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


Spellings = Callable[[str], Sequence[str]]


def _no_spellings(_key: str) -> Sequence[str]:
    return ()


def apply_idea_action(
    current: Marks, change: PollIdeaAction, spellings: Spellings = _no_spellings
) -> ActionResult:
    """The marks a teacher action writes, whole, each the teacher's, with its audit record.

    `spellings(key)`: the key's spellings held now, most typed first (the board's text first),
    for what an approval covers (see the module docstring).
    """
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
            own = teachers(key)
            seen: tuple[str, ...] = ()
            if status == "approved":  # a named spelling counts for each key holding it
                seen = _approved_spellings(own, spellings(key), change.spellings)
            write(own.model_copy(update={"status": status, "seen": seen}))
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
        change=_audited(change),
        before={key: current.get(key) for key in written},
        after=dict(written),
    )
    return ActionResult(marks=out, audit=audit, keys=list(written))


def _audited(change: PollIdeaAction) -> dict[str, object]:
    """The action as audited: its fields, without an approval's absent `spellings`."""
    record: dict[str, object] = change.model_dump()
    if record.get("spellings", ()) is None:
        del record["spellings"]
    return record


def upsert(current: Marks, marks: Iterable[IdeaMark]) -> dict[str, IdeaMark]:
    """The marks after writing `marks` over `current` (what the repository's upsert does)."""
    merged = dict(current)
    for mark in marks:
        merged[mark.key] = mark
    return merged
