"""The board and the cloud recomputed from every answer: ADR-071's tally, the reference.

This is the rule as the ADR states it ("the tally of a brainstorm reads every answer of the poll
on every change", heig-quiz `brainstormBoard` / `brainstormCloud`, FACTS D). The service keeps
an incremental tally (`tally.BrainstormTally`) instead; the tests hold it equal to this function
and `bench/poll.py` measures it against this one as the baseline.

The script, per FACTS D:
- Participants are read in order (their first answer's order). Each one's ideas are collapsed,
  trimmed, keyed; an empty key is skipped, and a participant counts once per key.
- A VARIANT is a key: its typed text, its participant count, its status (the mark's, else
  pending), its correction and source from its mark. The typed text is the spelling the most
  participants typed, a tie going to the first met (participants' order, then position in the
  answer): ADR-071 §5's "most frequent spelling", and the platform's rule (it keeps the first
  spelling met) for a tie. The order is the stored one (`poll_answers.ord`), so replicas and
  restarts agree.
- What the ROOM reads of a variant (issue 21): its correction, else its `room` spelling —
  under moderation, for an approved key, only a spelling the teacher approved (`IdeaMark.seen`;
  `marks.room_spelling`), and always as `ideas.room_text` shows it (no bidirectional control,
  no stack of combining marks). Under moderation an approved key with no approved spelling is
  not visible (`marks.mark_visible`). The board lists an approved key's other spellings as new.
- A CLUSTER is headed by the end of the `mergedInto` chain: `count` = participants with at least
  one visible idea in it, `total` = participants with any. Clusters are ordered by total
  descending then first seen; variants by count descending then first seen. The board label is
  the teacher's, else the shown text (correction, else typed text) of the top variant, which may
  be hidden: the board is staff only.
- `pending` = keys with no status, counted only with moderation on.
- The CLOUD (what the room reads): a bubble per cluster with count > 0; key = the smallest
  VISIBLE key (never the head's); label = the teacher's, else what the room reads of the first
  visible variant, both through `room_text`; count; sorted by count descending (stable), at most
  60.

One deliberate difference: `answered` counts participants holding at least one non-empty key
(the platform counts any non-blank idea, so "!!!" alone answered); an empty key is skipped
everywhere (issue 13).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from quiz_contracts.poll import CLOUD_CAP, IdeaMark, IdeaStatus
from quiz_poll.domain.ideas import ideas_of, keyed_ideas, room_text
from quiz_poll.domain.marks import (
    Marks,
    cluster_head,
    mark_visible,
    new_spellings,
    room_spelling,
    status_of,
)

# A participant's order and an idea's position in their answer: "first seen" as a sort key.
Seen = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Variant:
    """One idea key on the board: `text` as typed (staff), `room` as the room would read it."""

    key: str
    text: str
    correction: str | None
    ai: bool
    count: int
    status: IdeaStatus
    visible: bool = False
    room: str = ""
    new_spellings: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        """The board's reading of it: its correction, else what was typed."""
        return self.correction if self.correction is not None else self.text

    @property
    def room_shown(self) -> str:
        """What the room reads of it, once visible: its correction, else its room spelling."""
        return room_text(self.correction) if self.correction is not None else self.room


def bubble_label(teacher_label: str | None, shown: str, key: str) -> str:
    """A bubble's label: the teacher's, else what the room reads of the first visible variant,
    through `room_text`; the key (public already) if a teacher's label was only controls."""
    if teacher_label is None:
        return shown
    return room_text(teacher_label) or key


@dataclass(frozen=True, slots=True)
class Cluster:
    """Ideas under one head, its label, and its two participant counts."""

    key: str
    label: str
    renamed: bool
    count: int
    total: int
    variants: tuple[Variant, ...]


@dataclass(frozen=True, slots=True)
class Board:
    """The teacher's board: every idea, hidden and unmoderated included. Staff only."""

    answered: int
    pending: int
    clusters: tuple[Cluster, ...]


@dataclass(frozen=True, slots=True)
class Bubble:
    """One bubble of the cloud: nothing in it comes from a hidden or unmoderated idea."""

    key: str
    label: str
    count: int


@dataclass(slots=True)
class _Var:
    key: str
    spellings: dict[str, tuple[int, Seen]]  # spelling -> (holders, first met)
    count: int
    seen: Seen

    @property
    def ranked(self) -> list[str]:
        return ranked_spellings(self.spellings)


def ranked_spellings(spellings: Mapping[str, tuple[int, Seen]]) -> list[str]:
    """A key's spellings, most typed first, a tie going to the first met (its typed text is
    the first)."""
    return [t for t, _ in sorted(spellings.items(), key=lambda item: (-item[1][0], item[1][1]))]


@dataclass(slots=True)
class _Clu:
    seen: Seen
    everyone: set[int]
    visible: set[int]


def brainstorm_board(
    answers: Iterable[tuple[Hashable, object]], marks: Marks, moderation: bool
) -> Board:
    """THE board from every answer: `answers` is (participant, payload) in participants' order."""
    variants: dict[str, _Var] = {}
    clusters: dict[str, _Clu] = {}
    heads: dict[str, str] = {}
    answered = 0
    for rank, (_participant, payload) in enumerate(answers):
        held = keyed_ideas(ideas_of(payload))
        if held:
            answered += 1
        for key, (index, text) in held.items():
            seen = (rank, index)
            variant = variants.get(key)
            if variant is None:
                variants[key] = _Var(key, {text: (1, seen)}, 1, seen)
            else:
                variant.count += 1
                n, first = variant.spellings.get(text, (0, seen))
                variant.spellings[text] = (n + 1, min(first, seen))
                if seen < variant.seen:  # only when a participant's ideas are out of order
                    variant.seen = seen
            head = heads.get(key)
            if head is None:
                head = heads[key] = cluster_head(key, marks)
            cluster = clusters.get(head)
            if cluster is None:
                cluster = clusters[head] = _Clu(seen, set(), set())
            elif seen < cluster.seen:
                cluster.seen = seen
            cluster.everyone.add(rank)
            if mark_visible(marks.get(key), moderation):
                cluster.visible.add(rank)

    members: dict[str, list[_Var]] = {}
    for variant in variants.values():
        members.setdefault(heads[variant.key], []).append(variant)

    built: list[tuple[int, Seen, Cluster]] = []
    for head, cluster in clusters.items():
        listed = sorted(members[head], key=lambda v: (-v.count, v.seen))
        out = tuple(
            variant_of(v.key, v.ranked, v.count, marks.get(v.key), moderation) for v in listed
        )
        head_mark = marks.get(head)
        label = head_mark.label if head_mark is not None else None
        built.append(
            (
                len(cluster.everyone),
                cluster.seen,
                Cluster(
                    key=head,
                    label=label if label is not None else (out[0].shown if out else head),
                    renamed=label is not None,
                    count=len(cluster.visible),
                    total=len(cluster.everyone),
                    variants=out,
                ),
            )
        )
    built.sort(key=lambda entry: (-entry[0], entry[1]))
    pending = (
        sum(1 for key in variants if status_of(marks.get(key)) == "pending") if moderation else 0
    )
    return Board(answered=answered, pending=pending, clusters=tuple(c for _, _, c in built))


def variant_of(
    key: str, ranked: Sequence[str], count: int, mark: IdeaMark | None, moderation: bool
) -> Variant:
    """A board variant from its spellings (most typed first) and its mark."""
    return Variant(
        key=key,
        text=ranked[0],
        correction=mark.correction if mark is not None else None,
        ai=mark is not None and mark.source == "ai",
        count=count,
        status=status_of(mark),
        visible=mark_visible(mark, moderation),
        room=room_spelling(ranked, mark, moderation),
        new_spellings=new_spellings(ranked, mark),
    )


def brainstorm_cloud(board: Board, moderation: bool, cap: int = CLOUD_CAP) -> list[Bubble]:
    """What the room may see of a board: one bubble per cluster holding a visible idea.

    `moderation` must be the board's own switch: each variant carries its visibility and what
    the room reads of it, computed with it (`brainstorm_board`).
    """
    bubbles: list[Bubble] = []
    for cluster in board.clusters:
        if cluster.count <= 0:
            continue
        visible = [v for v in cluster.variants if v.visible]
        if not visible:  # count > 0 implies one; the guard keeps the rule total
            continue
        key = min(v.key for v in visible)
        teachers = cluster.label if cluster.renamed else None
        label = bubble_label(teachers, visible[0].room_shown, key)
        bubbles.append(Bubble(key, label, cluster.count))
    bubbles.sort(key=lambda b: -b.count)  # stable: ties keep the board's order
    return bubbles[:cap]


def recompute_cloud(
    answers: Sequence[tuple[Hashable, object]], marks: Marks, moderation: bool, cap: int = CLOUD_CAP
) -> tuple[Board, list[Bubble]]:
    """The board and its cloud from every answer: the ADR's tally on every change."""
    board = brainstorm_board(answers, marks, moderation)
    return board, brainstorm_cloud(board, moderation, cap)
