"""What JetStream holds for the platform: every stream, durable consumer and KV bucket (issue 29).

The one declaration the provisioning step (`quiz_servicekit.provision`, run as the `ops` user by
`make provision`, which `make run` calls; a one-shot compose service; a Kubernetes Job before
the Deployments) creates and updates, and the one the bus permissions (`quiz_contracts.bus`)
derive the services' narrow JetStream rights from. No service creates, updates, deletes or
purges a stream or a bucket: a service checks at start that what it uses exists, runs its own
durable consumers (named here, created here first, so the server refuses to turn them into
push consumers: a push consumer could deliver a stream's messages to any subject) and reads
messages of the streams it consumes.

Plain data (no NATS client here): `quiz_servicekit.provision` turns each declaration into the
server's configuration. Units: seconds, bytes. `max_age_s=0` means no age limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from quiz_contracts import subjects as s

DAY_S = 86_400.0

# The dead-letter streams (quiz_servicekit.dead_letters): every service that runs consumers
# writes its dead letters to DLQ and reads its consumers' advisories from DLQ_ADVISORIES.
DEAD_LETTER_STREAM = "DLQ"
DEAD_LETTER_PREFIX = "dlq"
ADVISORY_STREAM = "DLQ_ADVISORIES"
MAX_DELIVERIES_ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
TERMINATED_ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED"

# review's night lease (quiz_servicekit.lease.KvLease): its entries expire REVIEW_LEASE_TTL_S
# after their last write (the bucket's max age).
REVIEW_LEASE_BUCKET = "review_leases"
REVIEW_LEASE_TTL_S = 30.0

# editor-assist's settled runs (quiz_editor_assist.settled): a wand request answered from the
# gateway's stored reply reuses the run kept here (issue 29 item 6), for as long as the gateway
# keeps its reply (LLM_GATEWAY_IDEMPOTENCY_TTL_S, 600 s by default).
GENERATE_SETTLED_BUCKET = "generate_settled"
GENERATE_SETTLED_TTL_S = 600.0


@dataclass(frozen=True)
class StreamDecl:
    """One stream: the server's config fields we set, and who uses it; the one statement of a
    stream's fields (`quiz_servicekit.jetstream.stream_config` makes the server's config of it,
    with the replicas of the bus it is provisioned on).

    `external`: owned by another system (the platform's question store): created when missing
    (development), never updated. `readers`: the users that read it (stream info, message get)
    besides those running a consumer on it; `writers`: who may publish to its subjects is the
    bus table's business (`BusUser.publish`), listed here for the docs only.
    """

    name: str
    subjects: tuple[str, ...]
    retention: Literal["workqueue", "interest", "limits"] = "workqueue"
    max_age_s: float = 7 * DAY_S
    duplicate_window_s: float = 120.0
    max_msg_size: int = 1 << 20
    storage: Literal["file", "memory"] = "file"
    description: str = ""
    external: bool = False
    readers: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConsumerDecl:
    """One durable pull consumer with explicit acks, run by the service `user`.

    Provisioned with these values; the service may update its own consumer to its settings
    (ack wait, max deliveries: `$JS.API.CONSUMER.CREATE.<stream>.<name>` on an existing pull
    consumer), which the server never lets become a push consumer."""

    name: str
    stream: str
    user: str
    filter_subjects: tuple[str, ...] = ()
    ack_wait_s: float = 30.0
    max_deliver: int = 5
    description: str = ""
    # Unacked messages across all replicas; None: the server's default (none sets it at
    # provisioning; a service's ConsumerSpec may, when it updates its consumer).
    max_ack_pending: int | None = None


@dataclass(frozen=True)
class BucketDecl:
    """One KV bucket (its stream is `KV_<name>`), used by `user`; entries expire `ttl_s` after
    their last write."""

    name: str
    user: str
    ttl_s: float
    history: int = 1
    description: str = ""

    @property
    def stream(self) -> str:
        return f"KV_{self.name}"


def advisory_subjects(stream: str, consumer: str) -> tuple[str, ...]:
    """The advisory subjects the dead-letter forwarder of `stream`/`consumer` listens to."""
    return (
        f"{MAX_DELIVERIES_ADVISORY}.{stream}.{consumer}",
        f"{TERMINATED_ADVISORY}.{stream}.{consumer}",
    )


def forwarder_name(service: str) -> str:
    """The dead-letter forwarder consumer of `service` (on DLQ_ADVISORIES)."""
    return f"dlq-forwarder-{service}"


STREAMS: tuple[StreamDecl, ...] = (
    StreamDecl(
        s.LLM_JOURNAL_STREAM,
        (s.llm_journal_filter(),),
        retention="limits",
        max_age_s=0,  # a paid call's record never expires unwritten
        # A stored reply is the model's output (64k tokens at most): the bus's maximum.
        max_msg_size=s.NATS_MAX_PAYLOAD,
        description="llm-gateway: settles and paid replies its database has not taken yet",
        readers=("llm-gateway",),
    ),
    StreamDecl(
        s.REVIEW_REQUESTS_STREAM,
        (s.REVIEW_REQUESTS,),
        retention="workqueue",
        max_age_s=7 * DAY_S,
        # A publisher's retry of the same Nats-Msg-Id within ten minutes is stored once.
        duplicate_window_s=600.0,
        description="review.v1.requests: review a published version (ADR-060)",
    ),
    StreamDecl(
        s.REVIEW_EVENTS_STREAM,
        (s.REVIEW_COMPLETED,),
        retention="limits",
        max_age_s=7 * DAY_S,
        duplicate_window_s=600.0,
        description="review.v1.completed: what became of each review request",
        readers=("review",),
    ),
    StreamDecl(
        s.QUESTIONS_STREAM,
        ("questions.v1.>",),
        retention="limits",
        max_age_s=365 * DAY_S,
        duplicate_window_s=600.0,
        max_msg_size=4 << 20,
        description="the question store's events (created by provisioning for development)",
        external=True,
    ),
    StreamDecl(
        s.POLL_AI_STREAM,
        (s.POLL_AI_JOBS,),
        retention="workqueue",
        max_age_s=3600.0,  # a job an hour old has a stale lease anyway
        description="poll: AI pass jobs (ADR-072 §12)",
    ),
    StreamDecl(
        DEAD_LETTER_STREAM,
        (f"{DEAD_LETTER_PREFIX}.>",),
        retention="limits",
        max_age_s=30 * DAY_S,
        duplicate_window_s=600.0,
        description="Dead letters of every JetStream consumer (quiz_servicekit.dead_letters)",
        readers=("review", "poll"),
    ),
    StreamDecl(
        ADVISORY_STREAM,
        (f"{MAX_DELIVERIES_ADVISORY}.>", f"{TERMINATED_ADVISORY}.>"),
        # Interest: an advisory no forwarder filters for is dropped, the others wait for it.
        retention="interest",
        max_age_s=7 * DAY_S,
        description="Consumer advisories awaiting their dead-letter forwarder",
    ),
)

_SERVICE_CONSUMERS: tuple[ConsumerDecl, ...] = (
    *(
        ConsumerDecl(
            f"review-{name}",
            s.QUESTIONS_STREAM,
            "review",
            filter_subjects=(subject,),
            description=f"review's read model: {subject}",
        )
        for name, subject in (
            ("version-published", s.QUESTION_VERSION_PUBLISHED),
            ("version-deleted", s.QUESTION_VERSION_DELETED),
            ("question-retired", s.QUESTION_RETIRED),
            ("question-deleted", s.QUESTION_DELETED),
        )
    ),
    ConsumerDecl(
        "review-requests",
        s.REVIEW_REQUESTS_STREAM,
        "review",
        description="review.v1.requests → review.v1.completed",
    ),
    ConsumerDecl(
        "poll-ai",
        s.POLL_AI_STREAM,
        "poll",
        max_deliver=10,
        description="poll: runs the AI pass of a poll",
    ),
)


def _forwarders() -> tuple[ConsumerDecl, ...]:
    users = dict.fromkeys(c.user for c in _SERVICE_CONSUMERS)
    return tuple(
        ConsumerDecl(
            forwarder_name(u),
            ADVISORY_STREAM,
            u,
            filter_subjects=tuple(
                subject
                for c in _SERVICE_CONSUMERS
                if c.user == u
                for subject in advisory_subjects(c.stream, c.name)
            ),
            max_deliver=10,
            description=f"dead letters of {u}'s consumers, from their advisories",
        )
        for u in users
    )


CONSUMERS: tuple[ConsumerDecl, ...] = (*_SERVICE_CONSUMERS, *_forwarders())

BUCKETS: tuple[BucketDecl, ...] = (
    BucketDecl(
        REVIEW_LEASE_BUCKET,
        "review",
        ttl_s=REVIEW_LEASE_TTL_S,
        description="leases (quiz_servicekit.lease)",
    ),
    BucketDecl(
        GENERATE_SETTLED_BUCKET,
        "editor-assist",
        ttl_s=GENERATE_SETTLED_TTL_S,
        description="settled runs kept with the gateway's stored replies (editor-assist)",
    ),
)


def stream(name: str) -> StreamDecl:
    """The declaration of stream `name`; KeyError when there is none."""
    for decl in STREAMS:
        if decl.name == name:
            return decl
    raise KeyError(name)


def consumer(stream_name: str, name: str) -> ConsumerDecl:
    """The declaration of consumer `name` on `stream_name`; KeyError when there is none."""
    for decl in CONSUMERS:
        if decl.stream == stream_name and decl.name == name:
            return decl
    raise KeyError(f"{stream_name}/{name}")


def consumers_of(user: str) -> tuple[ConsumerDecl, ...]:
    return tuple(c for c in CONSUMERS if c.user == user)


def buckets_of(user: str) -> tuple[BucketDecl, ...]:
    return tuple(b for b in BUCKETS if b.user == user)


def streams_read_by(user: str) -> tuple[str, ...]:
    """The streams `user` reads (info, message get): those of its consumers, and those that
    name it a reader."""
    names = [c.stream for c in consumers_of(user)]
    names += [d.name for d in STREAMS if user in d.readers]
    return tuple(dict.fromkeys(names))
