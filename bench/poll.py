"""The brainstorm tally after one more answer: incremental vs ADR-071's recompute, same run.

Run: `uv run python bench/poll.py [--participants 10000] [--ideas 5] [--updates 2000]`.

A lecture hall far larger than the ADR's ("hundreds of ideas"): 10,000 participants holding 5
ideas each, drawn from a Zipf-like vocabulary with the spellings a room produces (case,
articles, elision, punctuation) and a long tail of ideas typed once. Moderation is on; a share of
the keys is approved, some hidden, some merged, some corrected by the model, a few clusters
renamed — so every rule of the cloud is exercised.

One update is what a phone sends on Add or Remove: the participant's whole answer, one idea
more or one less. After it, the wall's and the phones' frames are built and encoded (JSON), as
the service will send them. Two ways:
- baseline: the ADR's tally, reading every answer on every change (`recompute_cloud`);
- incremental: `BrainstormTally.set_answer` then `cloud()` (target ≤ 10 ms).
The two clouds are checked equal before timing. Prints per-update p50/p99/mean and the ratio.

Later sections (the HTTP and SSE wiring comes with the servicekit rework) will add, each
against a baseline in the same run:
- answers ingested per second through the HTTP route (target ≥ 1,000/s);
- 2,000 concurrent SSE clients receiving a frame after an answer (target p95 ≤ 1 s).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

from quiz_contracts.poll import IdeaMark, PollSettings
from quiz_poll.domain.board import Bubble, recompute_cloud
from quiz_poll.domain.ideas import idea_key
from quiz_poll.domain.tally import tally_from_answers
from quiz_poll.domain.views import frames, snapshot

NOW = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)
SETTINGS = PollSettings(anonymous=True, moderation=True, votes=True)
SYLLABLES = ["ra", "mi", "to", "lu", "ve", "ka", "no", "pi", "sé", "dou", "an", "ri", "bo", "fé"]


def word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))


def vocabulary(rng: random.Random, size: int) -> list[str]:
    """Distinct ideas of one to three words."""
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < size:
        idea = " ".join(word(rng) for _ in range(rng.choice((1, 1, 2, 3))))
        if idea_key(idea) not in seen:
            seen.add(idea_key(idea))
            out.append(idea)
    return out


def spelling(rng: random.Random, idea: str) -> str:
    """One way a participant types it: the same key, another text."""
    form = rng.randrange(6)
    if form == 0:
        return idea.capitalize()
    if form == 1:
        return f"la {idea}"
    if form == 2:
        return f"l'{idea}"
    if form == 3:
        return f"{idea} !"
    if form == 4:
        return idea.upper()
    return idea


class Room:
    """Answers drawn from a shared, skewed vocabulary plus a long tail."""

    def __init__(self, seed: int, participants: int, per: int) -> None:
        self.rng = random.Random(seed)
        self.common = vocabulary(self.rng, 1500)
        self.weights = [1 / (rank + 1) ** 1.1 for rank in range(len(self.common))]
        self.per = per
        self.answers: dict[str, list[str]] = {f"p{i}": self.ideas(per) for i in range(participants)}

    def idea(self) -> str:
        if self.rng.random() < 0.15:  # the long tail: typed once
            return f"{word(self.rng)} {word(self.rng)} {self.rng.randrange(10**6)}"
        return spelling(self.rng, self.rng.choices(self.common, self.weights)[0])

    def ideas(self, n: int) -> list[str]:
        return [self.idea() for _ in range(n)]

    def marks(self) -> list[IdeaMark]:
        """Moderation as a teacher and the model leave it mid-lecture."""
        out: list[IdeaMark] = []
        keys = [idea_key(i) for i in self.common]
        for rank, key in enumerate(keys[:600]):
            roll = self.rng.random()
            if roll < 0.65:
                correction = key.capitalize() if self.rng.random() < 0.3 else None
                source = "ai" if correction else "teacher"
                out.append(
                    IdeaMark(key=key, status="approved", correction=correction, source=source)
                )
            elif roll < 0.72:
                out.append(IdeaMark(key=key, status="hidden"))
            elif roll < 0.85 and rank > 10:
                out.append(
                    IdeaMark(key=key, status="approved", merged_into=keys[self.rng.randrange(10)])
                )
        out += [IdeaMark(key=keys[i], status="approved", label=f"Thème {i}") for i in range(3)]
        return out

    def change(self) -> tuple[str, list[str]]:
        """One phone's Add or Remove: its whole answer, one idea more or less."""
        who = f"p{self.rng.randrange(len(self.answers))}"
        ideas = list(self.answers[who])
        if len(ideas) >= self.per + 1 or (ideas and self.rng.random() < 0.5):
            ideas.pop(self.rng.randrange(len(ideas)))
        else:
            ideas.append(self.idea())
        self.answers[who] = ideas
        return who, ideas


def encode(cloud: list[Bubble], joined: int, answered: int, pending: int) -> int:
    """Both frames of one change, built and encoded: what is sent after the tally."""
    wall, phone = frames("ev1", 1, snapshot(joined, answered, pending, cloud), SETTINGS, NOW)
    return len(wall.model_dump_json()) + len(phone.model_dump_json())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def timed(step: Callable[[], None], runs: int) -> tuple[list[float], float]:
    """Wall-clock ms of each run, and the mean CPU ms of this process per run.

    CPU time is what the step costs; wall-clock adds the waits of a shared host (other work
    on the 2 cores), which is what the tail percentiles mostly show.
    """
    out = []
    cpu_started = time.process_time()
    for _ in range(runs):
        started = time.perf_counter()
        step()
        out.append((time.perf_counter() - started) * 1000)
    return out, (time.process_time() - cpu_started) * 1000 / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=10_000)
    parser.add_argument("--ideas", type=int, default=5)
    parser.add_argument("--updates", type=int, default=2_000, help="incremental updates timed")
    parser.add_argument("--baseline-runs", type=int, default=10, help="recomputes timed")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    room = Room(args.seed, args.participants, args.ideas)
    marks = room.marks()
    by_key = {m.key: m for m in marks}

    started = time.perf_counter()
    tally = tally_from_answers(
        [(who, {"ideas": ideas}) for who, ideas in room.answers.items()], marks, True
    )
    load_ms = (time.perf_counter() - started) * 1000
    print(
        f"poll tally: {args.participants} participants x {args.ideas} ideas, "
        f"{len(tally.keys())} distinct keys, moderation on, {len(marks)} marks"
    )
    print(f"  load (every answer once, at start-up): {load_ms:.0f} ms")

    def answers() -> list[tuple[str, object]]:
        return [(who, {"ideas": ideas}) for who, ideas in room.answers.items()]

    # Same result both ways before anything is timed.
    who, ideas = room.change()
    tally.set_answer(who, {"ideas": ideas})
    board, cloud = recompute_cloud(answers(), by_key, True)
    assert tally.cloud() == cloud and tally.pending == board.pending, "incremental != recompute"

    def baseline_step() -> None:
        who, ideas = room.change()
        tally.set_answer(who, {"ideas": ideas})  # keeps both sides on the same answers
        board, cloud = recompute_cloud(answers(), by_key, True)
        encode(cloud, tally.joined, board.answered, board.pending)

    def incremental_step() -> None:
        who, ideas = room.change()
        tally.set_answer(who, {"ideas": ideas})
        encode(tally.cloud(), tally.joined, tally.answered, tally.pending)

    base, base_cpu = timed(baseline_step, args.baseline_runs)
    # The baseline also paid one incremental update per run: well under 1 % of its time.
    inc, inc_cpu = timed(incremental_step, args.updates)
    board, cloud = recompute_cloud(answers(), by_key, True)
    assert tally.cloud() == cloud, "incremental drifted from the recompute"

    rows = [("recompute (ADR baseline)", base, base_cpu), ("incremental", inc, inc_cpu)]
    header = (
        f"  {'per update, ms':<26}{'p50':>10}{'p99':>10}{'mean':>10}{'cpu mean':>10}{'runs':>7}"
    )
    print(header)
    for name, values, cpu in rows:
        print(
            f"  {name:<26}{percentile(values, 0.5):>10.3f}{percentile(values, 0.99):>10.3f}"
            f"{statistics.fmean(values):>10.3f}{cpu:>10.3f}{len(values):>7}"
        )
    ratio = statistics.fmean(base) / statistics.fmean(inc)
    print(
        f"  ratio recompute / incremental: {ratio:,.0f}x (mean), {base_cpu / inc_cpu:,.0f}x (cpu)"
    )
    p50, p99 = percentile(inc, 0.5), percentile(inc, 0.99)
    verdict = "met" if p99 <= 10 else ("met at p50, not at p99" if p50 <= 10 else "NOT met")
    print(f"  target incremental <= 10 ms: {verdict} (p50 {p50:.3f}, p99 {p99:.3f} ms)")
    print(
        f"  load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
