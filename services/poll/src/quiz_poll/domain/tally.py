"""The incremental tally: the board and the cloud kept up to date one answer change at a time.

`board.brainstorm_board` reads every answer on every change, which ADR-071 accepts "at
lecture-hall size" and says a larger audience would need cached. This is that cache, exact: after
any sequence of answers, marks and switches, `board()` and `cloud()` equal the reference's on the
same answers (tests), so the rule is stated once, in `board.py`.

Costs (n = a participant's ideas, at most 10; log terms from sorted lists):
- `set_answer`: O(n log) — only the keys that changed are touched;
- `cloud()`: O(bubbles) — clusters are kept sorted in cloud order;
- `apply_marks` / `set_moderation`: the affected clusters are rebuilt from their keys' holders
  (a merge, a hide: one or two clusters; the moderation switch: all of them);
- `board()`: O(ideas) — the staff view is read on demand, not per answer.

What is kept:
- per participant, their order (first answer first) and the keys they hold, each with the
  position and text of its first spelling in their answer;
- per key, its holders sorted by (participant order, position): the first is the key's "first
  seen"; and its spellings ranked, for its typed text (the most typed, a tie: the first met)
  and for what the room reads of it (the best ranked approved spelling under moderation);
- per cluster (head), each holder's number of keys in it and of VISIBLE keys in it, so `total`
  and `count` count each participant once; its members sorted by first seen, its visible keys
  (the bubble's key is the smallest), its visible variants sorted as the board sorts them (the
  label is the first one's shown text);
- the clusters sorted in cloud order: count descending, then total descending, then first seen
  (the cloud sorts by count, stably over the board's total-then-first-seen order).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sortedcontainers import SortedList

from quiz_contracts.poll import CLOUD_CAP, IdeaMark
from quiz_poll.domain.board import Board, Bubble, Cluster, Variant, bubble_label, variant_of
from quiz_poll.domain.ideas import ideas_of, keyed_ideas, room_text
from quiz_poll.domain.marks import cluster_head, mark_visible, room_spelling, status_of

# (participant order, position in their answer, text): a key's holders sort by it.
Holder = tuple[int, int, str]
Seen = tuple[int, int]


@dataclass(slots=True)
class _Key:
    """One idea key somebody holds."""

    head: str
    visible: bool
    pending: bool
    holders: SortedList = field(default_factory=SortedList)
    # spelling -> its holders' (order, position), and (-holders, first met, spelling) sorted:
    # the typed text is the most typed spelling, a tie going to the first met
    # (board.ranked_spellings).
    by_text: dict[str, SortedList] = field(default_factory=dict)
    ranked: SortedList = field(default_factory=SortedList)

    @property
    def seen(self) -> Seen:
        first = self.holders[0]
        return (first[0], first[1])

    @property
    def text(self) -> str:
        return str(self.ranked[0][2])

    def spellings(self) -> list[str]:
        """The spellings held, most typed first (a tie: the first met)."""
        return [entry[2] for entry in self.ranked]

    def hold(self, holder: Holder) -> None:
        self.holders.add(holder)
        self._respell(holder, +1)

    def release(self, holder: Holder) -> None:
        self.holders.remove(holder)
        self._respell(holder, -1)

    def _respell(self, holder: Holder, delta: int) -> None:
        text = holder[2]
        places = self.by_text.get(text)
        if places is None:
            places = self.by_text[text] = SortedList()
        else:
            self.ranked.remove((-len(places), places[0], text))
        if delta > 0:
            places.add((holder[0], holder[1]))
        else:
            places.remove((holder[0], holder[1]))
        if places:
            self.ranked.add((-len(places), places[0], text))
        else:
            del self.by_text[text]

    @property
    def count(self) -> int:
        return len(self.holders)


@dataclass(slots=True)
class _Cluster:
    """One head and what the cloud and the board need of it."""

    head: str
    members: set[str] = field(default_factory=set)
    # participant order -> [keys held in the cluster, visible keys held in the cluster]
    people: dict[int, list[int]] = field(default_factory=dict)
    count: int = 0  # participants with a visible key in the cluster
    by_seen: SortedList = field(default_factory=SortedList)  # (seen, key) of members
    visible_keys: SortedList = field(default_factory=SortedList)
    visible_variants: SortedList = field(default_factory=SortedList)  # (-count, seen, key)
    listed: tuple[int, int, Seen, str] | None = None  # its entry in the cloud order

    @property
    def total(self) -> int:
        return len(self.people)


class _Marks(dict[str, IdeaMark]):
    """The poll's marks by key, and which keys merge into each (to find what a change moves)."""

    def __init__(self) -> None:
        super().__init__()
        self._children: dict[str, set[str]] = {}  # key -> keys whose mark merges into it

    def put(self, mark: IdeaMark) -> None:
        old = self.get(mark.key)
        if old is not None and old.merged_into is not None:
            self._children.get(old.merged_into, set()).discard(mark.key)
        self[mark.key] = mark
        if mark.merged_into is not None:
            self._children.setdefault(mark.merged_into, set()).add(mark.key)

    def reach(self, changed: Iterable[str]) -> set[str]:
        """The changed keys and every key whose merge chain passes through one of them: each
        may change head or cluster."""
        reach: set[str] = set()
        queue = deque(changed)
        while queue:
            key = queue.popleft()
            if key not in reach:
                reach.add(key)
                queue.extend(self._children.get(key, ()))
        return reach


class BrainstormTally:
    """One poll's tally, updated per answer change; the board and the cloud on demand."""

    def __init__(self, *, moderation: bool, marks: Iterable[IdeaMark] = ()) -> None:
        self._moderation = moderation
        self._marks = _Marks()
        for mark in marks:
            self._marks.put(mark)
        self._order: dict[Hashable, int] = {}  # participant -> order of their first answer
        self._next_order = 0
        self._held: dict[int, dict[str, tuple[int, str]]] = {}
        self._joined: set[Hashable] = set()
        self._answered = 0
        self._pending = 0
        self._keys: dict[str, _Key] = {}
        self._clusters: dict[str, _Cluster] = {}
        self._cloud_order: SortedList = SortedList()

    # --- reading --------------------------------------------------------------------------

    @property
    def moderation(self) -> bool:
        return self._moderation

    @property
    def marks(self) -> Mapping[str, IdeaMark]:
        return self._marks

    @property
    def joined(self) -> int:
        """Participants who joined or answered (attempts opened)."""
        return len(self._joined)

    @property
    def answered(self) -> int:
        """Participants holding at least one non-empty key."""
        return self._answered

    @property
    def pending(self) -> int:
        """Keys awaiting moderation; 0 with moderation off (FACTS D)."""
        return self._pending if self._moderation else 0

    def keys(self) -> list[str]:
        """Every key somebody holds, in no particular order."""
        return list(self._keys)

    def holds(self, participant: Hashable) -> list[str]:
        """The keys a participant holds now."""
        order = self._order.get(participant)
        return [] if order is None else list(self._held.get(order, {}))

    def cloud(self, cap: int = CLOUD_CAP) -> list[Bubble]:
        """The room's cloud, in O(bubbles): equal to `brainstorm_cloud` of the board."""
        bubbles: list[Bubble] = []
        for neg_count, _neg_total, _seen, head in self._cloud_order:
            if neg_count >= 0 or len(bubbles) >= cap:
                break
            cluster = self._clusters[head]
            first = cluster.visible_variants[0][2]
            mark = self._marks.get(head)
            key = cluster.visible_keys[0]
            label = mark.label if mark is not None else None
            shown = self._room_shown(first) if label is None else ""
            bubbles.append(
                Bubble(key=key, label=bubble_label(label, shown, key), count=cluster.count)
            )
        return bubbles

    def board(self) -> Board:
        """The whole board (staff view), in board order: equal to `brainstorm_board`."""
        clusters = sorted(self._clusters.values(), key=lambda c: (-c.total, c.by_seen[0][0]))
        out: list[Cluster] = []
        for cluster in clusters:
            ordered = sorted(
                cluster.members, key=lambda k: (-self._keys[k].count, self._keys[k].seen)
            )
            variants = tuple(self._variant(key) for key in ordered)
            mark = self._marks.get(cluster.head)
            label = mark.label if mark is not None else None
            out.append(
                Cluster(
                    key=cluster.head,
                    label=label if label is not None else variants[0].shown,
                    renamed=label is not None,
                    count=cluster.count,
                    total=cluster.total,
                    variants=variants,
                )
            )
        return Board(answered=self._answered, pending=self.pending, clusters=tuple(out))

    # --- writing: answers -----------------------------------------------------------------

    def join(self, participant: Hashable) -> None:
        """A participant opened an attempt (counts in `joined`)."""
        self._joined.add(participant)

    def set_answer(self, participant: Hashable, payload: object) -> None:
        """The participant's whole answer now (`{ideas: [...]}`): only changed keys are touched."""
        self._joined.add(participant)
        order = self._order.get(participant)
        if order is None:
            order = self._order[participant] = self._next_order
            self._next_order += 1
        before = self._held.get(order, {})
        after = keyed_ideas(ideas_of(payload))
        for key, (index, text) in before.items():
            now = after.get(key)
            if now is None:
                self._drop(order, key, (order, index, text))
            elif now != (index, text):
                self._move(key, (order, index, text), (order, now[0], now[1]))
        for key, (index, text) in after.items():
            if key not in before:
                self._add(order, key, (order, index, text))
        if after:
            self._held[order] = after
        else:
            self._held.pop(order, None)
        self._answered += bool(after) - bool(before)

    def load(self, answers: Iterable[tuple[Hashable, object]]) -> None:
        """Stored answers, in participants' order, into an empty tally: the clusters built once."""
        if self._order:
            raise ValueError("load() fills an empty tally; use set_answer() after it")
        holders: dict[str, list[Holder]] = {}
        for participant, payload in answers:
            if participant in self._order:
                raise ValueError(f"participant {participant!r} twice: one stored answer each")
            self._joined.add(participant)
            order = self._order[participant] = self._next_order
            self._next_order += 1
            held = keyed_ideas(ideas_of(payload))
            if not held:
                continue
            self._held[order] = held
            self._answered += 1
            for key, (index, text) in held.items():
                holders.setdefault(key, []).append((order, index, text))
        for key, entries in holders.items():
            # pending/visible/head are set by the rebuild, which counts `pending` from False.
            state = self._keys[key] = _Key(
                head=key, visible=False, pending=False, holders=SortedList(entries)
            )
            for order, index, text in entries:  # in holder order: the first add is the first met
                places = state.by_text.get(text)
                if places is None:
                    places = state.by_text[text] = SortedList()
                places.add((order, index))
            state.ranked = SortedList(
                (-len(places), places[0], text) for text, places in state.by_text.items()
            )
        self._rebuild(set(self._keys))

    def remove_participant(self, participant: Hashable) -> None:
        """Forget a participant's ideas and attempt (a purged guest): one coming back would be
        a new participant, read after everyone who answered before (as the stored answers are)."""
        if participant in self._order:
            self.set_answer(participant, None)
            del self._order[participant]
        self._joined.discard(participant)

    # --- writing: marks and switches ------------------------------------------------------

    def set_moderation(self, on: bool) -> None:
        """The moderation switch: every key's visibility may change, so every cluster rebuilds."""
        if on == self._moderation:
            return
        self._moderation = on
        self._rebuild(set(self._keys))

    def apply_marks(self, marks: Iterable[IdeaMark]) -> None:
        """Marks upserted (an action, the model's verdicts): the clusters they touch rebuild."""
        written = {mark.key: mark for mark in marks}  # the last one written per key wins
        changed = [key for key, mark in written.items() if self._marks.get(key) != mark]
        if not changed:
            return
        reach = self._marks.reach(changed)
        for key in changed:
            self._marks.put(written[key])
        self._rebuild({key for key in reach if key in self._keys})

    # --- internals ------------------------------------------------------------------------

    def _room_shown(self, key: str) -> str:
        """What the room reads of a visible key (board.Variant.room_shown), without building
        its variant: the correction, else the best approved spelling (room_text)."""
        mark = self._marks.get(key)
        if mark is not None and mark.correction is not None:
            return room_text(mark.correction)
        return room_spelling(self._keys[key].spellings(), mark, self._moderation)

    def spellings(self, key: str) -> list[str]:
        """The spellings held of `key`, most typed first (the board's text first); [] if none."""
        state = self._keys.get(key)
        return [] if state is None else state.spellings()

    def _variant(self, key: str) -> Variant:
        state = self._keys[key]
        return variant_of(
            key, state.spellings(), state.count, self._marks.get(key), self._moderation
        )

    def _unlist(self, cluster: _Cluster) -> None:
        if cluster.listed is not None:
            self._cloud_order.remove(cluster.listed)
            cluster.listed = None

    def _relist(self, cluster: _Cluster) -> None:
        if cluster.members:
            entry = (-cluster.count, -cluster.total, cluster.by_seen[0][0], cluster.head)
            self._cloud_order.add(entry)
            cluster.listed = entry
        else:
            del self._clusters[cluster.head]

    def _hide_key(self, cluster: _Cluster, key: str, state: _Key) -> None:
        """Take the key's sorted entries out before they change (they are re-added after)."""
        cluster.by_seen.remove((state.seen, key))
        if state.visible:
            cluster.visible_variants.remove((-state.count, state.seen, key))

    def _show_key(self, cluster: _Cluster, key: str, state: _Key) -> None:
        cluster.by_seen.add((state.seen, key))
        if state.visible:
            cluster.visible_variants.add((-state.count, state.seen, key))

    def _new_key(self, key: str) -> tuple[_Key, _Cluster]:
        mark = self._marks.get(key)
        status = status_of(mark)
        head = cluster_head(key, self._marks)
        state = _Key(
            head=head, visible=mark_visible(mark, self._moderation), pending=status == "pending"
        )
        self._keys[key] = state
        self._pending += state.pending
        cluster = self._clusters.get(head)
        if cluster is None:
            cluster = self._clusters[head] = _Cluster(head=head)
        cluster.members.add(key)
        if state.visible:
            cluster.visible_keys.add(key)
        return state, cluster

    def _add(self, order: int, key: str, holder: Holder) -> None:
        state = self._keys.get(key)
        if state is None:
            state, cluster = self._new_key(key)
            self._unlist(cluster)
        else:
            cluster = self._clusters[state.head]
            self._unlist(cluster)
            self._hide_key(cluster, key, state)
        state.hold(holder)
        person = cluster.people.get(order)
        if person is None:
            person = cluster.people[order] = [0, 0]
        person[0] += 1
        if state.visible:
            person[1] += 1
            if person[1] == 1:
                cluster.count += 1
        self._show_key(cluster, key, state)
        self._relist(cluster)

    def _drop(self, order: int, key: str, holder: Holder) -> None:
        state = self._keys[key]
        cluster = self._clusters[state.head]
        self._unlist(cluster)
        self._hide_key(cluster, key, state)
        state.release(holder)
        person = cluster.people[order]
        person[0] -= 1
        if state.visible:
            person[1] -= 1
            if person[1] == 0:
                cluster.count -= 1
        if person[0] == 0:
            del cluster.people[order]
        if state.holders:
            self._show_key(cluster, key, state)
        else:
            del self._keys[key]
            self._pending -= state.pending
            cluster.members.discard(key)
            if state.visible:
                cluster.visible_keys.remove(key)
        self._relist(cluster)

    def _move(self, key: str, old: Holder, new: Holder) -> None:
        """The same key, at another position or spelling in the participant's answer."""
        state = self._keys[key]
        cluster = self._clusters[state.head]
        self._unlist(cluster)
        self._hide_key(cluster, key, state)
        state.release(old)
        state.hold(new)
        self._show_key(cluster, key, state)
        self._relist(cluster)

    def _rebuild(self, keys: set[str]) -> None:
        """Recompute the clusters of `keys` (before and after) from their keys' holders."""
        if not keys:
            return
        heads = {self._keys[key].head for key in keys}
        for key in keys:
            state = self._keys[key]
            mark = self._marks.get(key)
            status = status_of(mark)
            self._pending += (status == "pending") - state.pending
            state.pending = status == "pending"
            state.visible = mark_visible(mark, self._moderation)
            state.head = cluster_head(key, self._marks)
            heads.add(state.head)
        members: set[str] = set()
        for head in heads:
            cluster = self._clusters.get(head)
            if cluster is not None:
                self._unlist(cluster)
                members |= cluster.members
                del self._clusters[head]
        members |= keys
        for key in members:
            state = self._keys[key]
            cluster = self._clusters.get(state.head)
            if cluster is None:
                cluster = self._clusters[state.head] = _Cluster(head=state.head)
            cluster.members.add(key)
            for holder in state.holders:
                person = cluster.people.get(holder[0])
                if person is None:
                    person = cluster.people[holder[0]] = [0, 0]
                person[0] += 1
                if state.visible:
                    person[1] += 1
            if state.visible:
                cluster.visible_keys.add(key)
            self._show_key(cluster, key, state)
        for head in {self._keys[key].head for key in members}:
            cluster = self._clusters[head]
            cluster.count = sum(1 for _, visible in cluster.people.values() if visible > 0)
            self._relist(cluster)


def tally_from_answers(
    answers: Sequence[tuple[Hashable, object]], marks: Iterable[IdeaMark], moderation: bool
) -> BrainstormTally:
    """A tally loaded from stored answers (in participants' order) and marks: a service restart."""
    tally = BrainstormTally(moderation=moderation, marks=marks)
    tally.load(answers)
    return tally
