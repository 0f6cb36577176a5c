"""Single-flight: one work per key at a time; a success reused within its ttl, a failure never."""

from __future__ import annotations

import asyncio

import pytest

from quiz_servicekit.singleflight import SingleFlight


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Work:
    """Counted work that waits for `release` (set it to answer at once)."""

    def __init__(self, answer: str = "answer", error: Exception | None = None) -> None:
        self.answer = answer
        self.error = error
        self.runs = 0
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    async def __call__(self) -> str:
        self.runs += 1
        self.started.set()
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return f"{self.answer}-{self.runs}"


async def test_concurrent_callers_of_a_key_share_one_run() -> None:
    flight = SingleFlight[str]()
    work = Work()
    callers = [asyncio.create_task(flight.run("k", work)) for _ in range(10)]
    await work.started.wait()
    assert flight.in_flight("k")
    work.release.set()
    assert await asyncio.gather(*callers) == ["answer-1"] * 10
    assert work.runs == 1


async def test_keys_do_not_share() -> None:
    flight = SingleFlight[str]()
    work = Work()
    work.release.set()
    assert await asyncio.gather(flight.run("a", work), flight.run("b", work)) == [
        "answer-1",
        "answer-2",
    ]


async def test_with_ttl_0_only_overlapping_callers_share_and_nothing_is_remembered() -> None:
    flight = SingleFlight[str](ttl_s=0)
    work = Work()
    work.release.set()
    assert await flight.run("k", work) == "answer-1"
    assert len(flight) == 0
    assert await flight.run("k", work) == "answer-2"


async def test_a_success_is_reused_until_ttl_after_the_work_started() -> None:
    clock = Clock()
    flight = SingleFlight[str](ttl_s=60, monotonic=clock)
    work = Work()
    work.release.set()
    assert await flight.run("k", work) == "answer-1"
    clock.now += 59.9
    assert await flight.run("k", work) == "answer-1"
    clock.now += 0.1
    assert await flight.run("k", work) == "answer-2"
    assert work.runs == 2


async def test_work_in_flight_is_joined_even_past_its_ttl() -> None:
    clock = Clock()
    flight = SingleFlight[str](ttl_s=1, monotonic=clock)
    work = Work()
    first = asyncio.create_task(flight.run("k", work))
    await work.started.wait()
    clock.now += 10
    second = asyncio.create_task(flight.run("k", work))
    await asyncio.sleep(0)
    work.release.set()
    assert await asyncio.gather(first, second) == ["answer-1", "answer-1"]
    assert work.runs == 1


async def test_a_failure_reaches_every_waiter_and_is_forgotten() -> None:
    flight = SingleFlight[str](ttl_s=60)
    work = Work(error=OSError("provider away"))
    callers = [asyncio.create_task(flight.run("k", work)) for _ in range(3)]
    await work.started.wait()
    work.release.set()
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)
    assert len(flight) == 0
    work.error = None
    assert await flight.run("k", work) == "answer-2"


async def test_the_first_caller_cancelled_leaves_its_waiters_to_run_it_again() -> None:
    flight = SingleFlight[str]()
    work = Work()
    first = asyncio.create_task(flight.run("k", work))
    await work.started.wait()
    waiters = [asyncio.create_task(flight.run("k", work)) for _ in range(3)]
    await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.sleep(0)
    work.release.set()
    assert await asyncio.gather(*waiters) == ["answer-2"] * 3
    assert work.runs == 2


async def test_a_waiter_cancelled_leaves_the_work_and_the_others_alone() -> None:
    flight = SingleFlight[str]()
    work = Work()
    first = asyncio.create_task(flight.run("k", work))
    await work.started.wait()
    waiter = asyncio.create_task(flight.run("k", work))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    work.release.set()
    assert await first == "answer-1"
    assert work.runs == 1


async def test_forget_drops_a_remembered_answer() -> None:
    flight = SingleFlight[str](ttl_s=60)
    work = Work()
    work.release.set()
    await flight.run("k", work)
    flight.forget("k")
    assert await flight.run("k", work) == "answer-2"


def test_a_negative_ttl_is_refused() -> None:
    with pytest.raises(ValueError):
        SingleFlight[str](ttl_s=-1)
