"""Who may do what on the bus: the NATS users of the platform and their subject permissions.

The one source of truth for the locked bus (issue 15): `nats_accounts_config()` renders it into
the nats-server configuration that `make run` (scripts/devrun.py), the test kit's NatsServer,
docker-compose (deploy/nats/accounts.conf) and the NATS Helm chart values
(deploy/helm/nats-values.yaml) run with; `scripts/gen_nats_config.py` writes the committed
renders and a test fails when they are stale.

Rules (docs/operations.md, "The locked bus"):
- every service subscribes to its own request subjects (`<prefix>.>`) and to `$SRV.>` (the
  NATS Services API);
- every user reads replies on its own prefix only: its clients connect with nats-py's
  `inbox_prefix=inbox_prefix(<user>)` (`_INBOX_<user>`) and it may subscribe to
  `_INBOX_<user>.>`, never `_INBOX.>` — so nobody reads another user's model replies or
  JetStream deliveries (issue 21);
- a responder (the service the catalog names for a request/reply subject, and every service for
  `$SRV.>`) may publish to the reply prefix of each user whose publish rights reach those
  subjects (`reply_rights`, derived, never hand-listed). The grant is per user, not per
  connection like nats-server's `allow_responses`: a reply published after the responder
  reconnected (a NATS restart mid-call) still goes out (issue 20). No user has
  `allow_responses`;
- only the platform and editor-assist may request the review's lint (`review.v1.lint`);
- only editor-assist, review, poll and lesson-fix may request the gateway, each a model call on
  its own subject `llm.v1.complete.<user>` only (the gateway learns the caller from it, issue
  29 item 5), and `…availability`, `…usage`; only editor-assist may request the runner
  (`runner.v1.run`);
- no service reshapes JetStream (issue 29 item 1): the streams, durable consumers and KV buckets
  of `quiz_contracts.topology` are provisioned by `ops` (`quiz_servicekit.provision`). A
  service may read the streams it uses (stream info, message get), run its own named consumers
  (info, next, ack; create on its own names, which the server applies as an update of the pull
  consumer provisioning made, never turning it into a push consumer) and write its KV buckets'
  keys — never create, update, delete or purge a stream, nor touch another's consumer. The
  gateway alone may delete a message of its journal (a replayed entry);
- outside publishers (the platform's other services) may publish `review.v1.requests` and the
  question store's `questions.v1.>` events, request the poll's edge (`poll.v1.open|close|
  join`) and the review's lint (`review.v1.lint`), and read what is published for them:
  `review.v1.completed` and the poll's frames (`poll.v1.*.tally`), nothing else; `monitor`
  may ping `$SRV.>`;
- `ops` is the operators' account-wide user (the `nats` CLI, `quiz_servicekit.dead_letters`);
  no service runs with it.

A user's password is never here: the renders read it from the environment
(`QUIZ_NATS_PASSWORD_<USER>`, see `password_env`) or take it from the caller (dev, tests).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from quiz_contracts import subjects as s
from quiz_contracts import topology
from quiz_contracts.catalog import OPERATIONS

# The account every platform user lives in (JetStream enabled there).
ACCOUNT = "QUIZ"

# The dead letters every service that runs JetStream consumers writes (quiz_contracts.topology).
DEAD_LETTER_SUBJECTS = (f"{topology.DEAD_LETTER_PREFIX}.>",)

LLM_QUERIES = (s.LLM_AVAILABILITY, s.LLM_USAGE)


def llm_requests(caller: str) -> tuple[str, ...]:
    """What a caller of the gateway may publish: its own complete subject and the queries."""
    return (s.llm_complete_subject(caller), *LLM_QUERIES)


# poll's request/reply edge for the platform (poll.v1.open|close|join).
POLL_EDGE = tuple(f"{s.POLL_PREFIX}.{verb}" for verb in ("open", "close", "join"))


@dataclass(frozen=True)
class BusUser:
    """One NATS user: subjects it may publish and subscribe to. What it may answer is the
    catalog's (`answers`); its JetStream rights derive from quiz_contracts.topology
    (`jetstream_rights`)."""

    name: str
    publish: tuple[str, ...] = ()
    subscribe: tuple[str, ...] = ()
    # Receives replies to its own requests (and JetStream API replies, pull-consumer
    # deliveries, publish acks) on its own prefix `_INBOX_<name>.>`.
    inbox: bool = True
    # A service the platform deploys (gets a credential of its own in every deployment).
    service: bool = True


def stream_read_api(stream: str) -> tuple[str, ...]:
    """Reading one stream: its info (with subject counts) and message get, direct or not.
    Never `$JS.API.STREAM.CREATE|UPDATE|DELETE|PURGE` (issue 29 item 1)."""
    return (
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}.>",
    )


def consumer_api(stream: str, name: str) -> tuple[str, ...]:
    """Running one named durable pull consumer: info, create (applied as an update of the
    provisioned pull consumer: the server refuses to make it a push consumer), fetch, acks.
    Never `$JS.API.CONSUMER.DELETE` nor a consumer of another name."""
    return (
        f"$JS.API.CONSUMER.INFO.{stream}.{name}",
        f"$JS.API.CONSUMER.CREATE.{stream}.{name}",
        f"$JS.API.CONSUMER.CREATE.{stream}.{name}.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{name}",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}",
        f"$JS.ACK.{stream}.{name}.>",
    )


def jetstream_rights(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(publish, subscribe) JetStream rights of user `name`, from quiz_contracts.topology."""
    publish: list[str] = []
    subscribe: list[str] = []
    for stream in topology.streams_read_by(name):
        publish += stream_read_api(stream)
    for c in topology.consumers_of(name):
        publish += consumer_api(c.stream, c.name)
    for b in topology.buckets_of(name):
        # Keys are written by publishing to `$KV.<bucket>.<key>` (create, update with revision,
        # delete); read by message get on the bucket's stream.
        publish += [*stream_read_api(b.stream), f"$KV.{b.name}.>"]
        subscribe.append(f"$KV.{b.name}.>")
    if name == "llm-gateway":
        # A replayed journal entry leaves its stream (quiz_llm_gateway.settlement.stream_journal).
        publish.append(f"$JS.API.STREAM.MSG.DELETE.{s.LLM_JOURNAL_STREAM}")
    if publish:
        publish[:0] = JS_ACCOUNT_READ
    return tuple(publish), tuple(subscribe)


# Account-level read-only JetStream calls every JetStream user makes (account info; stream
# lookup by subject).
JS_ACCOUNT_READ = ("$JS.API.INFO", "$JS.API.STREAM.NAMES")

USERS: tuple[BusUser, ...] = (
    # Answers its subjects; its settle journal is the stream LLM_JOURNAL (issue 20), which it
    # alone may write (issue 29 item 2).
    BusUser(
        "llm-gateway",
        publish=(s.llm_journal_filter(),),
        subscribe=("llm.v1.>",),
    ),
    BusUser("runner", subscribe=("runner.v1.>",)),
    BusUser(
        "editor-assist",
        # review.v1.lint: the wand's proposal comes back linted (issue 30).
        publish=(*llm_requests("editor-assist"), s.RUNNER_RUN, s.REVIEW_LINT),
        # Its KV bucket generate_settled (the settled runs kept with the gateway's stored
        # replies, issue 29 item 6) comes from quiz_contracts.topology.
        subscribe=("generate.v1.>",),
    ),
    BusUser(
        "review",
        publish=(f"{s.REVIEW_PREFIX}.>", *llm_requests("review"), *DEAD_LETTER_SUBJECTS),
        subscribe=(f"{s.REVIEW_PREFIX}.>",),
    ),
    # Its tally frames (`poll.v1.<evaluation>.tally`, core NATS: every replica follows the
    # others' frames), its model calls, and its AI pass jobs (`poll.v1.ai.jobs` on the work
    # queue POLL_AI); its AI lease is a database row.
    BusUser(
        "poll",
        publish=(f"{s.POLL_PREFIX}.>", *llm_requests("poll"), *DEAD_LETTER_SUBJECTS),
        subscribe=(f"{s.POLL_PREFIX}.>",),
    ),
    BusUser(
        "lesson-fix",
        publish=llm_requests("lesson-fix"),
        subscribe=(f"{s.LESSON_FIX_PREFIX}.>",),
    ),
    # The platform's other services: review requests and the question store's events
    # (JetStream publishes: the stream's ack comes back on _INBOX_platform), and the poll's edge
    # (ADR-071: the platform opens, closes and joins polls, request/reply).
    # It reads what is published for it (issue 21): review's completed events and the poll's
    # live frames, exactly those.
    BusUser(
        "platform",
        publish=(s.REVIEW_REQUESTS, s.REVIEW_LINT, "questions.v1.>", *POLL_EDGE),
        subscribe=(s.REVIEW_COMPLETED, s.poll_tally_filter()),
        service=False,
    ),
    # Monitoring: the NATS Services API (`$SRV.PING|INFO|STATS`), nothing else.
    BusUser("monitor", publish=("$SRV.>",), service=False),
    # Operators: account-wide (provisioning, dead letters, `nats` CLI). Never a service.
    BusUser("ops", publish=(">",), subscribe=(">",), service=False),
)

USER_NAMES = tuple(u.name for u in USERS)


def user(name: str) -> BusUser:
    """The user called `name`; KeyError when the table has none."""
    for u in USERS:
        if u.name == name:
            return u
    raise KeyError(name)


def inbox_prefix(name: str) -> str:
    """The reply prefix of user `name`'s clients, nats-py's `inbox_prefix`: `_INBOX_<name>`.

    Requests' replies, JetStream API replies, pull-consumer deliveries and publish acks all
    arrive under it (nats-py derives every inbox from the connection's prefix)."""
    return f"_INBOX_{name}"


def inbox(name: str) -> str:
    """The subject filter of `name`'s replies, the only inbox it may read: `_INBOX_<name>.>`."""
    return f"{inbox_prefix(name)}.>"


def subjects_overlap(a: str, b: str) -> bool:
    """Whether one subject matches both NATS patterns `a` and `b` (`*` one token, `>` the
    rest, one token at least)."""
    ta, tb = a.split("."), b.split(".")
    for i in range(min(len(ta), len(tb))):
        x, y = ta[i], tb[i]
        if x == ">" or y == ">":
            return True
        if x != y and "*" not in (x, y):
            return False
    return len(ta) == len(tb)


def answers(u: BusUser) -> tuple[str, ...]:
    """The request/reply subjects `u` answers: its operations in the catalog, and the
    Services API (`$SRV.>`) for a service."""
    subjects = [op.subject for op in OPERATIONS if op.service == u.name]
    if u.service:
        subjects.append("$SRV.>")
    return tuple(subjects)


def callers(u: BusUser, users: tuple[BusUser, ...] = USERS) -> tuple[BusUser, ...]:
    """The users whose publish rights reach a subject `u` answers (itself included, when so)."""
    answered = answers(u)
    return tuple(
        c
        for c in users
        if c.inbox and any(subjects_overlap(p, a) for p in c.publish for a in answered)
    )


def reply_rights(u: BusUser, users: tuple[BusUser, ...] = USERS) -> tuple[str, ...]:
    """The reply prefixes `u` may publish to: its callers' `_INBOX_<caller>.>`.

    Explicit rights, not `allow_responses` (which nats-server keeps per connection and forgets
    when the responder reconnects): a reply published after a NATS restart mid-call is not
    refused. A responder can write to a caller's prefix, never read it."""
    return tuple(inbox(c.name) for c in callers(u, users))


def permissions(u: BusUser, users: tuple[BusUser, ...] = USERS) -> dict[str, object]:
    """nats-server's `permissions` block of one user (publish/subscribe allow-lists)."""
    publish = list(u.publish)
    subscribe = list(u.subscribe)
    publish += reply_rights(u, users)
    if u.inbox:
        subscribe.append(inbox(u.name))
    if u.service:
        subscribe.append("$SRV.>")
    if u.name != "ops":
        js_publish, js_subscribe = jetstream_rights(u.name)
        publish += js_publish
        subscribe += js_subscribe
    # An empty allow-list could read as "no restriction": say "deny all" instead. No
    # `allow_responses`: every reply a user sends is one of its explicit rights (its callers'
    # prefixes; `$JS.ACK.<stream>.>` and `$JS.FC.<stream>.>` for JetStream deliveries).
    return {
        "publish": {"allow": _unique(publish)} if publish else {"deny": [">"]},
        "subscribe": {"allow": _unique(subscribe)} if subscribe else {"deny": [">"]},
    }


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


# nats-server parses a variable's value as a configuration value, not as a string: a value that
# starts with `-` or a digit may be read as a number ("-Hx…" fails to parse, "7e5…" too, "123"
# becomes an integer). A password the environment render carries therefore starts with a letter
# and holds letters and digits only; 128 bits at least.
PASSWORD_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9]{21,}")


def new_password() -> str:
    """A fresh bus password matching PASSWORD_PATTERN: `p` and 48 hex digits (192 bits)."""
    return "p" + secrets.token_hex(24)


def password_env(name: str) -> str:
    """The environment variable a render reads `name`'s password from: QUIZ_NATS_PASSWORD_<USER>."""
    return "QUIZ_NATS_PASSWORD_" + name.upper().replace("-", "_")


def nats_accounts_config(
    passwords: Mapping[str, str] | None = None,
    *,
    users: tuple[BusUser, ...] = USERS,
    max_payload: int = s.NATS_MAX_PAYLOAD,
) -> str:
    """The nats-server configuration of the locked bus (accounts, users, permissions).

    `passwords` maps user → password, written in the file (dev and tests: the file is the
    secret); without it each password is the environment variable `password_env(user)`, which
    nats-server resolves at start-up (compose, Helm: the variables come from Secrets).
    """
    ref: Callable[[str], str] = (
        (lambda name: json.dumps(passwords[name]))
        if passwords is not None
        else (lambda name: "$" + password_env(name))
    )
    lines = [
        "# The locked bus: rendered from quiz_contracts.bus by scripts/gen_nats_config.py.",
        f"max_payload: {max_payload}",
        "accounts {",
        f"  {ACCOUNT} {{",
        "    jetstream: enabled",
        "    users: [",
    ]
    for u in users:
        perms = json.dumps(permissions(u, users), separators=(", ", ": "))
        lines.append(
            f"      {{user: {json.dumps(u.name)}, password: {ref(u.name)}, permissions: {perms}}}"
        )
    lines += ["    ]", "  }", "}", ""]
    return "\n".join(lines)
