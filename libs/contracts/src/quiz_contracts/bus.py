"""Who may do what on the bus: the NATS users of the platform and their subject permissions.

The one source of truth for the locked bus (issue 15): `nats_accounts_config()` renders it into
the nats-server configuration that `make run` (scripts/devrun.py), the test kit's NatsServer,
docker-compose (deploy/nats/accounts.conf) and the NATS Helm chart values
(deploy/helm/nats-values.yaml) run with; `scripts/gen_nats_config.py` writes the committed
renders and a test fails when they are stale.

Rules (docs/operations.md, "The locked bus"):
- every service subscribes to its own request subjects (`<prefix>.>`) and to `$SRV.>` (the
  NATS Services API), replies to what it received (`allow_responses`) and receives its own
  replies on `_INBOX.>`;
- only editor-assist, review, poll and lesson-fix may request the gateway (`llm.v1.complete`,
  `…availability`, `…usage`); only editor-assist may request the runner (`runner.v1.run`);
- the JetStream API is open to a service for its own streams (and the KV buckets, which are
  streams `KV_<bucket>`) only, never the whole account;
- outside publishers (the platform's other services) may publish `review.v1.requests` and the
  question store's `questions.v1.>` events, and request the poll's edge (`poll.v1.open|close|
  join`), nothing else; `monitor` may ping `$SRV.>`;
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

# The account every platform user lives in (JetStream enabled there).
ACCOUNT = "QUIZ"

# The dead-letter streams of quiz_servicekit.dead_letters (names repeated here: contracts do
# not import the kit); every service that runs JetStream consumers writes to them.
DEAD_LETTER_STREAMS = ("DLQ", "DLQ_ADVISORIES")
DEAD_LETTER_SUBJECTS = ("dlq.>",)

LLM_REQUESTS = (s.LLM_COMPLETE, s.LLM_AVAILABILITY, s.LLM_USAGE)
# poll's request/reply edge for the platform (poll.v1.open|close|join).
POLL_EDGE = tuple(f"{s.POLL_PREFIX}.{verb}" for verb in ("open", "close", "join"))


@dataclass(frozen=True)
class BusUser:
    """One NATS user: subjects it may publish and subscribe to, JetStream streams and KV
    buckets it owns (or consumes). `responds`: may reply to the requests it receives."""

    name: str
    publish: tuple[str, ...] = ()
    subscribe: tuple[str, ...] = ()
    streams: tuple[str, ...] = ()
    buckets: tuple[str, ...] = ()
    responds: bool = True
    # Receives replies to its own requests (and pull-consumer deliveries) on _INBOX.
    inbox: bool = True
    # A service the platform deploys (gets a credential of its own in every deployment).
    service: bool = True


def stream_api(stream: str) -> tuple[str, ...]:
    """The JetStream API subjects (and ack/flow-control replies) of one stream and its
    consumers: create/update/info/purge, consumers on it, fetch, direct and message get."""
    return (
        f"$JS.API.STREAM.*.{stream}",
        f"$JS.API.STREAM.MSG.*.{stream}",
        f"$JS.API.DIRECT.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}.>",
        f"$JS.API.CONSUMER.*.{stream}",
        f"$JS.API.CONSUMER.*.{stream}.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>",
        f"$JS.ACK.{stream}.>",
        f"$JS.FC.{stream}.>",
    )


# Account-level read-only JetStream calls every JetStream user makes (account info; stream
# lookup by subject).
JS_ACCOUNT_READ = ("$JS.API.INFO", "$JS.API.STREAM.NAMES")

USERS: tuple[BusUser, ...] = (
    # Answers its three subjects; its settle journal is the stream LLM_JOURNAL (issue 20).
    BusUser(
        "llm-gateway",
        publish=(s.llm_journal_filter(),),
        subscribe=("llm.v1.>",),
        streams=(s.LLM_JOURNAL_STREAM,),
    ),
    BusUser("runner", subscribe=("runner.v1.>",)),
    BusUser(
        "editor-assist",
        publish=(*LLM_REQUESTS, s.RUNNER_RUN),
        subscribe=("generate.v1.>",),
    ),
    BusUser(
        "review",
        publish=(f"{s.REVIEW_PREFIX}.>", *LLM_REQUESTS, *DEAD_LETTER_SUBJECTS),
        subscribe=(f"{s.REVIEW_PREFIX}.>",),
        streams=(
            s.REVIEW_REQUESTS_STREAM,
            s.REVIEW_EVENTS_STREAM,
            # The question store's stream: review consumes it (and declares it where the
            # platform has not, in development).
            s.QUESTIONS_STREAM,
            *DEAD_LETTER_STREAMS,
        ),
        # The night's lease (quiz_servicekit.lease.KvLease).
        buckets=("review_leases",),
    ),
    # Its tally frames (`poll.v1.<evaluation>.tally`, core NATS: every replica follows the
    # others' frames), its model calls, and its AI pass jobs (`poll.v1.ai.jobs` on the work
    # queue POLL_AI); its AI lease is a database row.
    BusUser(
        "poll",
        publish=(f"{s.POLL_PREFIX}.>", *LLM_REQUESTS, *DEAD_LETTER_SUBJECTS),
        subscribe=(f"{s.POLL_PREFIX}.>",),
        streams=(s.POLL_AI_STREAM, *DEAD_LETTER_STREAMS),
    ),
    BusUser(
        "lesson-fix",
        publish=LLM_REQUESTS,
        subscribe=(f"{s.LESSON_FIX_PREFIX}.>",),
    ),
    # The platform's other services: review requests and the question store's events
    # (JetStream publishes: the stream's ack comes back on _INBOX), and the poll's edge
    # (ADR-071: the platform opens, closes and joins polls, request/reply).
    BusUser(
        "platform",
        publish=(s.REVIEW_REQUESTS, "questions.v1.>", *POLL_EDGE),
        responds=False,
        service=False,
    ),
    # Monitoring: the NATS Services API (`$SRV.PING|INFO|STATS`), nothing else.
    BusUser("monitor", publish=("$SRV.>",), responds=False, service=False),
    # Operators: account-wide (streams, consumers, dead letters, `nats` CLI). Never a service.
    BusUser("ops", publish=(">",), subscribe=(">",), service=False),
)

USER_NAMES = tuple(u.name for u in USERS)


def user(name: str) -> BusUser:
    """The user called `name`; KeyError when the table has none."""
    for u in USERS:
        if u.name == name:
            return u
    raise KeyError(name)


def permissions(u: BusUser) -> dict[str, object]:
    """nats-server's `permissions` block of one user (publish/subscribe allow-lists)."""
    publish = list(u.publish)
    subscribe = list(u.subscribe)
    if u.inbox:
        subscribe.append("_INBOX.>")
    if u.service:
        subscribe.append("$SRV.>")
    if u.streams or u.buckets:
        publish += JS_ACCOUNT_READ
        for stream in u.streams:
            publish += stream_api(stream)
        for bucket in u.buckets:
            publish += [*stream_api(f"KV_{bucket}"), f"$KV.{bucket}.>"]
            subscribe.append(f"$KV.{bucket}.>")
    # An empty allow-list could read as "no restriction": say "deny all" instead (replies to
    # what a user received still pass through allow_responses).
    block: dict[str, object] = {
        "publish": {"allow": _unique(publish)} if publish else {"deny": [">"]},
        "subscribe": {"allow": _unique(subscribe)} if subscribe else {"deny": [">"]},
    }
    if u.responds:
        block["allow_responses"] = True
    return block


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
        perms = json.dumps(permissions(u), separators=(", ", ": "))
        lines.append(
            f"      {{user: {json.dumps(u.name)}, password: {ref(u.name)}, permissions: {perms}}}"
        )
    lines += ["    ]", "  }", "}", ""]
    return "\n".join(lines)
