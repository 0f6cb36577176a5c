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
  participants typed, a tie going to the smallest (code point order): ADR-071 §5's "most
  frequent spelling", made deterministic (the platform keeps the first spelling met, which
  depends on the order answers are read in, so two replicas or a restart could disagree).
- A CLUSTER is headed by the end of the `mergedInto` chain: `count` = participants with at least
  one visible idea in it, `total` = participants with any. Clusters are ordered by total
  descending then first seen; variants by count descending then first seen. The board label is
  the teacher's, else the shown text (correction, else typed text) of the top variant, which may
  be hidden: the board is staff only.
- `pending` = keys with no status, counted only with moderation on.
- The CLOUD (what the room reads): a bubble per cluster with count > 0; key = the smallest
  VISIBLE key (never the head's); label = the teacher's, else the shown text of the first visible
  variant; count; sorted by count descending (stable), at most 60.

One deliberate difference: `answered` counts participants holding at least one non-empty key
(the platform counts any non-blank idea, so "!!!" alone answered); an empty key is skipped
everywhere (issue 13).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from quiz_contracts.poll import CLOUD_CAP, IdeaStatus
from quiz_poll.domain.ideas import ideas_of, keyed_ideas
from quiz_poll.domain.marks import Marks, cluster_head, is_visible, status_of

# A participant's order and an idea's position in their answer: "first seen" as a sort key.
Seen = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Variant:
    """One idea key on the board."""

    key: str
    text: str
    correction: str | None
    ai: bool
    count: int
    status: IdeaStatus

    @property
    def shown(self) -> str:
        """What the room reads of it: its correction, else what was typed."""
        return self.correction if self.correction is not None else self.text


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
    spellings: dict[str, int]
    count: int
    seen: Seen

    @property
    def text(self) -> str:
        return spelling_of(self.spellings)


def spelling_of(spellings: dict[str, int]) -> str:
    """A key's typed text: the most typed spelling, a tie going to the smallest."""
    return min(spellings.items(), key=lambda item: (-item[1], item[0]))[0]


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
                variants[key] = _Var(key, {text: 1}, 1, seen)
            else:
                variant.count += 1
                variant.spellings[text] = variant.spellings.get(text, 0) + 1
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
            if is_visible(status_of(marks.get(key)), moderation):
                cluster.visible.add(rank)

    members: dict[str, list[_Var]] = {}
    for variant in variants.values():
        members.setdefault(heads[variant.key], []).append(variant)

    built: list[tuple[int, Seen, Cluster]] = []
    for head, cluster in clusters.items():
        listed = sorted(members[head], key=lambda v: (-v.count, v.seen))
        out = tuple(_variant(v, marks) for v in listed)
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


def _variant(v: _Var, marks: Marks) -> Variant:
    mark = marks.get(v.key)
    return Variant(
        key=v.key,
        text=v.text,
        correction=mark.correction if mark is not None else None,
        ai=mark is not None and mark.source == "ai",
        count=v.count,
        status=status_of(mark),
    )


def brainstorm_cloud(board: Board, moderation: bool, cap: int = CLOUD_CAP) -> list[Bubble]:
    """What the room may see of a board: one bubble per cluster holding a visible idea."""
    bubbles: list[Bubble] = []
    for cluster in board.clusters:
        if cluster.count <= 0:
            continue
        visible = [v for v in cluster.variants if is_visible(v.status, moderation)]
        if not visible:  # count > 0 implies one; the guard keeps the rule total
            continue
        label = cluster.label if cluster.renamed else visible[0].shown
        bubbles.append(Bubble(min(v.key for v in visible), label, cluster.count))
    bubbles.sort(key=lambda b: -b.count)  # stable: ties keep the board's order
    return bubbles[:cap]


def recompute_cloud(
    answers: Sequence[tuple[Hashable, object]], marks: Marks, moderation: bool, cap: int = CLOUD_CAP
) -> tuple[Board, list[Bubble]]:
    """The board and its cloud from every answer: the ADR's tally on every change."""
    board = brainstorm_board(answers, marks, moderation)
    return board, brainstorm_cloud(board, moderation, cap)
