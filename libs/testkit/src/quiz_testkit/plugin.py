"""pytest plugin of the test kit: real nats-server, databases, JWTs, traces, the Anthropic stub."""

from __future__ import annotations

import asyncio
import gc
import io
import os
import secrets
import shutil
import tempfile
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from nats.aio.client import Client as NATS
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from quiz_servicekit.telemetry import setup_tracing
from quiz_testkit.databases import postgres_available, postgres_database
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer, nats_connect

if TYPE_CHECKING:
    from quiz_testkit.anthropic_stub import AnthropicStub
    from quiz_testkit.processes import ServiceProcess
    from quiz_testkit.siteverify_stub import SiteverifyStub

_SPANS = InMemorySpanExporter()
_MADE_CREDENTIALS = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    # One tracer provider per process: install ours before any service's lifespan does.
    setup_tracing("tests", SimpleSpanProcessor(_SPANS))
    # The locked bus (quiz_contracts.bus): one set of passwords for the session, which every
    # NatsServer started in it uses, and which services built or started by the tests read to
    # connect as themselves (quiz_servicekit.natsio.nats_auth) — so the suite runs locked.
    # The gateway's journal key (issue 29): one for the session, so that every gateway replica
    # a test builds or starts replays the others' journal entries, as deployed replicas do.
    os.environ.setdefault("LLM_GATEWAY_JOURNAL_KEY", secrets.token_hex(32))
    if "NATS_CREDENTIALS_DIR" not in os.environ:
        made = tempfile.mkdtemp(prefix="quiz-nats-credentials-")
        os.environ["NATS_CREDENTIALS_DIR"] = made
        config.stash[_MADE_CREDENTIALS] = made


def pytest_unconfigure(config: pytest.Config) -> None:
    made = config.stash.get(_MADE_CREDENTIALS, None)
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop("NATS_CREDENTIALS_DIR", None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """On pytest-timeout's failure (pyproject's `timeout`), the stack of every unfinished
    asyncio task: the thread dump shows only the event loop waiting in `select`, the task
    dump which `await` never returned."""
    report = yield
    if call.excinfo is not None and "pytest-timeout" in str(call.excinfo.value):
        report.sections.append(("asyncio tasks at the timeout", _pending_task_stacks()))
    return report


def _pending_task_stacks() -> str:
    # The session's loop is no longer running here (the timeout stopped it): its tasks are
    # found among the live objects.
    out = io.StringIO()
    tasks = [t for t in gc.get_objects() if isinstance(t, asyncio.Task) and not t.done()]
    for task in tasks:
        print(f"--- {task.get_name()}: {task.get_coro()!r}", file=out)
        task.print_stack(file=out)
    return out.getvalue() or "no unfinished asyncio task"


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A nats-server with JetStream on a free port, for the whole session."""
    server = NatsServer(tmp_path_factory.mktemp("nats")).start()
    yield server
    server.stop()
    # What the locked bus refused during the session: a refusal a test provoked on purpose
    # shows here too, but a service missing a permission in quiz_contracts.bus shows first.
    if refused := server.violations():
        warnings.warn(
            "the locked bus refused (quiz_contracts.bus):\n" + "\n".join(refused[:20]),
            stacklevel=1,
        )


@pytest.fixture(scope="session")
def nats_url(nats_server: NatsServer) -> str:
    return nats_server.url


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[NATS]:
    """A client connection to the session's nats-server."""
    client = await nats_connect(nats_url)
    yield client
    try:
        # nats-py's drain ends in waits of no deadline of their own (a flush queued behind a
        # stuck flusher, the socket's close waiting for the peer to read): bounded here, past
        # its own drain_timeout (30 s), so a teardown cannot hold the run (stop 37's CI run
        # stopped in test_lease between two tests, at a teardown or a set-up).
        await asyncio.wait_for(client.drain(), 40)
    except TimeoutError:
        warnings.warn("a NATS client did not drain within 40 s: abandoned", stacklevel=1)


@pytest.fixture(scope="session")
def signing_keys(tmp_path_factory: pytest.TempPathFactory) -> SigningKeys:
    """Ed25519 keys; `.jwks_path` verifies what `.mint(sub, grants)` signs."""
    return SigningKeys.load_or_create(tmp_path_factory.mktemp("jwt"))


@pytest.fixture(scope="session")
def pg_available() -> bool:
    return postgres_available()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(
    request: pytest.FixtureRequest, tmp_path: Path, pg_available: bool
) -> Iterator[str]:
    """Each test using it runs on SQLite, and on PostgreSQL when 127.0.0.1:5432 answers."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.db'}"
        return
    if not pg_available:
        pytest.skip("PostgreSQL does not answer on 127.0.0.1:5432")
    with postgres_database() as url:
        yield url


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans finished during the test (in-memory exporter)."""
    _SPANS.clear()
    yield _SPANS
    _SPANS.clear()


@pytest.fixture(scope="session")
def anthropic_stub_server() -> Iterator[AnthropicStub]:
    """The stub server for the whole session, not reset: for module-scoped fixtures."""
    from quiz_testkit.anthropic_stub import AnthropicStub

    stub = AnthropicStub()
    stub.start()
    yield stub
    stub.stop()


@pytest.fixture(scope="module")
def llm_gateway(
    nats_url: str, anthropic_stub_server: AnthropicStub, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """The real llm-gateway as its own process for the test module, calling the session's stub
    (SQLite in a fresh directory; `quiz_testkit.processes.llm_gateway_process` for other
    settings or scopes)."""
    from quiz_testkit.processes import llm_gateway_process

    gateway = llm_gateway_process(
        nats_url, anthropic_stub_server.base_url, tmp_path_factory.mktemp("llm-gateway")
    )
    with gateway as proc:
        yield proc


@pytest.fixture
def anthropic_stub(anthropic_stub_server: AnthropicStub) -> Iterator[AnthropicStub]:
    """The Anthropic-compatible stub, reset for each test; script it per call."""
    anthropic_stub_server.reset()
    yield anthropic_stub_server
    anthropic_stub_server.reset()


@pytest.fixture(scope="session")
def siteverify_server() -> Iterator[SiteverifyStub]:
    """A Turnstile-compatible siteverify server for the whole session, not reset."""
    from quiz_testkit.siteverify_stub import SiteverifyStub

    with SiteverifyStub() as stub:
        yield stub


@pytest.fixture
def siteverify(siteverify_server: SiteverifyStub) -> Iterator[SiteverifyStub]:
    """The siteverify server, reset for each test (calls, spent tokens, status)."""
    siteverify_server.reset()
    yield siteverify_server
    siteverify_server.reset()


def pytest_collection_modifyitems(config: pytest.Config, items: list[Any]) -> None:
    # Tests under an integration/ folder talk to real servers: mark them so `-m` can pick.
    for item in items:
        if "/integration/" in str(item.fspath) and not item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.integration)
