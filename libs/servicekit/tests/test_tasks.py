"""A tracked task set: tasks held to the end, failures logged and counted, stopped together."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest

from quiz_servicekit.tasks import TaskSet


async def test_a_spawned_task_is_held_until_it_ends() -> None:
    tasks = TaskSet("t")
    done = asyncio.Event()

    async def work() -> str:
        await asyncio.sleep(0.01)
        done.set()
        return "ok"

    task = tasks.spawn(work(), name="w")
    del task
    gc.collect()  # only the set holds the task now
    assert len(tasks) == 1
    await asyncio.wait_for(done.wait(), 1)
    await asyncio.sleep(0)
    assert len(tasks) == 0 and not tasks


async def test_a_task_that_fails_is_logged_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[tuple[str, BaseException]] = []
    tasks = TaskSet("t", on_failure=lambda task, e: seen.append((task.get_name(), e)))

    async def boom() -> None:
        raise ValueError("boom")

    with caplog.at_level(logging.ERROR, logger="quiz_servicekit.tasks"):
        task = tasks.spawn(boom(), name="boomer")
        await asyncio.wait({task})
        await asyncio.sleep(0)
    assert tasks.failures == 1
    assert [(n, str(e)) for n, e in seen] == [("boomer", "boom")]
    assert any("boomer" in r.getMessage() and r.exc_info for r in caplog.records)
    # A caller awaiting the task still gets its exception.
    with pytest.raises(ValueError):
        await task


async def test_a_cancelled_task_is_no_failure() -> None:
    tasks = TaskSet("t")
    task = tasks.spawn(asyncio.sleep(10))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert tasks.failures == 0 and len(tasks) == 0


async def test_wait_lets_tasks_finish_and_cancels_none() -> None:
    tasks = TaskSet("t")
    quick = tasks.spawn(asyncio.sleep(0.01))
    slow = tasks.spawn(asyncio.sleep(10))
    assert await tasks.wait(0.2) == 1
    assert quick.done() and not slow.done()
    await tasks.close()
    assert slow.cancelled()


async def test_drain_waits_the_grace_then_cancels_the_rest() -> None:
    tasks = TaskSet("t")
    cleaned: list[str] = []

    async def slow() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append("slow")

    quick = tasks.spawn(asyncio.sleep(0.01, result="done"))
    tasks.spawn(slow())
    assert await tasks.drain(0.2) == 1
    assert await quick == "done"
    assert cleaned == ["slow"] and len(tasks) == 0 and tasks.failures == 0


async def test_close_cancels_all_and_awaits_those_spawned_on_the_way() -> None:
    tasks = TaskSet("t")
    ended: list[str] = []

    async def sleeper(name: str) -> None:
        try:
            await asyncio.sleep(10)
        finally:
            ended.append(name)

    async def spawns_on_cancel() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            tasks.spawn(sleeper("late"))
            raise

    spawned: list[Any] = [tasks.spawn(sleeper(f"s{i}")) for i in range(3)]
    spawned.append(tasks.spawn(spawns_on_cancel()))
    await asyncio.sleep(0)
    await tasks.close()
    assert sorted(ended) == ["late", "s0", "s1", "s2"]
    assert len(tasks) == 0 and all(t.done() for t in spawned)
