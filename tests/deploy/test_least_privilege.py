"""Least privilege between services (issue 29), from the attacker's side: each bus user of the
generated accounts, on a real nats-server, tries what it must not — and the bus, or the
gateway, refuses it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import api
from nats.js.errors import APIError
from pydantic import BaseModel

from quiz_contracts import bus, topology
from quiz_contracts import subjects as s
from quiz_servicekit.jetstream import BusNotProvisioned, ConsumerSpec, Delivery, JetStreamKit
from quiz_servicekit.metrics import ServiceMetrics
from quiz_servicekit.provision import provision
from quiz_testkit.nats_server import NatsServer, nats_connect

pytestmark = pytest.mark.integration

# Every user of the table but the operators'.
ATTACKERS = tuple(u.name for u in bus.USERS if u.name != "ops")
STREAMS = tuple(d.name for d in topology.STREAMS) + tuple(b.stream for b in topology.BUCKETS)


async def _as(server: NatsServer, user: str) -> NATS:
    async def quiet(_: Exception) -> None:
        pass

    return await nats_connect(server.url_for(user), error_cb=quiet, allow_reconnect=False)


def _evil_config(config: dict[str, Any]) -> dict[str, Any]:
    """The issue's rewrite: extra subjects (a model's reply), sources (the answer keys, the
    journal), a mirror, and a republish to a subject the attacker may not publish."""
    evil = dict(config)
    evil["subjects"] = [*(config.get("subjects") or []), "_INBOX_editor-assist.>", "evil.>"]
    evil["sources"] = [{"name": s.QUESTIONS_STREAM}, {"name": s.LLM_JOURNAL_STREAM}]
    evil["republish"] = {"src": ">", "dest": s.RUNNER_RUN}
    return evil


async def _snapshot(js: Any) -> dict[str, tuple[Any, ...]]:
    """Each stream's config fields an attacker wants and its message counts, read as ops."""
    out: dict[str, tuple[Any, ...]] = {}
    for name in STREAMS:
        info = await js.stream_info(name)
        c = info.config
        out[name] = (
            tuple(c.subjects or ()),
            tuple(x.name for x in c.sources or ()),
            c.mirror.name if c.mirror else None,
            c.republish.destination if c.republish else None,
            info.state.messages,
            info.state.first_seq,
        )
    return out


async def test_no_user_but_ops_reshapes_deletes_or_purges_a_stream(tmp_path: Path) -> None:
    """Item 1. As every user but `ops`, for every stream and KV bucket the platform has: update
    it (extra subjects, sources, republish), create it again or a mirror of it, delete it,
    purge it, delete one of its messages, create a KV bucket. Nothing changes (read as ops), no
    JetStream API call succeeds but the gateway's delete of a journal message, and the server
    logged the refusals."""
    server = NatsServer(tmp_path / "nats").start()
    try:
        ops = await nats_connect(server.url)
        js = ops.jetstream()
        # One message in each stream, so that a purge or a deletion would show.
        await js.publish(s.llm_journal_subject("db1"), b"{}")
        await js.publish(s.REVIEW_REQUESTS, b"{}")
        await js.publish(s.REVIEW_COMPLETED, b"{}")
        await js.publish(s.QUESTION_VERSION_PUBLISHED, b"{}")
        await js.publish(s.POLL_AI_JOBS, b"{}")
        await js.publish("dlq.X.y.1", b"{}")
        kv = await js.key_value(topology.REVIEW_LEASE_BUCKET)
        await kv.put("night", b"ops")
        before = await _snapshot(js)
        configs = {
            n: json.loads(json.dumps((await js.stream_info(n)).config.as_dict())) for n in STREAMS
        }

        answered: list[tuple[str, str, dict[str, Any]]] = []
        for user in ATTACKERS:
            nc = await _as(server, user)
            inbox = bus.inbox_prefix(user) + ".attack"
            replies: dict[str, str] = {}

            async def record(msg: Msg, replies: dict[str, str] = replies) -> None:
                replies[msg.subject] = msg.data.decode()

            await nc.subscribe(inbox + ".>", cb=record)
            attempts: list[tuple[str, bytes]] = []
            for name in STREAMS:
                evil = json.dumps(_evil_config(configs[name])).encode()
                attempts += [
                    (f"$JS.API.STREAM.UPDATE.{name}", evil),
                    (f"$JS.API.STREAM.CREATE.{name}", evil),
                    (f"$JS.API.STREAM.DELETE.{name}", b""),
                    (f"$JS.API.STREAM.PURGE.{name}", b""),
                    (f"$JS.API.STREAM.MSG.DELETE.{name}", b'{"seq": 1}'),
                    (
                        f"$JS.API.STREAM.CREATE.EVIL_{name}",
                        json.dumps({"name": f"EVIL_{name}", "mirror": {"name": name}}).encode(),
                    ),
                ]
            attempts.append(
                (
                    "$JS.API.STREAM.CREATE.KV_evil",
                    json.dumps(
                        {"name": "KV_evil", "subjects": ["$KV.evil.>"], "max_msgs_per_subject": 1}
                    ).encode(),
                )
            )
            for i, (subject, body) in enumerate(attempts):
                await nc.publish(subject, body, reply=f"{inbox}.{i}")
            await nc.flush()
            await asyncio.sleep(0.3)  # what the server answers has arrived by then
            for key, data in replies.items():
                subject = attempts[int(key.rsplit(".", 1)[1])][0]
                answered.append((user, subject, json.loads(data)))
            await nc.close()

        # Only what the bus lets through got an answer: the gateway's message delete on its
        # own journal (a replayed entry). Everything else was refused before JetStream saw it.
        through = {(u, subj) for u, subj, _ in answered}
        gateway_delete = ("llm-gateway", f"$JS.API.STREAM.MSG.DELETE.{s.LLM_JOURNAL_STREAM}")
        # (That one answer also shows the replies of allowed calls are seen here.)
        assert through == {gateway_delete}, through
        after = await _snapshot(js)
        journal = s.LLM_JOURNAL_STREAM
        for name in STREAMS:
            if name == journal:
                # Its subjects, sources, mirror and republish are unchanged; the gateway may
                # have deleted the message it replays.
                assert after[name][:4] == before[name][:4]
            else:
                assert after[name] == before[name], name
        existing = {i.config.name for i in await js.streams_info()}
        assert existing == set(STREAMS), existing - set(STREAMS)
        assert server.violations(), "the server logs what it refused"
        await ops.close()
    finally:
        server.stop()


async def test_a_service_runs_its_own_pull_consumers_and_no_other(tmp_path: Path) -> None:
    """Item 1, consumers. A push consumer delivers a stream's messages to any subject (past
    the publish permissions): as poll, its provisioned `poll-ai` may be updated (ack wait) but
    not turned into a push consumer to `runner.v1.run`; a consumer of another name, or on
    another service's stream, cannot be created; its own cannot be deleted. Nothing reaches
    `runner.v1.run`."""
    server = NatsServer(tmp_path / "nats").start()
    try:
        ops = await nats_connect(server.url)
        leaked: list[bytes] = []

        async def spy(msg: Msg) -> None:
            leaked.append(msg.data)

        await ops.subscribe(s.RUNNER_RUN, cb=spy)
        await ops.flush()
        poll = await _as(server, "poll")
        js = poll.jetstream(timeout=1)
        pull = api.ConsumerConfig(
            name="poll-ai",
            durable_name="poll-ai",
            ack_policy=api.AckPolicy.EXPLICIT,
            ack_wait=45,
            max_deliver=10,
        )
        updated = await js.add_consumer(s.POLL_AI_STREAM, pull)
        assert updated.config.ack_wait == pytest.approx(45)  # its own settings: allowed
        push = pull.evolve(deliver_subject=s.RUNNER_RUN)
        with pytest.raises(APIError, match="pull consumer to push"):
            await js.add_consumer(s.POLL_AI_STREAM, push)
        refused = [
            (s.POLL_AI_STREAM, push.evolve(name="evil", durable_name="evil")),
            (s.POLL_AI_STREAM, pull.evolve(name="evil", durable_name="evil")),
            (s.REVIEW_REQUESTS_STREAM, push.evolve(name="review-requests")),
            (s.QUESTIONS_STREAM, pull.evolve(name="evil", durable_name="evil")),
        ]
        for stream, config in refused:
            with pytest.raises(Exception) as e:  # no answer: the bus refused the API call
                await js.add_consumer(stream, config)
            assert not isinstance(e.value, APIError), (stream, config.name, e.value)
        with pytest.raises(Exception) as e:
            await js.delete_consumer(s.POLL_AI_STREAM, "poll-ai")
        assert not isinstance(e.value, APIError)
        await ops.jetstream().publish(s.POLL_AI_JOBS, b'{"secret": 1}')
        await asyncio.sleep(0.5)
        assert leaked == []
        info = await ops.jetstream().consumer_info(s.POLL_AI_STREAM, "poll-ai")
        assert info.config.deliver_subject is None
        names = {c.name for c in await ops.jetstream().consumers_info(s.POLL_AI_STREAM)}
        assert names == {"poll-ai"}
        await poll.close()
        await ops.close()
    finally:
        server.stop()


async def test_a_service_says_the_bus_is_not_provisioned_and_creates_nothing(
    tmp_path: Path,
) -> None:
    """Item 1: before provisioning, a service's start stops with BusNotProvisioned naming what
    is missing and the command; it created nothing. After `provision` (as ops) it starts."""
    server = NatsServer(tmp_path / "nats", provision=False).start()
    try:
        poll = await nats_connect(server.url_for("poll"))

        async def handle(_: object, __: Delivery) -> None:
            pass

        def kit() -> JetStreamKit:
            k = JetStreamKit("poll", ServiceMetrics("poll_provision_test"))
            k.add_consumer(ConsumerSpec("poll-ai", s.POLL_AI_STREAM, _Job, handle))
            return k

        with pytest.raises(BusNotProvisioned) as e:
            await kit().start(poll)
        assert "POLL_AI" in str(e.value) and "make provision" in str(e.value)
        ops = await nats_connect(server.url)
        assert await ops.jetstream().streams_info() == []

        done = await provision(ops.jetstream())
        assert any("POLL_AI" in line for line in done)
        started = kit()
        await started.start(poll)
        await started.stop(grace_s=0)
        again = await provision(ops.jetstream())  # idempotent
        assert any("consumer POLL_AI/poll-ai: exists" in line for line in again)
        await poll.close()
        await ops.close()
    finally:
        server.stop()


class _Job(BaseModel):
    pass


OWN_PURPOSE = {
    "editor-assist": "generate",
    "review": "review",
    "poll": "poll",
    "lesson-fix": "lesson_fix",
}


def _call(purpose: str, *, user: str | None = "teacher-1", billed_to: str | None = None) -> Any:
    from quiz_contracts.llm import CompleteRequest

    return CompleteRequest.model_validate(
        {
            "purpose": purpose,
            "user": user,
            "billed_to": billed_to,
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_output_tokens": 50,
        }
    )


async def test_the_gateway_knows_the_caller_from_the_bus_and_allows_its_purposes_only(
    tmp_path: Path, anthropic_stub: Any
) -> None:
    """Item 5, against the real gateway on the locked bus. Each service calls for its own
    purpose on its own subject: answered. For another service's purpose, or naming a payer its
    purpose may not (only the poll bills its teacher): `forbidden`, no provider request. On
    another service's subject: refused by nats-server, the gateway never sees it. Usage shows
    the allowed calls' spend only."""
    from quiz_contracts.errors import ContractError, ErrorCode
    from quiz_contracts.llm import CompleteReply, UsageReply, UsageRequest
    from quiz_servicekit.natsio import request
    from quiz_testkit.anthropic_stub import StubReply
    from quiz_testkit.processes import llm_gateway_process

    anthropic_stub.default = StubReply.text("hello")
    server = NatsServer(tmp_path / "nats").start()
    try:
        with llm_gateway_process(server.url, anthropic_stub.base_url, tmp_path / "gateway"):
            allowed = 0
            for caller, purpose in OWN_PURPOSE.items():
                nc = await _as(server, caller)
                subject = s.llm_complete_subject(caller)
                reply = await request(nc, subject, _call(purpose), CompleteReply, timeout=20)
                assert reply.output == "hello"
                allowed += 1
                for other in sorted(set(OWN_PURPOSE.values()) - {purpose}):
                    with pytest.raises(ContractError) as e:
                        await request(nc, subject, _call(other), CompleteReply, timeout=20)
                    assert e.value.code == ErrorCode.forbidden, (caller, other)
                if caller == "poll":
                    # The poll's calls are no person's, billed to the teacher running it.
                    paid = _call("poll", user=None, billed_to="teacher-7")
                    await request(nc, subject, paid, CompleteReply, timeout=20)
                    allowed += 1
                else:
                    with pytest.raises(ContractError) as e:
                        await request(
                            nc,
                            subject,
                            _call(purpose, billed_to="victim-9"),
                            CompleteReply,
                            timeout=20,
                        )
                    assert e.value.code == ErrorCode.forbidden
                # Someone else's subject: the bus refuses the publish.
                victim = "lesson-fix" if caller != "lesson-fix" else "review"
                with pytest.raises(ContractError) as e:
                    await request(
                        nc,
                        s.llm_complete_subject(victim),
                        _call(OWN_PURPOSE[victim]),
                        CompleteReply,
                        timeout=1,
                    )
                assert e.value.code != ErrorCode.forbidden  # never reached the gateway
                await nc.close()
            assert len(anthropic_stub.requests) == allowed
            ops = await nats_connect(server.url)

            async def calls_billed_to(payer: str) -> int:
                usage = await request(
                    ops, s.LLM_USAGE, UsageRequest(billed_to=payer), UsageReply, timeout=10
                )
                return sum(line.calls for line in (usage.billed_to_spend or {}).values())

            assert await calls_billed_to("teacher-7") == 1  # the poll's, which it may bill
            assert await calls_billed_to("victim-9") == 0
            await ops.close()
        assert any("llm.v1.complete." in v for v in server.violations())
    finally:
        server.stop()


def test_no_service_user_is_granted_a_jetstream_call_that_reshapes_the_bus() -> None:
    """Item 1, the table itself: no allow-list but ops' reaches stream create, update, delete
    or purge, consumer delete, or a consumer name the topology does not give that user."""
    forbidden = [
        f"$JS.API.STREAM.{verb}.{stream}"
        for verb in ("CREATE", "UPDATE", "DELETE", "PURGE")
        for stream in (*STREAMS, "KV_evil", "EVIL")
    ] + [f"$JS.API.CONSUMER.DELETE.{c.stream}.{c.name}" for c in topology.CONSUMERS]
    for user in ATTACKERS:
        allowed = bus.permissions(bus.user(user))["publish"].get("allow", [])  # type: ignore[attr-defined]
        for subject in forbidden:
            assert not any(bus.subjects_overlap(a, subject) for a in allowed), (user, subject)
        own = {(c.stream, c.name) for c in topology.consumers_of(user)}
        for c in topology.CONSUMERS:
            create = f"$JS.API.CONSUMER.CREATE.{c.stream}.{c.name}"
            granted = any(bus.subjects_overlap(a, create) for a in allowed)
            assert granted == ((c.stream, c.name) in own), (user, c.name)
