"""The locked bus (issue 15): nats-server runs with quiz_contracts.bus's users and permissions,
and refuses what a user may not do — proven against a real server and the real gateway."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import nats
import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from quiz_contracts import bus
from quiz_contracts import subjects as s
from quiz_testkit.nats_server import (
    NatsServer,
    dev_credentials,
    nats_connect,
    nats_server_binary,
)

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
    llm_callers = {u.name for u in bus.USERS if s.LLM_COMPLETE in u.publish and u.name != "ops"}
    assert llm_callers == {"editor-assist", "review", "poll", "lesson-fix"}
    runner_callers = {u.name for u in bus.USERS if s.RUNNER_RUN in u.publish}
    assert runner_callers == {"editor-assist"}
    assert set(bus.user("platform").publish) == {
        s.REVIEW_REQUESTS,
        "questions.v1.>",
        "poll.v1.open",
        "poll.v1.close",
        "poll.v1.join",
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

        async def answer(msg: nats.aio.msg.Msg) -> None:
            seen.append(msg.data)
            await msg.respond(b"{}")

        await gateway.subscribe(s.LLM_COMPLETE, "llm-gateway", cb=answer)
        await gateway.flush()
        payload = b"{}"  # the subject is what is refused, not the body

        # A caller with the right gets through.
        caller, _ = await _connect(server.url_for("editor-assist"))
        reply = await caller.request(s.LLM_COMPLETE, payload, timeout=2)
        assert reply.data == b"{}" and len(seen) == 1

        # The runner, the platform's publishers and monitoring may not request the gateway.
        for name in ("runner", "platform", "monitor"):
            client, errors = await _connect(server.url_for(name))
            with pytest.raises((NatsTimeoutError, NoRespondersError)):
                await client.request(s.LLM_COMPLETE, payload, timeout=0.5)
            assert await _eventually(lambda e=errors: _refused(e) >= 1), (name, errors)
            await client.close()
        assert len(seen) == 1, "a refused request reached the gateway"

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

        async def record(msg: nats.aio.msg.Msg) -> None:
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
        nc._error_cb = _collect(errors)  # type: ignore[attr-defined]  # see the errors it gets
        await nc.publish(s.LLM_COMPLETE, b"{}")
        await nc.flush()
        assert await _eventually(lambda: _refused(errors) >= 1), errors
        await nc.close()
    finally:
        server.stop()


def _collect(errors: list[Exception]) -> object:
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
