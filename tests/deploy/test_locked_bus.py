"""The locked bus (issue 15): nats-server runs with quiz_contracts.bus's users and permissions,
and refuses what a user may not do — proven against a real server and the real gateway."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import nats
import pytest
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from quiz_contracts import bus
from quiz_contracts import subjects as s
from quiz_contracts.llm import CompleteReply, CompleteRequest
from quiz_servicekit.natsio import request
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.nats_server import (
    NatsServer,
    dev_credentials,
    nats_connect,
    nats_server_binary,
)
from quiz_testkit.processes import llm_gateway_process

pytestmark = pytest.mark.integration


def test_every_rendered_configuration_is_current() -> None:
    """deploy/nats/accounts.conf and the Helm values are renders of the table, up to date."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gen", root / "scripts" / "gen_nats_config.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for path, text in gen.renders().items():
        assert path.read_text() == text, f"{path} is stale: run scripts/gen_nats_config.py"


def test_the_table_grants_what_the_issue_says() -> None:
    llm_callers = {
        u.name for u in bus.USERS if s.llm_complete_subject(u.name) in u.publish and u.name != "ops"
    }
    assert llm_callers == {"editor-assist", "review", "poll", "lesson-fix", "platform"}
    runner_callers = {u.name for u in bus.USERS if s.RUNNER_RUN in u.publish}
    assert runner_callers == {"editor-assist"}
    # The review's lint (issue 30): the platform and the wand, besides review's own prefix.
    lint_callers = {u.name for u in bus.callers(bus.user("review")) if u.name not in ("ops",)}
    assert lint_callers == {"platform", "editor-assist", "review", "monitor"}
    assert set(bus.user("platform").publish) == {
        s.REVIEW_REQUESTS,
        s.REVIEW_LINT,
        "questions.v1.>",
        "poll.v1.open",
        "poll.v1.close",
        "poll.v1.join",
        *bus.llm_requests("platform"),
    }
    # No service may touch the JetStream API account-wide.
    for u in bus.USERS:
        if u.name != "ops":
            publish = bus.permissions(u)["publish"]
            allowed = publish.get("allow", [])  # type: ignore[attr-defined]
            assert not any(p in ("$JS.API.>", ">", "$JS.>") for p in allowed), u.name


async def _eventually(cond: object, timeout_s: float = 5.0) -> bool:
    """True once `cond()` is (the server's -ERR arrives asynchronously, later on a busy host)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not cond():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _refused(errors: list[Exception]) -> int:
    return sum("permissions violation" in str(e).lower() for e in errors)


async def _connect(url: str) -> tuple[nats.NATS, list[Exception]]:
    errors: list[Exception] = []

    async def on_error(e: Exception) -> None:
        errors.append(e)

    return await nats_connect(url, error_cb=on_error, allow_reconnect=False), errors


async def test_refusals_on_the_locked_bus(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats").start()
    try:
        # A responder on llm.v1.complete that counts what reaches it (the gateway's queue).
        gateway, _ = await _connect(server.url_for("llm-gateway"))
        seen: list[bytes] = []

        async def answer(msg: Msg) -> None:
            seen.append(msg.data)
            await msg.respond(b"{}")

        await gateway.subscribe(s.LLM_COMPLETE_BY_CALLER, "llm-gateway", cb=answer)
        await gateway.flush()
        payload = b"{}"  # the subject is what is refused, not the body

        # A caller with the right gets through: a service, and the platform for its own
        # purposes (issue 31), each on its own subject.
        for n, name in enumerate(("editor-assist", "platform"), start=1):
            caller, _ = await _connect(server.url_for(name))
            reply = await caller.request(s.llm_complete_subject(name), payload, timeout=2)
            assert reply.data == b"{}" and len(seen) == n
            await caller.close()

        # The runner and monitoring may not request the gateway; the platform not on another
        # caller's subject.
        client, errors = await _connect(server.url_for("platform"))
        with pytest.raises((NatsTimeoutError, NoRespondersError)):
            await client.request(s.llm_complete_subject("review"), payload, timeout=0.5)
        assert await _eventually(lambda e=errors: _refused(e) >= 1), errors
        await client.close()
        for name in ("runner", "monitor"):
            client, errors = await _connect(server.url_for(name))
            with pytest.raises((NatsTimeoutError, NoRespondersError)):
                await client.request(s.llm_complete_subject(name), payload, timeout=0.5)
            assert await _eventually(lambda e=errors: _refused(e) >= 1), (name, errors)
            await client.close()
        assert len(seen) == 2, "a refused request reached the gateway"

        # Only editor-assist may request the runner.
        client, errors = await _connect(server.url_for("review"))
        with pytest.raises((NatsTimeoutError, NoRespondersError)):
            await client.request(s.RUNNER_RUN, b"{}", timeout=0.5)
        assert await _eventually(lambda: _refused(errors) >= 1), errors
        await client.close()

        # An outside publisher may publish a review request and question events, not more.
        platform, errors = await _connect(server.url_for("platform"))
        ops, _ = await _connect(server.url)
        got: list[str] = []
        last = asyncio.Event()

        async def record(msg: Msg) -> None:
            got.append(msg.subject)
            if msg.data == b"last":
                last.set()

        await ops.subscribe(">", cb=record)
        await ops.flush()
        # The server makes a new subscription visible to other clients' publishes a moment
        # after its PONG (a first publish was lost ~1 time in 10 here): the allowed subjects
        # are published until they arrive, which also proves the path to `ops` works.
        allowed = (s.REVIEW_REQUESTS, s.QUESTION_VERSION_PUBLISHED)
        for _ in range(10):
            for subject in allowed:
                await platform.publish(subject, b"{}")
            await platform.flush()
            if await _eventually(lambda: all(a in got for a in allowed), timeout_s=0.5):
                break
        else:
            pytest.fail(f"the allowed subjects never reached ops: {got}")
        await platform.publish("llm.v1.ledger.settle", b"{}")
        await platform.publish("$JS.API.STREAM.DELETE.DLQ", b"")
        # Published after the refused ones on the same connection: once it is here, anything
        # the server had let through would be here too.
        await platform.publish(s.REVIEW_REQUESTS, b"last")
        await platform.flush()
        assert await _eventually(lambda: _refused(errors) >= 2), errors
        assert await _eventually(last.is_set), got
        assert "llm.v1.ledger.settle" not in got and "$JS.API.STREAM.DELETE.DLQ" not in got

        # No credentials, or wrong ones: no connection at all.
        with pytest.raises(Exception, match=r"(?i)authorization"):
            await nats.connect(server.plain_url, allow_reconnect=False, max_reconnect_attempts=0)
        assert server.violations(), "the server logs what it refused"
        for c in (gateway, caller, platform, ops):
            await c.close()
    finally:
        server.stop()


def test_a_service_reads_its_own_credentials(tmp_path: Path) -> None:
    from quiz_servicekit.natsio import nats_auth
    from quiz_servicekit.settings import ServiceSettings

    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "review.password").write_text("s3cret\n")
    settings = ServiceSettings(nats_credentials_dir=str(creds))
    assert nats_auth(settings, "review") == {"user": "review", "password": "s3cret"}
    # A service the directory has no file for keeps the URL's own credentials (if any).
    assert nats_auth(settings, "poll") == {}
    # NATS_USER/NATS_PASSWORD win over the directory.
    explicit = ServiceSettings(
        nats_credentials_dir=str(creds), nats_user="review", nats_password="other"
    )
    assert nats_auth(explicit, "review") == {"user": "review", "password": "other"}
    assert nats_auth(ServiceSettings(nats_credentials_dir=None), "review") == {}


async def test_a_service_connects_as_itself_even_on_the_operators_url(tmp_path: Path) -> None:
    """The kit's connection takes the service's user over the ops credentials of the test
    kit's URL: services under test run with their own rights, not the harness's."""
    from quiz_servicekit.natsio import connect_nats, nats_auth
    from quiz_servicekit.settings import ServiceSettings

    server = NatsServer(tmp_path / "nats").start()
    try:
        settings = ServiceSettings(
            nats_url=server.url, nats_credentials_dir=str(server.credentials_dir)
        )
        errors: list[Exception] = []
        nc = await connect_nats(settings.nats_url, "runner", **nats_auth(settings, "runner"))
        nc._error_cb = _collect(errors)  # see the errors it gets
        await nc.publish(s.llm_complete_subject("runner"), b"{}")
        await nc.flush()
        assert await _eventually(lambda: _refused(errors) >= 1), errors
        await nc.close()
    finally:
        server.stop()


def _collect(errors: list[Exception]) -> Callable[[Exception], Awaitable[None]]:
    async def cb(e: Exception) -> None:
        errors.append(e)

    return cb


def _check_config(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [nats_server_binary(), "-c", str(path), "-t"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_the_environment_render_reads_every_password_we_make(tmp_path: Path) -> None:
    """The compose and Helm renders name each password as `$QUIZ_NATS_PASSWORD_<USER>`, which
    nats-server parses as a configuration value: the passwords dev_credentials keeps (and
    replaces, when an older file holds one nats-server cannot read) always parse, whatever
    their first character. A `token_urlsafe` password starting with `-` made the compose
    stack's nats fail to start one time in ~30."""
    conf = tmp_path / "accounts.conf"
    conf.write_text(bus.nats_accounts_config())
    creds = tmp_path / "creds"
    creds.mkdir()
    # The shapes that broke or could break: a leading dash, an exponent, digits only.
    for name, bad in zip(bus.USER_NAMES, ["-Hx5aZ", "7e5abc", "12345", "a_b"], strict=False):
        (creds / f"{name}.password").write_text(bad)
    rejected = _check_config(
        conf,
        {bus.password_env(n): (creds / f"{n}.password").read_text() for n in bus.USER_NAMES[:1]},
    )
    assert rejected.returncode != 0 and "could not be parsed" in rejected.stderr + rejected.stdout

    for _ in range(20):
        passwords = dev_credentials(creds)
        assert all(bus.PASSWORD_PATTERN.fullmatch(p) for p in passwords.values())
        env = {bus.password_env(n): p for n, p in passwords.items()}
        checked = _check_config(conf, env)
        assert checked.returncode == 0, checked.stderr + checked.stdout
        for secret in creds.iterdir():
            secret.unlink()
    # Kept passwords are reused, not replaced.
    first = dev_credentials(creds)
    assert dev_credentials(creds) == first


# --- Replies (issue 21 item 1, issue 20 item 3) and what the platform reads (issue 21 item 4) ---

# Every user but `ops` (account-wide by design) and `review` (the reader the tests protect).
OTHERS = tuple(n for n in bus.USER_NAMES if n not in ("ops", "review"))


def test_each_user_reads_replies_under_its_own_prefix_only() -> None:
    """The table: `_INBOX_<user>.>` and no other inbox; no `allow_responses` anywhere; the
    responders may write to exactly the prefixes of the users the table lets call them."""
    for u in bus.USERS:
        block = bus.permissions(u)
        assert "allow_responses" not in block, u.name
        subscribe = block["subscribe"]["allow"]  # type: ignore[index]
        inboxes = {p for p in subscribe if p.startswith("_INBOX")}
        assert inboxes == {f"_INBOX_{u.name}.>"}, (u.name, inboxes)

    def writes_to(name: str) -> set[str]:
        publish = bus.permissions(bus.user(name))["publish"]
        return {p for p in publish.get("allow", []) if p.startswith("_INBOX")}  # type: ignore[attr-defined]

    every_llm_caller = {
        "editor-assist",
        "review",
        "poll",
        "lesson-fix",
        "platform",
        "monitor",
        "ops",
    }
    assert writes_to("llm-gateway") == {f"_INBOX_{n}.>" for n in every_llm_caller}
    assert writes_to("runner") == {f"_INBOX_{n}.>" for n in ("editor-assist", "monitor", "ops")}
    assert "_INBOX_platform.>" in writes_to("poll")
    # Review answers one request, the lint (issue 30): its callers (the platform, the wand, and
    # review itself, whose publish rights cover its own prefix) and the Services API's.
    assert writes_to("review") == {
        f"_INBOX_{n}.>" for n in ("platform", "editor-assist", "review", "monitor", "ops")
    }
    # Who answers nothing writes to no one's replies.
    assert writes_to("platform") == writes_to("monitor") == set()


def test_the_platform_may_subscribe_to_exactly_what_is_published_for_it() -> None:
    subscribe = bus.permissions(bus.user("platform"))["subscribe"]["allow"]  # type: ignore[index]
    assert set(subscribe) == {s.REVIEW_COMPLETED, s.poll_tally_filter(), "_INBOX_platform.>"}


async def _as(server: NatsServer, name: str) -> tuple[nats.NATS, list[Exception]]:
    """A connection as `name` made the way every service makes its own (connect_nats, which
    reconnects forever), and the errors the server sends it."""
    from quiz_servicekit.natsio import connect_nats

    nc = await connect_nats(server.plain_url, name, user=name, password=server.passwords[name])
    errors: list[Exception] = []
    nc._error_cb = _collect(errors)  # see the errors it gets
    return nc, errors


def _refused_subjects(errors: list[Exception]) -> set[str]:
    """The subjects of the `Permissions Violation for Subscription to "<subject>"` errors,
    lower-cased (nats-py lower-cases the server's error)."""
    out = set()
    for e in errors:
        text = str(e).lower()
        if "permissions violation for subscription" in text and '"' in text:
            out.add(text.split('"')[1])
    return out


async def test_a_runner_cannot_read_another_users_replies(tmp_path: Path) -> None:
    """Connected as `runner`: subscribing to the default inbox `_INBOX.>` or to review's
    `_INBOX_review.>` is refused; its own `_INBOX_runner.>` is not."""
    server = NatsServer(tmp_path / "nats").start()
    try:
        runner, errors = await _as(server, "runner")
        for subject in ("_INBOX.>", "_INBOX_review.>", "_INBOX_runner.>"):
            await runner.subscribe(subject)
        await runner.flush()
        want = {"_inbox.>", "_inbox_review.>"}
        assert await _eventually(lambda: _refused_subjects(errors) >= want), errors
        await runner.flush()  # any -ERR about the third subscription came before this PONG
        assert _refused_subjects(errors) == want, errors
        await runner.close()
    finally:
        server.stop()


async def test_a_question_version_published_as_platform_reaches_review_and_no_one_else(
    tmp_path: Path,
) -> None:
    """The platform publishes a question version (with its answer key) on QUESTIONS; review's
    pull consumer fetches it, the delivery arriving on review's inbox. Every other user,
    subscribed to every inbox and subject it tries (what it may read, `_INBOX.>`, review's
    prefix, the question events, `>`), reads none of it."""
    server = NatsServer(tmp_path / "nats").start()
    try:
        review, _ = await _as(server, "review")
        js = review.jetstream()
        # The question store's stream and review's consumers: provisioned (NatsServer.start).

        spies: dict[str, list[bytes]] = {}
        spy_conns = []
        for name in OTHERS:
            nc, _ = await _as(server, name)
            spy_conns.append(nc)
            got: list[bytes] = []
            spies[name] = got

            async def record(msg: Msg, got: list[bytes] = got) -> None:
                got.append(msg.data)

            allowed = bus.permissions(bus.user(name))["subscribe"]["allow"]  # type: ignore[index]
            for subject in {*allowed, "_INBOX.>", "_INBOX_review.>", "questions.v1.>", ">"}:
                await nc.subscribe(subject, cb=record)
            await nc.flush()
        # A new subscription reaches other clients' publishes a moment after its PONG.
        await asyncio.sleep(0.5)

        platform, _ = await _as(server, "platform")
        secret = f"answer-key-{os.getpid()}-{id(server)}".encode()
        ack = await platform.jetstream().publish(
            s.QUESTION_VERSION_PUBLISHED, b'{"correct": "' + secret + b'"}'
        )
        assert ack.stream == s.QUESTIONS_STREAM

        sub = await js.pull_subscribe(
            s.QUESTION_VERSION_PUBLISHED,
            durable="review-version-published",
            stream=s.QUESTIONS_STREAM,
        )
        (msg,) = await sub.fetch(1, timeout=5)
        assert secret in msg.data and msg.reply.startswith("$JS.ACK.QUESTIONS.")
        await msg.ack()
        await asyncio.sleep(0.5)  # what a spy could have read has had time to arrive
        readers = {name for name, got in spies.items() if any(secret in d for d in got)}
        assert not readers, f"read review's delivery: {readers}"
        for nc in (*spy_conns, platform, review):
            await nc.close()
    finally:
        server.stop()


async def test_the_platform_reads_review_completed_and_the_poll_frames(tmp_path: Path) -> None:
    """The platform subscribes to `review.v1.completed` and `poll.v1.*.tally` and receives what
    review and poll publish there; anything wider (`review.v1.>`, `poll.v1.>`) is refused."""
    server = NatsServer(tmp_path / "nats").start()
    try:
        platform, errors = await _as(server, "platform")
        got: list[str] = []

        async def record(msg: Msg) -> None:
            got.append(msg.subject)

        frames = s.poll_tally_subject("ev-1")
        for subject in (s.REVIEW_COMPLETED, s.poll_tally_filter(), "review.v1.>", "poll.v1.>"):
            await platform.subscribe(subject, cb=record)
        await platform.flush()
        assert await _eventually(
            lambda: _refused_subjects(errors) >= {"review.v1.>", "poll.v1.>"}
        ), errors
        await platform.flush()
        assert _refused_subjects(errors) == {"review.v1.>", "poll.v1.>"}, errors

        review, _ = await _as(server, "review")
        poll, _ = await _as(server, "poll")
        # Published until they arrive: a subscription reaches other clients a moment late.
        for _ in range(10):
            await review.publish(s.REVIEW_COMPLETED, b"{}")
            await poll.publish(frames, b"{}")
            await review.flush()
            await poll.flush()
            if await _eventually(lambda: {s.REVIEW_COMPLETED, frames} <= set(got), 0.5):
                break
        else:
            pytest.fail(f"the platform never received them: {got}")
        for nc in (platform, review, poll):
            await nc.close()
    finally:
        server.stop()


# (caller, responder, subject served, subject published): each service the catalog names and a
# user the table lets call it (a model call on the caller's own subject, issue 29).
CALLS = (
    *(
        (caller, "llm-gateway", s.LLM_COMPLETE_BY_CALLER, s.llm_complete_subject(caller))
        for caller in ("editor-assist", "review", "poll", "lesson-fix", "platform")
    ),
    ("editor-assist", "runner", s.RUNNER_RUN, s.RUNNER_RUN),
    ("platform", "poll", s.POLL_OPEN, s.POLL_OPEN),
)


async def test_a_reply_published_after_a_nats_restart_reaches_its_caller(tmp_path: Path) -> None:
    """Issue 20: nats-server restarts between request and reply (same port). Both sides
    reconnect; the responder then publishes its reply on its new connection — allowed by its
    reply rights on the caller's prefix, where `allow_responses` (per connection) refused it —
    and the caller, its reply subscription restored, receives it within its deadline."""
    server = NatsServer(tmp_path / "nats").start()
    try:
        held: dict[tuple[str, str], Msg] = {}
        responders = {r: await _as(server, r) for _, r, _, _ in CALLS}
        for responder, subject in sorted({(r, subject) for _, r, subject, _ in CALLS}):

            async def hold(msg: Msg, responder: str = responder) -> None:
                held[(msg.data.decode(), responder)] = msg

            await responders[responder][0].subscribe(subject, queue=responder, cb=hold)
        for nc, _ in responders.values():
            await nc.flush()
        callers = {c: await _as(server, c) for c, _, _, _ in CALLS}
        calls = {
            (c, r): asyncio.create_task(callers[c][0].request(subject, c.encode(), timeout=30))
            for c, r, _, subject in CALLS
        }
        assert await _eventually(lambda: len(held) == len(CALLS)), held.keys()

        server.stop()
        server.start()
        clients = [nc for nc, _ in (*responders.values(), *callers.values())]
        assert await _eventually(
            lambda: all(nc.is_connected and nc.stats["reconnects"] >= 1 for nc in clients), 20
        ), "a client did not reconnect"
        for nc in clients:
            await nc.flush()  # its subscriptions (the callers' reply inboxes) are back

        # A restored subscription reaches other clients' publishes a moment after its PONG:
        # a reply still unanswered after 1 s is published again (a refused one stays refused,
        # and the server's log says so).
        for _ in range(5):
            pending = [(c, r) for (c, r), call in calls.items() if not call.done()]
            if not pending:
                break
            for caller, responder in pending:
                await held[(caller, responder)].respond(b"answer for " + caller.encode())
            await asyncio.wait([calls[k] for k in pending], timeout=1)
        refused = [v for v in server.violations() if "Publish Violation" in v]
        unanswered = [k for k, call in calls.items() if not call.done()]
        assert not unanswered and not refused, (unanswered, refused)
        for (caller, responder), call in calls.items():
            assert call.result().data == b"answer for " + caller.encode(), (caller, responder)
        for nc in clients:
            await nc.close()
    finally:
        server.stop()


async def test_the_real_gateway_answers_a_paid_call_across_a_nats_restart(
    tmp_path: Path, anthropic_stub: AnthropicStub
) -> None:
    """Issue 20's fault, end to end: editor-assist's model call is with the provider when
    nats-server restarts; the gateway, reconnected, sends the paid answer, and the caller —
    reconnected too, within its deadline — receives it (it used to be refused and the caller
    waited out its deadline)."""
    server = NatsServer(tmp_path / "nats").start()
    try:
        with llm_gateway_process(server.url, anthropic_stub.base_url, tmp_path / "gateway"):
            caller, _ = await _as(server, "editor-assist")
            anthropic_stub.script(StubReply.slow(5, StubReply.tool({"choices": ["4"]})))
            call = asyncio.create_task(
                request(
                    caller,
                    s.llm_complete_subject("editor-assist"),
                    _complete_request(),
                    CompleteReply,
                    timeout=20,
                )
            )
            assert await _eventually(lambda: len(anthropic_stub.requests) == 1, 10)
            # The provider answers 5 s after the call arrived: both sides have reconnected
            # by then (each retries every 0.5 s), so the reply is sent on new connections.
            server.stop()
            server.start()
            reply = await call
            assert reply.output == {"choices": ["4"]}
            assert caller.stats["reconnects"] >= 1
            refused = [v for v in server.violations() if "Violation" in v]
            assert not refused, refused
            await caller.close()
    finally:
        server.stop()


def _complete_request() -> CompleteRequest:
    return CompleteRequest.model_validate(
        {
            "purpose": "generate",
            "user": "teacher-1",
            "messages": [{"role": "user", "content": "Propose the key."}],
            "output_schema": {
                "name": "proposal",
                "json_schema": {
                    "type": "object",
                    "properties": {"choices": {"type": "array", "items": {"type": "string"}}},
                    "required": ["choices"],
                },
            },
            "max_output_tokens": 300,
        }
    )
