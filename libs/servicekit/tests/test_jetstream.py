"""The JetStream kit against a real nats-server: declare, consume, retry, dead-letter, stop."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NATS
from nats.js import api
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from quiz_contracts import topology
from quiz_contracts.base import WireModel
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.topology import StreamDecl
from quiz_servicekit.app import ServiceRuntime, create_service_app
from quiz_servicekit.dead_letters import (
    DeadLetter,
    read_dead_letters,
    replay_dead_letter,
)
from quiz_servicekit.jetstream import (
    ConsumerSpec,
    Delivery,
    JetStreamConfigError,
    PermanentError,
    consumer_config,
    ensure_consumer,
    ensure_stream,
    publish,
)
from quiz_servicekit.settings import ServiceSettings
from quiz_testkit.scripts import ScriptProcess, eventually
from quiz_testkit.serving import serve_app

pytestmark = pytest.mark.integration
PROCS = Path(__file__).parent / "procs"


class Job(WireModel):
    job_id: str
    mode: str = "ok"


class Seen:
    """What a test handler saw: (job_id, num_delivered) per call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.deliveries: list[Delivery] = []

    def record(self, job: Job, delivery: Delivery) -> None:
        self.calls.append((job.job_id, delivery.num_delivered))
        self.deliveries.append(delivery)

    def count(self, job_id: str) -> int:
        return sum(1 for j, _ in self.calls if j == job_id)


def spec(names: Any, handler: Any, **overrides: Any) -> ConsumerSpec[Job]:
    """A consumer of the test's stream with quick retries and short pulls."""
    options: dict[str, Any] = {"nak_delays_s": (0.05,), "fetch_timeout_s": 1.0}
    options.update(overrides)
    return ConsumerSpec(names.consumer, names.stream, Job, handler, **options)


def metric(metrics: Any, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(f"{metrics.prefix}_{name}", labels) or 0.0


async def letters(nc: NATS, names: Any) -> list[DeadLetter]:
    return await read_dead_letters(nc.jetstream(), stream=names.stream, consumer=names.consumer)


async def stream_messages(nc: NATS, stream: str) -> int:
    return (await nc.jetstream().stream_info(stream)).state.messages


async def test_declaration_is_idempotent_and_refuses_immutable_changes(
    nc: NATS, names: Any
) -> None:
    js = nc.jetstream()
    declared = StreamDecl(names.stream, (names.subject,), max_age_s=3600)
    await ensure_stream(js, declared)
    await ensure_stream(js, declared)
    grown = StreamDecl(names.stream, (names.subject,), max_age_s=7200)
    assert (await ensure_stream(js, grown)).config.max_age == pytest.approx(7200)
    with pytest.raises(JetStreamConfigError, match=r"retention.*workqueue.*limits"):
        await ensure_stream(
            js, StreamDecl(names.stream, (names.subject,), retention="limits", max_age_s=7200)
        )

    async def ignore(job: Job, delivery: Delivery) -> None:
        return None

    consumer = spec(names, ignore, ack_wait_s=5)
    await ensure_consumer(js, names.stream, consumer_config(consumer))
    await ensure_consumer(js, names.stream, consumer_config(consumer))
    longer = spec(names, ignore, ack_wait_s=9, max_deliver=7)
    info = await ensure_consumer(js, names.stream, consumer_config(longer))
    assert (info.config.ack_wait, info.config.max_deliver) == (9, 7)
    changed = consumer_config(longer)
    changed.deliver_policy = api.DeliverPolicy.NEW
    with pytest.raises(JetStreamConfigError, match=r"deliver_policy"):
        await ensure_consumer(js, names.stream, changed)


async def test_message_is_handled_once_with_its_metadata_and_trace(
    nc: NATS, names: Any, start_kit: Any, spans: InMemorySpanExporter
) -> None:
    seen = Seen()

    async def handle(job: Job, delivery: Delivery) -> None:
        seen.record(job, delivery)

    async with start_kit(spec(names, handle)) as (_, metrics):
        with trace.get_tracer("test").start_as_current_span("caller"):
            ack = await publish(nc.jetstream(), names.subject, Job(job_id="j1"), msg_id="job-j1")
        await eventually(lambda: seen.calls == [("j1", 1)])
        await eventually(
            lambda: (
                metric(metrics, "consumer_messages_total", consumer=names.consumer, outcome="ok")
                == 1
            )
        )
    delivery = seen.deliveries[0]
    assert (delivery.msg_id, delivery.stream_seq, delivery.stream) == (
        "job-j1",
        ack.seq,
        names.stream,
    )
    assert not delivery.redelivered
    finished = spans.get_finished_spans()
    producer = next(
        s for s in finished if s.kind == SpanKind.PRODUCER and s.name == f"send {names.subject}"
    )
    consumer = next(
        s for s in finished if s.kind == SpanKind.CONSUMER and s.name == f"process {names.subject}"
    )
    assert consumer.parent is not None and producer.context is not None
    assert consumer.parent.span_id == producer.context.span_id
    assert consumer.context is not None
    assert consumer.context.trace_id == producer.context.trace_id
    assert await stream_messages(nc, names.stream) == 0  # acked: gone from the work queue


async def test_duplicate_msg_id_inside_the_window_is_dropped(
    nc: NATS, names: Any, start_kit: Any
) -> None:
    seen = Seen()

    async def handle(job: Job, delivery: Delivery) -> None:
        seen.record(job, delivery)

    js = nc.jetstream()
    async with start_kit(spec(names, handle)):
        first = await publish(js, names.subject, Job(job_id="a"), msg_id="order-a")
        again = await publish(js, names.subject, Job(job_id="a", mode="other"), msg_id="order-a")
        other = await publish(js, names.subject, Job(job_id="b"), msg_id="order-b")
        await eventually(lambda: seen.count("b") == 1)
    assert not first.duplicate and again.duplicate and not other.duplicate
    assert again.seq == first.seq
    assert [job for job, _ in seen.calls] == ["a", "b"]


async def test_work_is_concurrent_up_to_max_in_flight(nc: NATS, names: Any, start_kit: Any) -> None:
    now = peak = 0
    done: list[str] = []

    async def handle(job: Job, delivery: Delivery) -> None:
        nonlocal now, peak
        now += 1
        peak = max(peak, now)
        await asyncio.sleep(0.5)
        now -= 1
        done.append(job.job_id)

    js = nc.jetstream()
    async with start_kit(spec(names, handle, max_in_flight=3)):
        for i in range(10):
            await publish(js, names.subject, Job(job_id=f"j{i}"), msg_id=f"j{i}")
        await eventually(lambda: len(done) == 10)
    assert peak == 3


async def test_poison_message_is_dead_lettered_after_max_deliver(
    nc: NATS, names: Any, start_kit: Any
) -> None:
    seen = Seen()

    async def handle(job: Job, delivery: Delivery) -> None:
        seen.record(job, delivery)
        raise RuntimeError("the handler always fails on this one")

    async with start_kit(spec(names, handle, max_deliver=3)) as (_, metrics):
        ack = await publish(nc.jetstream(), names.subject, Job(job_id="p"), msg_id="poison-1")
        await eventually(lambda: _has_letter(nc, names))
        labels = {"consumer": names.consumer}
        assert metric(metrics, "consumer_messages_total", outcome="retry", **labels) == 2
        assert metric(metrics, "consumer_messages_total", outcome="exhausted", **labels) == 1
        assert metric(metrics, "dead_letters_total", reason="exhausted", **labels) == 1
    assert seen.calls == [("p", 1), ("p", 2), ("p", 3)]
    (letter,) = await letters(nc, names)
    assert (letter.reason, letter.deliveries, letter.stream_seq) == ("exhausted", 3, ack.seq)
    assert letter.original_kept and Job.model_validate_json(letter.data).job_id == "p"
    assert letter.subject == names.subject and letter.original_msg_id == "poison-1"
    assert "RuntimeError: the handler always fails" in letter.detail
    assert "traceparent" in letter.headers
    assert await stream_messages(nc, names.stream) == 0  # terminated: not left in the queue


async def _has_letter(nc: NATS, names: Any, count: int = 1) -> bool:
    return len(await letters(nc, names)) >= count


async def test_undecodable_message_is_dead_lettered_at_once(
    nc: NATS, names: Any, start_kit: Any
) -> None:
    seen = Seen()

    async def handle(job: Job, delivery: Delivery) -> None:
        seen.record(job, delivery)

    js = nc.jetstream()
    async with start_kit(spec(names, handle, max_deliver=5)) as (_, metrics):
        await js.publish(names.subject, b"{not json", headers={"Nats-Msg-Id": "garbage"})
        await js.publish(names.subject, b'{"job_id": 42}')
        await eventually(lambda: _has_letter(nc, names, 2))
        assert (
            metric(metrics, "consumer_messages_total", consumer=names.consumer, outcome="invalid")
            == 2
        )
    assert seen.calls == []
    garbage, wrong_type = await letters(nc, names)
    assert (garbage.reason, garbage.deliveries, garbage.data) == ("invalid", 1, b"{not json")
    assert garbage.original_msg_id == "garbage"
    assert wrong_type.reason == "invalid" and "job_id" in wrong_type.detail


async def test_permanent_errors_are_terminated_and_transient_ones_retried(
    nc: NATS, names: Any, start_kit: Any
) -> None:
    seen = Seen()

    async def handle(job: Job, delivery: Delivery) -> None:
        seen.record(job, delivery)
        if job.mode == "stale":
            raise PermanentError(ErrorCode.fix_stale, "the question moved on")
        if job.mode == "invalid":
            raise ContractError(ErrorCode.invalid_request, "no such question")
        if job.mode == "busy" and delivery.num_delivered == 1:
            raise ContractError(ErrorCode.rate_limited, "later", retry_after_s=0.1)

    js = nc.jetstream()
    async with start_kit(spec(names, handle, max_deliver=5)):
        for mode in ("stale", "invalid", "busy"):
            await publish(js, names.subject, Job(job_id=mode, mode=mode), msg_id=mode)
        await eventually(lambda: seen.count("busy") == 2)
        await eventually(lambda: _has_letter(nc, names, 2))
    assert seen.count("stale") == 1 and seen.count("invalid") == 1
    by_job = {Job.model_validate_json(x.data).job_id: x for x in await letters(nc, names)}
    assert set(by_job) == {"stale", "invalid"}
    assert by_job["stale"].reason == "permanent" and "fix_stale" in by_job["stale"].detail
    assert by_job["invalid"].reason == "permanent"


@pytest.mark.parametrize("in_progress_acks", [True, False], ids=["progress-acks", "control"])
async def test_in_progress_acks_keep_long_work_from_redelivery(
    nc: NATS, names: Any, start_kit: Any, in_progress_acks: bool
) -> None:
    seen = Seen()
    finished = asyncio.Event()

    async def handle(job: Job, delivery: Delivery) -> None:
        seen.record(job, delivery)
        if delivery.num_delivered == 1:
            await asyncio.sleep(3.5)  # work lasting over three times ack_wait
            finished.set()

    consumer = spec(
        names, handle, ack_wait_s=1.0, in_progress_acks=in_progress_acks, max_in_flight=2
    )
    async with start_kit(consumer):
        await publish(nc.jetstream(), names.subject, Job(job_id="long"), msg_id="long")
        await asyncio.wait_for(finished.wait(), 30)
        await asyncio.sleep(1.5)  # a redelivery due after the ack would show up by now
        info = await nc.jetstream().consumer_info(names.stream, names.consumer)
    if in_progress_acks:
        assert seen.calls == [("long", 1)]
        assert info.num_redelivered == 0
    else:
        # Without them the server gives the same message out again while it is being worked on.
        assert ("long", 2) in seen.calls


async def test_max_deliveries_advisory_dead_letters_the_original(
    nc: NATS, names: Any, start_kit: Any
) -> None:
    """A delivery nobody answers (a hung or dead worker) becomes a dead letter via the advisory."""
    release = asyncio.Event()

    async def hang(job: Job, delivery: Delivery) -> None:
        await release.wait()

    consumer = spec(names, hang, ack_wait_s=1.0, max_deliver=1, in_progress_acks=False)
    async with start_kit(consumer):
        ack = await publish(nc.jetstream(), names.subject, Job(job_id="hung"), msg_id="hung")
        await eventually(lambda: _has_letter(nc, names))
        release.set()
    (letter,) = await letters(nc, names)
    assert (letter.reason, letter.stream_seq, letter.deliveries) == ("max_deliveries", ack.seq, 1)
    assert letter.original_kept and Job.model_validate_json(letter.data).job_id == "hung"
    assert letter.original_msg_id == "hung"
    # The work queue would hold it forever; the dead letter owns it now.
    assert await stream_messages(nc, names.stream) == 0


async def test_stop_finishes_work_within_the_grace_and_naks_the_rest(
    nc: NATS, names: Any, start_kit: Any
) -> None:
    seen = Seen()
    started: set[str] = set()

    async def handle(job: Job, delivery: Delivery) -> None:
        seen.record(job, delivery)
        started.add(job.job_id)
        if job.mode == "quick":
            await asyncio.sleep(0.5)
        elif delivery.num_delivered == 1:
            await asyncio.Event().wait()  # never finishes on its first delivery

    # ack_wait is long: a prompt redelivery can only come from the nak at stop.
    consumer = spec(names, handle, ack_wait_s=120.0, max_in_flight=4)
    js = nc.jetstream()
    async with start_kit(consumer) as (kit, metrics):
        await publish(js, names.subject, Job(job_id="quick", mode="quick"), msg_id="quick")
        await publish(js, names.subject, Job(job_id="stuck", mode="stuck"), msg_id="stuck")
        await eventually(lambda: started == {"quick", "stuck"})
        await kit.stop(grace_s=3)
        assert (
            metric(
                metrics, "consumer_messages_total", consumer=names.consumer, outcome="interrupted"
            )
            == 1
        )
    assert kit.workers == []
    async with start_kit(consumer):
        await eventually(lambda: ("stuck", 2) in seen.calls)
        await eventually(lambda: stream_messages_is(nc, names.stream, 0))
    assert seen.count("quick") == 1


async def stream_messages_is(nc: NATS, stream: str, n: int) -> bool:
    return await stream_messages(nc, stream) == n


async def test_dead_letters_can_be_read_and_replayed(
    nc: NATS, names: Any, start_kit: Any, tmp_path: Path, nats_url: str
) -> None:
    seen = Seen()
    broken = True

    async def handle(job: Job, delivery: Delivery) -> None:
        seen.record(job, delivery)
        if broken:
            raise PermanentError(ErrorCode.invalid_request, "a bug, fixed later")

    js = nc.jetstream()
    async with start_kit(spec(names, handle)):
        await publish(js, names.subject, Job(job_id="r"), msg_id="replay-me")
        await eventually(lambda: _has_letter(nc, names))
        (letter,) = await letters(nc, names)
        listing = subprocess.run(
            [
                sys.executable,
                "-m",
                "quiz_servicekit.dead_letters",
                "--nats-url",
                nats_url,
                "list",
                "--stream",
                names.stream,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert f"{names.stream}/{names.consumer}#{letter.stream_seq}" in listing
        assert "permanent" in listing
        broken = False
        await replay_dead_letter(js, letter.seq)
        await eventually(lambda: seen.count("r") == 2)
    assert await letters(nc, names) == []
    assert seen.deliveries[-1].msg_id == f"replay-me.replay.{letter.seq}"
    # None left: `list` says so in a line (issue 34; it printed nothing), stdout stays empty.
    cli = [sys.executable, "-m", "quiz_servicekit.dead_letters", "--nats-url", nats_url]
    empty = subprocess.run(
        [*cli, "list", "--stream", names.stream],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert empty.stdout == ""
    assert empty.stderr.strip() == f"no dead letters (stream {names.stream})", empty.stderr


async def test_service_lifespan_runs_consumers_with_a_readiness_check(
    nc: NATS, names: Any, nats_url: str
) -> None:
    seen = Seen()

    async def handle(job: Job, delivery: Delivery) -> None:
        seen.record(job, delivery)

    settings = ServiceSettings(nats_url=nats_url)
    runtime = ServiceRuntime(
        name=names.service, version="0.1.0", description="kit", settings=settings
    )
    runtime.add_stream(StreamDecl(names.stream, (names.subject,)))
    runtime.add_consumer(spec(names, handle))
    js = nc.jetstream()
    async with serve_app(create_service_app(runtime), settings) as url, httpx.AsyncClient() as http:
        ready = (await http.get(f"{url}/readyz")).json()
        assert ready["checks"]["consumers"] is True
        await publish(js, names.subject, Job(job_id="x"), msg_id="x")
        await eventually(lambda: seen.count("x") == 1)
        # An operator deletes the consumer: the worker declares it again and carries on.
        await js.delete_consumer(names.stream, names.consumer)
        await publish(js, names.subject, Job(job_id="y"), msg_id="y")
        await eventually(lambda: seen.count("y") == 1)
        assert (await http.get(f"{url}/readyz")).status_code == 200
        text = (await http.get(f"{url}/metrics")).text
        prefix = "quiz_" + names.service.replace("-", "_")
        assert (
            f'{prefix}_consumer_messages_total{{consumer="{names.consumer}",outcome="ok"}} 2.0'
            in text
        )
    assert runtime.jetstream.workers == []  # stopped with the app


@pytest.mark.parametrize("kill_point", ["pause-before-commit", "pause-after-commit"])
async def test_killed_consumer_process_work_is_redelivered_and_done_once(
    nc: NATS, names: Any, nats_url: str, tmp_path: Path, kill_point: str
) -> None:
    """SIGKILL mid-work: the message comes back to the next process, and is recorded once.

    Killed before its commit, the next process does the work; killed after the commit but before
    the ack, the next one finds the business id recorded and only acks.
    """
    db_path = tmp_path / "work.db"
    args = (nats_url, names.stream, names.subject, names.consumer, str(db_path))
    first = ScriptProcess(
        PROCS / "consumer_proc.py", *args, kill_point, log_path=tmp_path / "first.log"
    )
    second: ScriptProcess | None = None
    try:
        await first.wait_said("READY")
        await publish(nc.jetstream(), names.subject, Job(job_id="job-1"), msg_id="job-1")
        await first.wait_said("PAUSED job-1")
        first.kill()
        second = ScriptProcess(PROCS / "consumer_proc.py", *args, log_path=tmp_path / "second.log")
        await second.wait_said("START job-1 2")
        expected = "SKIP job-1" if kill_point == "pause-after-commit" else "DONE job-1"
        await second.wait_said(expected)
        await eventually(lambda: stream_messages_is(nc, names.stream, 0))
    finally:
        first.stop()
        if second is not None:
            second.stop()
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT job_id, pid, delivery FROM done").fetchall()
    done_by = first.pid if kill_point == "pause-after-commit" else second.pid
    assert rows == [("job-1", done_by, 1 if kill_point == "pause-after-commit" else 2)]


async def test_service_does_not_start_when_a_stream_cannot_take_its_declared_config(
    nc: NATS, names: Any, nats_url: str
) -> None:
    await ensure_stream(nc.jetstream(), StreamDecl(names.stream, (names.subject,)))
    settings = ServiceSettings(nats_url=nats_url)
    runtime = ServiceRuntime(
        name=names.service, version="0.1.0", description="kit", settings=settings
    )
    runtime.add_stream(StreamDecl(names.stream, (names.subject,), storage="memory"))

    async def handle(job: Job, delivery: Delivery) -> None:
        return None

    runtime.add_consumer(spec(names, handle))
    app = create_service_app(runtime)
    # The lifespan itself (uvicorn turns its failure into "startup failed", exit code 3).
    with pytest.raises(JetStreamConfigError) as failed:
        async with app.router.lifespan_context(app):
            pass
    message = str(failed.value)
    assert f"stream {names.stream} exists with a config the server cannot change" in message
    assert "storage: 'file' → 'memory'" in message
    assert runtime.jetstream.workers == []
    await runtime.nc.close()


def test_provisioning_and_a_service_build_one_consumer_config() -> None:
    """One builder for the durable pull consumer: what provisioning creates from the topology
    (`ConsumerDecl`) is what the service's spec of the same fields updates it to; the spec's
    `max_ack_pending` is the one field provisioning leaves to the server (None)."""

    async def nothing(_: Any, __: Delivery) -> None:
        return None

    for decl in topology.CONSUMERS:
        spec: ConsumerSpec[Any] = ConsumerSpec(
            decl.name,
            decl.stream,
            Job,
            nothing,
            filter_subjects=decl.filter_subjects,
            ack_wait_s=decl.ack_wait_s,
            max_deliver=decl.max_deliver,
            description=decl.description,
        )
        assert consumer_config(decl) == consumer_config(spec)
        assert consumer_config(decl).max_ack_pending is None
    bounded: ConsumerSpec[Any] = ConsumerSpec("c", "S", Job, nothing, max_ack_pending=16)
    assert consumer_config(bounded).max_ack_pending == 16
