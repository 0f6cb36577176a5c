"""The chaos suite's model, load and watchers: what was asked, what was paid, what got done.

- `ModelStub` answers every provider request the gateways make (review, poll, direct calls)
  after a delay, and tags each answer with a unique `input_tokens` count (`TAG_BASE + n`): the
  gateway writes that count into the ledger row of the call, so each paid answer can be found
  in the ledger (a paid call without its row, or with two) without any id the gateway would
  have to pass on.
- `ReviewLoad` publishes version events and review requests as the question store does (plain
  JetStream, `Nats-Msg-Id`, a publisher that retries until its message is acknowledged), and
  watches the review database for each version's review.
- `PollLoad` opens brainstorms with AI on and sends participants' answers over HTTP to the poll
  replicas (a phone retries on a refused connection or a 5xx), and watches the marks.
- `DirectLoad` calls `llm.v1.complete` as the wand does (purpose generate, the teacher as
  user), each call with its own request id, retried with that id after a retryable error.

Everything is timed on `time.monotonic()`; the watchers read the services' databases directly,
never through NATS, so a fault of the bus cannot hide or delay what they see.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CompleteReply, CompleteRequest, LlmMessage, Purpose
from quiz_contracts.poll import BrainstormOpen, PollAck
from quiz_poll.domain.ideas import idea_key
from quiz_servicekit.natsio import request
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.question_events import arithmetic_mcq

TAG_BASE = 1000
REVIEW_DELAY_S = 1.0
DIRECT_DELAY_S = 1.0
POLL_DELAY_S = 2.0
OUTPUT_TOKENS = 50
# Codes a caller retries (with the same request id): the gateway or the bus could not serve it
# now. Anything else — internal above all — is an answer the caller cannot act on.
RETRYABLE = frozenset({ErrorCode.unavailable, ErrorCode.timeout, ErrorCode.rate_limited})
# How long a publisher, a phone or the platform keeps retrying before it gives up (and the
# item counts as refused): longer than any fault of the suite lasts.
GIVE_UP_S = 150.0


def now() -> float:
    return time.monotonic()


async def eventually(
    check: Callable[[], Awaitable[Any]], what: str, timeout_s: float, every_s: float = 0.25
) -> Any:
    """Await `check()` until it returns a truthy value; AssertionError after `timeout_s`."""
    deadline = now() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        if now() > deadline:
            raise AssertionError(f"not reached within {timeout_s:g} s: {what} ({value!r})")
        await asyncio.sleep(every_s)


def libpq(url: str) -> str:
    """A SQLAlchemy `postgresql+psycopg://` URL as psycopg takes it."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


async def query(url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows of one statement on a fresh connection (the watchers' only way in)."""
    async with await psycopg.AsyncConnection.connect(libpq(url), connect_timeout=5) as conn:
        cur = await conn.execute(sql, params)
        return list(await cur.fetchall())


# ---- the model --------------------------------------------------------------------------------


def prompt_of(body: dict[str, Any]) -> str:
    parts = [body.get("system") or ""]
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [block.get("text", "") for block in content or []]
    return "\n".join(p if isinstance(p, str) else json.dumps(p) for p in parts)


NEW_IDEAS = "NEW ideas to judge (data): "  # the poll's prompt (quiz_poll.domain.ai)


def poll_ideas(prompt: str) -> list[dict[str, str]] | None:
    """The NEW ideas of a poll's call ([{id, text}]), or None for another call."""
    for line in prompt.split("\n\n"):
        if line.startswith("NEW ideas to judge (data): "):
            ideas: list[dict[str, str]] = json.loads(
                line.removeprefix("NEW ideas to judge (data): ")
            )
            return ideas
    return None


@dataclass
class StubCall:
    """One provider request: its tag (the input tokens of its answer), what it was for."""

    tag: int
    kind: str  # review | poll | direct | other
    items: tuple[str, ...]  # review: the item number; direct: the call number; poll: idea texts
    started: float
    ends: float
    prompt: str = ""  # what the model was asked (to show how two calls of one item differ)


class ModelStub:
    """The stub's default reply for the whole session (see the module docstring)."""

    def __init__(self, stub: AnthropicStub) -> None:
        self.stub = stub
        self.calls: list[StubCall] = []
        self._lock = threading.Lock()
        stub.default = StubReply.callable(self._answer)

    def _answer(self, body: dict[str, Any]) -> StubReply:
        text = prompt_of(body)
        started = now()
        with self._lock:
            tag = TAG_BASE + len(self.calls)
            usage = {"input_tokens": tag, "output_tokens": OUTPUT_TOKENS}
            ideas = poll_ideas(text)
            if ideas is not None:
                kind, items, delay = "poll", tuple(i["text"] for i in ideas), POLL_DELAY_S
                verdicts = [
                    {
                        "id": i["id"],
                        "offensive": False,
                        "correction": i["text"].capitalize(),
                        "sameAs": None,
                    }
                    for i in ideas
                ]
                reply = StubReply.tool({"ideas": verdicts}, usage=usage)
            elif m := re.search(r"chaos-review-(\d+)", text):
                kind, items, delay = "review", (m.group(1),), REVIEW_DELAY_S
                reply = StubReply.tool({"findings": []}, usage=usage)
            elif m := re.search(r"chaos-direct-(\d+)", text):
                kind, items, delay = "direct", (m.group(1),), DIRECT_DELAY_S
                reply = StubReply.text("Une réponse.", usage=usage)
            else:
                kind, items, delay = "other", (), DIRECT_DELAY_S
                reply = StubReply.auto()
            self.calls.append(StubCall(tag, kind, items, started, started + delay, text))
        return StubReply.slow(delay, reply)

    def snapshot(self) -> list[StubCall]:
        with self._lock:
            return list(self.calls)

    def in_flight(self, kind: str | None = None) -> list[StubCall]:
        """Calls started and not yet answered (by their scheduled end)."""
        t = now()
        return [c for c in self.snapshot() if c.ends > t and (kind is None or c.kind == kind)]


# ---- review -----------------------------------------------------------------------------------


@dataclass
class ReviewItem:
    n: int
    version_id: str
    request_id: str
    submitted: float = 0.0
    acked: float | None = None
    publish_retries: int = 0
    publish_failed: bool = False
    re_requests: int = 0  # sent again after a retryable error answer
    done: float | None = None
    state: str | None = None


def review_event(n: int, version_id: str) -> dict[str, Any]:
    return arithmetic_mcq(
        n,
        question_id=f"chaos-q-{n}",
        version_id=version_id,
        pool_id="chaos-pool",
        prompt_tag=f"chaos-review-{n}",
        internal_name=f"chaos-{n}",
    )


class ReviewLoad:
    """Review requests as the platform sends them, and their reviews as the database has them."""

    def __init__(self, nc: NATS, database_url: str) -> None:
        self.nc = nc
        self.js = nc.jetstream(timeout=5)
        self.database_url = database_url
        self.items: dict[int, ReviewItem] = {}
        self._numbers = itertools.count()

    async def _publish(self, item: ReviewItem, subject: str, payload: Any, msg_id: str) -> bool:
        # The question store's publisher: retried with the same Nats-Msg-Id until acknowledged
        # (the stream keeps one), for GIVE_UP_S.
        while True:
            try:
                await self.js.publish(
                    subject, json.dumps(payload).encode(), headers={"Nats-Msg-Id": msg_id}
                )
                return True
            except Exception:
                item.publish_retries += 1
                if now() - item.submitted > GIVE_UP_S:
                    item.publish_failed = True
                    return False
                await asyncio.sleep(0.5)

    async def submit(self, *, version_first: bool = False) -> ReviewItem:
        """A version published then its review request. `version_first`: the request only
        once the version is in the read model (the two travel on different streams, and a
        request that comes first is retried after 1, 5, 30 s: a probe times each one)."""
        n = next(self._numbers)
        item = ReviewItem(n, f"chaos-v-{n}", f"chaos-{n}", submitted=now())
        self.items[n] = item
        if not await self._publish(
            item,
            subjects.QUESTION_VERSION_PUBLISHED,
            review_event(n, item.version_id),
            f"version-published:{item.version_id}",
        ):
            return item
        if version_first:

            async def known() -> bool:
                sql = "SELECT 1 FROM review_versions WHERE version_id = %s"
                return bool(await query(self.database_url, sql, (item.version_id,)))

            try:
                await eventually(known, f"{item.version_id} in the read model", GIVE_UP_S, 0.2)
            except AssertionError:
                return item
        request_body = {
            "questionId": f"chaos-q-{n}",
            "versionId": item.version_id,
            "user": None,
            "requestId": item.request_id,
        }
        if await self._publish(
            item, subjects.REVIEW_REQUESTS, request_body, f"review-request:{item.version_id}"
        ):
            item.acked = now()
        return item

    async def re_request(self, events: dict[str, list[dict[str, Any]]]) -> int:
        """The platform's side of a retryable answer (an error with `retry_after_s`: the
        review could not be had now, nothing was stored): the request is sent again, under a
        new `Nats-Msg-Id`, once per such answer. Returns how many were sent."""
        sent = 0
        for item in self.items.values():
            answers = events.get(item.request_id, [])
            if item.done is not None or any(e.get("review") for e in answers):
                continue
            refusals = [e for e in answers if retryable(e)]
            if len(refusals) > item.re_requests:
                item.re_requests += 1
                body = {
                    "questionId": f"chaos-q-{item.n}",
                    "versionId": item.version_id,
                    "user": None,
                    "requestId": item.request_id,
                }
                msg_id = f"review-request:{item.version_id}:again-{item.re_requests}"
                await self._publish(item, subjects.REVIEW_REQUESTS, body, msg_id)
                sent += 1
        return sent

    async def watch_once(self) -> None:
        rows = await query(self.database_url, "SELECT version_id, state FROM question_reviews")
        t = now()
        by_version = {i.version_id: i for i in self.items.values()}
        for version_id, state in rows:
            item = by_version.get(version_id)
            if item is not None and item.done is None:
                item.done, item.state = t, state

    async def wait_done(self, item: ReviewItem, timeout_s: float) -> float:
        async def done() -> bool:
            return item.done is not None

        await eventually(done, f"review of {item.version_id}", timeout_s)
        assert item.done is not None
        return item.done

    def pending(self) -> list[ReviewItem]:
        """Published and not reviewed yet."""
        return [i for i in self.items.values() if i.done is None and i.acked is not None]

    async def completed_events(self) -> dict[str, list[dict[str, Any]]]:
        """Every `review.v1.completed` event on REVIEW_EVENTS, by request id."""
        out: dict[str, list[dict[str, Any]]] = {}
        sub = await self.js.subscribe(
            subjects.REVIEW_COMPLETED, stream=subjects.REVIEW_EVENTS_STREAM, ordered_consumer=True
        )
        try:
            info = await self.js.stream_info(subjects.REVIEW_EVENTS_STREAM)
            last = info.state.last_seq
            seen = 0
            while seen < info.state.messages:
                msg = await sub.next_msg(timeout=10)
                seen += 1
                event = json.loads(msg.data)
                out.setdefault(event.get("requestId") or "", []).append(event)
                if msg.metadata.sequence.stream >= last:
                    break
        finally:
            await sub.unsubscribe()
        return out


def retryable(event: dict[str, Any]) -> bool:
    """A `review.v1.completed` answering an error the requester may retry (it says when)."""
    error = event.get("error") or {}
    return bool(error) and (error.get("retry_after_s") or error.get("retryAfterS")) is not None


# ---- poll -------------------------------------------------------------------------------------


@dataclass
class Idea:
    evaluation_id: str
    text: str
    key: str
    answered: float | None = None
    done: float | None = None


@dataclass
class PollStats:
    # The final status of each answer ("gave up": no replica answered within GIVE_UP_S).
    statuses: dict[str, int] = field(default_factory=dict)
    retried: int = 0  # answers that needed another try (a refused connection, a 5xx)


class PollLoad:
    """Brainstorms with AI on, participants answering through whichever replica is up."""

    def __init__(
        self,
        nc: NATS,
        keys: SigningKeys,
        database_url: str,
        replicas: Callable[[], list[str]],
    ) -> None:
        self.nc = nc
        self.keys = keys
        self.database_url = database_url
        self.replicas = replicas  # the base URLs of the replicas alive now
        self.polls: list[str] = []
        self.ideas: dict[tuple[str, str], Idea] = {}
        self.stats = PollStats()
        self.http = httpx.AsyncClient(timeout=30)
        self._attempts = itertools.count()

    def teacher(self, evaluation_id: str) -> str:
        return f"teacher-{evaluation_id}"

    async def _http(self, method: str, path: str, token: str, body: Any) -> httpx.Response | None:
        """A phone's or the board's request: another replica (or the same later) after a
        refused connection or a 5xx, until it is answered (None after GIVE_UP_S)."""
        tries = itertools.count()
        started = now()
        while now() - started < GIVE_UP_S:
            urls = self.replicas()
            url = urls[next(tries) % len(urls)] if urls else None
            if url is not None:
                with contextlib.suppress(httpx.HTTPError):
                    r = await self.http.request(
                        method, url + path, json=body, headers={"authorization": f"Bearer {token}"}
                    )
                    if r.status_code < 500:
                        return r
            self.stats.retried += 1
            await asyncio.sleep(0.5)
        return None

    async def open_poll(self, evaluation_id: str) -> bool:
        """Open the brainstorm and turn AI on; False when that could not be done in time."""
        body = BrainstormOpen.model_validate(
            {
                "evaluationId": evaluation_id,
                "teacherId": self.teacher(evaluation_id),
                "audience": {"kind": "anonymous"},
                "question": {"prompt": "Qu'est-ce qui caractérise le vivant ?", "maxIdeas": 5},
                "roster": [],
                "openedAt": datetime.now(UTC),
            }
        )
        started = now()
        while True:
            try:
                await request(self.nc, subjects.POLL_OPEN, body, PollAck, timeout=10)
                break
            except Exception:
                if now() - started > GIVE_UP_S:
                    return False
                await asyncio.sleep(0.5)
        staff = self.keys.mint(
            self.teacher(evaluation_id), {f"evaluation:{evaluation_id}": {"role": "owner"}}
        )
        r = await self._http(
            "POST", f"/app/api/evaluations/{evaluation_id}/poll/reveal", staff, {"ai": True}
        )
        if r is None or r.status_code != 200:
            return False
        self.polls.append(evaluation_id)
        return True

    async def answer(self, evaluation_id: str, texts: list[str]) -> list[Idea]:
        attempt = f"chaos-a{next(self._attempts)}"
        token = self.keys.mint(
            f"guest-{attempt}",
            {f"evaluation:{evaluation_id}": {"role": "viewer", "attempt": attempt, "guest": True}},
        )
        ideas = [Idea(evaluation_id, t, idea_key(t)) for t in texts]
        for idea in ideas:
            self.ideas[(evaluation_id, idea.key)] = idea
        r = await self._http(
            "POST", f"/app/api/evaluations/{evaluation_id}/poll/answer", token, {"ideas": texts}
        )
        status = "gave up" if r is None else str(r.status_code)
        self.stats.statuses[status] = self.stats.statuses.get(status, 0) + 1
        t = now()
        for idea in ideas:
            if status == "200":
                idea.answered = t
            else:
                del self.ideas[(evaluation_id, idea.key)]
        return ideas

    async def watch_once(self) -> None:
        rows = await query(
            self.database_url,
            "SELECT evaluation_id, key FROM poll_idea_marks WHERE status IS NOT NULL",
        )
        t = now()
        for evaluation_id, key in rows:
            idea = self.ideas.get((evaluation_id, key))
            if idea is not None and idea.done is None:
                idea.done = t

    def pending(self) -> list[Idea]:
        return [i for i in self.ideas.values() if i.answered is not None and i.done is None]

    async def wait_done(self, ideas: list[Idea], timeout_s: float) -> float:
        async def done() -> bool:
            return all(i.done is not None for i in ideas)

        await eventually(done, f"marks of {[i.text for i in ideas]}", timeout_s)
        return max(i.done or 0.0 for i in ideas)

    async def aclose(self) -> None:
        await self.http.aclose()


# ---- direct calls (the wand) ------------------------------------------------------------------


@dataclass
class DirectCall:
    n: int
    request_id: str
    started: float
    answered: float | None = None
    errors: list[tuple[float, str]] = field(default_factory=list)
    final_error: str | None = None


class ConnectionLost(Exception):
    """The caller's connection dropped while its request was out."""


class DirectLoad:
    """`llm.v1.complete.<caller>` as a caller that retries a retryable error with the same
    request id (the caller's own subject: the locked bus lets it publish no other, issue 29)."""

    def __init__(self, nc: NATS, give_up_s: float = 120.0, caller: str = "editor-assist") -> None:
        self.nc = nc
        self.subject = subjects.llm_complete_subject(caller)
        self.give_up_s = give_up_s
        self.calls: dict[int, DirectCall] = {}
        self._numbers = itertools.count()

    async def call(self) -> DirectCall:
        n = next(self._numbers)
        c = DirectCall(n, f"chaos-direct-{n}", now())
        self.calls[n] = c
        req = CompleteRequest(
            purpose=Purpose.generate,
            user=f"chaos-teacher-{n % 20}",
            messages=[LlmMessage(role="user", content=f"chaos-direct-{n} : une idée ?")],
            max_output_tokens=200,
            request_id=c.request_id,
            deadline_s=20,
        )
        while True:
            try:
                await self._send(req)
                c.answered = now()
                return c
            except ConnectionLost:
                # Our node went (a NATS restart): the reply may be lost; asked again at once,
                # same id, as quiz_servicekit.llm.LlmClient does.
                c.errors.append((now(), "transport:connection lost"))
                continue
            except ContractError as e:
                c.errors.append((now(), e.code.value))
                if e.code not in RETRYABLE:
                    c.final_error = e.code.value
                    return c
                wait = e.retry_after_s if e.retry_after_s is not None else 1.0
            except Exception as e:  # the connection itself (reconnecting, closed): retried
                c.errors.append((now(), f"transport:{type(e).__name__}"))
                wait = 1.0
            if now() - c.started > self.give_up_s:
                c.final_error = c.errors[-1][1]
                return c
            await asyncio.sleep(min(wait, 5.0))

    async def _send(self, req: CompleteRequest) -> CompleteReply:
        """One send; ConnectionLost when our connection drops or reconnects before the reply."""
        reconnects = self.nc.stats["reconnects"]
        sent = asyncio.ensure_future(request(self.nc, self.subject, req, CompleteReply, timeout=25))
        try:
            while True:
                done, _ = await asyncio.wait({sent}, timeout=0.1)
                if done:
                    return sent.result()
                if not self.nc.is_connected or self.nc.stats["reconnects"] != reconnects:
                    raise ConnectionLost
        finally:
            if not sent.done():
                sent.cancel()
                with contextlib.suppress(asyncio.CancelledError, ContractError):
                    await sent

    def error_codes(self, since: float = 0.0, until: float = float("inf")) -> dict[str, int]:
        counts: dict[str, int] = {}
        for c in self.calls.values():
            for t, code in c.errors:
                if since <= t <= until:
                    counts[code] = counts.get(code, 0) + 1
        return counts
