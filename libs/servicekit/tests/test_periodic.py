"""Periodic tasks: runs, survives failures, stops on shutdown, jitter within bounds."""

from __future__ import annotations

import asyncio
import logging
import random

import httpx
import pytest

from quiz_servicekit.app import ServiceRuntime, create_service_app
from quiz_servicekit.metrics import ServiceMetrics
from quiz_servicekit.periodic import PeriodicMetrics, PeriodicTask, every
from quiz_servicekit.settings import ServiceSettings
from quiz_testkit.scripts import eventually
from quiz_testkit.serving import serve_app


class FakeTime:
    """A sleep that records what it was asked and returns at once (with a loop turn)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


def runs(metrics: ServiceMetrics, task: str, outcome: str) -> float:
    value = metrics.registry.get_sample_value(
        f"{metrics.prefix}_periodic_runs_total", {"task": task, "outcome": outcome}
    )
    return value or 0.0


async def test_runs_repeatedly_with_jitter_within_bounds() -> None:
    fake = FakeTime()
    done = asyncio.Event()
    count = 0

    async def tick() -> None:
        nonlocal count
        count += 1
        if count == 200:
            done.set()

    task = every(10.0, tick, name="tick", jitter=0.2, sleep=fake.sleep, rng=random.Random(7).random)
    await asyncio.wait_for(done.wait(), 10)
    await task.stop()
    assert task.runs >= 200 and not task.running
    assert all(8.0 <= d <= 12.0 for d in fake.delays)
    # The jitter is used on both sides of the interval, not a constant offset.
    assert min(fake.delays) < 9.0 and max(fake.delays) > 11.0


async def test_no_jitter_means_the_exact_interval_and_first_run_waits() -> None:
    fake = FakeTime()
    ran = asyncio.Event()

    async def tick() -> None:
        ran.set()

    task = every(5.0, tick, name="exact", jitter=0.0, sleep=fake.sleep)
    await asyncio.wait_for(ran.wait(), 10)
    await task.stop()
    assert fake.delays[0] == 5.0  # slept before the first run
    assert set(fake.delays) == {5.0}


async def test_run_at_start_runs_before_the_first_sleep() -> None:
    fake = FakeTime()
    first: list[int] = []

    async def tick() -> None:
        first.append(len(fake.delays))

    task = every(5.0, tick, name="eager", run_at_start=True, sleep=fake.sleep)
    await eventually(lambda: len(first) >= 2, 10)
    await task.stop()
    assert first[0] == 0


async def test_a_failing_run_is_logged_counted_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeTime()
    metrics = ServiceMetrics("kit-periodic")
    calls = 0

    async def flaky() -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("database away")

    with caplog.at_level(logging.ERROR, logger="quiz_servicekit.periodic"):
        task = every(1.0, flaky, name="flaky", sleep=fake.sleep, metrics=PeriodicMetrics(metrics))
        await eventually(lambda: calls >= 5, 10)
        await task.stop()
    assert task.failures == 1
    assert runs(metrics, "flaky", "error") == 1
    assert runs(metrics, "flaky", "ok") >= 4
    assert "periodic task flaky failed" in caplog.text and "database away" in caplog.text


async def test_stop_cancels_a_sleeping_task_at_once() -> None:
    calls = 0

    async def tick() -> None:
        nonlocal calls
        calls += 1

    task = every(3600.0, tick, name="hourly")  # real sleep: stop must not wait for it
    await asyncio.sleep(0.05)
    await asyncio.wait_for(task.stop(), 5)
    assert not task.running and calls == 0


async def test_stop_lets_a_run_finish_within_the_grace_then_cancels() -> None:
    metrics = ServiceMetrics("kit-periodic-stop")
    finish = asyncio.Event()
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await finish.wait()

    graceful = PeriodicTask(
        "graceful", 3600.0, slow, run_at_start=True, metrics=PeriodicMetrics(metrics)
    ).start()
    await started.wait()
    stopping = asyncio.create_task(graceful.stop(grace_s=30))
    await asyncio.sleep(0.1)
    assert not stopping.done()  # waits for the run in progress
    finish.set()
    await asyncio.wait_for(stopping, 5)
    assert runs(metrics, "graceful", "ok") == 1

    started.clear()
    finish.clear()
    stuck = PeriodicTask("stuck", 3600.0, slow, run_at_start=True, metrics=graceful._metrics)
    stuck.start()
    await started.wait()
    await asyncio.wait_for(stuck.stop(grace_s=0.1), 5)
    assert runs(metrics, "stuck", "cancelled") == 1 and not stuck.running


def test_bad_arguments_are_refused() -> None:
    async def tick() -> None:
        return None

    with pytest.raises(ValueError, match="interval_s"):
        PeriodicTask("t", 0, tick)
    with pytest.raises(ValueError, match="jitter"):
        PeriodicTask("t", 1, tick, jitter=1.5)


@pytest.mark.integration
async def test_service_runs_periodic_tasks_and_stops_them_on_shutdown(nats_url: str) -> None:
    settings = ServiceSettings(nats_url=nats_url)
    runtime = ServiceRuntime(
        name="kit-periodic-app", version="0.1.0", description="p", settings=settings
    )
    calls = 0

    async def tick() -> None:
        nonlocal calls
        calls += 1

    task = runtime.add_periodic("tick", 0.05, tick, run_at_start=True)
    assert not task.running  # declared, started by the lifespan
    async with serve_app(create_service_app(runtime), settings) as url:
        await eventually(lambda: calls >= 3)
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"{url}/metrics")).text
        assert 'quiz_kit_periodic_app_periodic_runs_total{outcome="ok",task="tick"}' in text
    assert not task.running
    after = calls
    await asyncio.sleep(0.3)
    assert calls == after
