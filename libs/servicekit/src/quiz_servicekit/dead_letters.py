"""Dead letters: the JetStream messages a consumer gave up on, kept in the `DLQ` stream to inspect.

Two paths write a dead letter, and the second never duplicates the first:
1. The consumer kit (`quiz_servicekit.jetstream`) writes one itself, with the original message
   in hand, before it terminates a message: undecodable (`invalid`), refused by the handler as
   permanent (`permanent`), or failed on its last allowed delivery (`exhausted`).
2. The server's advisories `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>` and
   `…MSG_TERMINATED.<stream>.<consumer>` are stored by the `DLQ_ADVISORIES` stream (interest
   retention, so they wait while no replica runs) and a forwarder consumer per service turns them
   into dead letters (`max_deliveries`, `terminated`), fetching the original message by its
   stream sequence while the stream still holds it. This is the path of a message whose
   consumer process died or hung on every delivery.

One dead letter per (stream, consumer, stream sequence): its subject is
`dlq.<stream>.<consumer>.<stream_seq>` and it is published with
`Nats-Expected-Last-Subject-Sequence: 0`, so the server refuses a second one at any time.

A dead letter's payload is the original payload (empty when the original was gone); its headers
are the original headers (minus the server's `Nats-*` directives) plus the `Dlq-*` headers below.

Operators (see docs/jetstream.md): `python -m quiz_servicekit.dead_letters list|show|replay`,
or the `nats` CLI: `nats stream view DLQ`, `nats stream get DLQ <seq>`,
`nats stream subjects DLQ 'dlq.REVIEW.>'`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import nats
from nats.js import JetStreamContext, api
from nats.js.errors import APIError, NotFoundError
from pydantic import BaseModel

from quiz_contracts import topology
from quiz_servicekit.natsio import inbox_prefix_for, nats_servers

# Declared in quiz_contracts.topology (provisioned by operations, issue 29 item 1).
DEAD_LETTER_STREAM = topology.DEAD_LETTER_STREAM
DEAD_LETTER_PREFIX = topology.DEAD_LETTER_PREFIX
ADVISORY_STREAM = topology.ADVISORY_STREAM
MAX_DELIVERIES_ADVISORY = topology.MAX_DELIVERIES_ADVISORY
TERMINATED_ADVISORY = topology.TERMINATED_ADVISORY
# The subjects a consumer's dead-letter forwarder listens to (declared with the topology).
advisory_subjects = topology.advisory_subjects

# Headers a dead letter carries besides the original ones.
HDR_STREAM = "Dlq-Stream"
HDR_CONSUMER = "Dlq-Consumer"
HDR_STREAM_SEQ = "Dlq-Stream-Seq"
HDR_SUBJECT = "Dlq-Subject"
HDR_DELIVERIES = "Dlq-Deliveries"
HDR_REASON = "Dlq-Reason"
HDR_DETAIL = "Dlq-Detail"
HDR_ORIGINAL = "Dlq-Original"
HDR_ORIGINAL_MSG_ID = "Dlq-Original-Msg-Id"
_MAX_DETAIL = 500
# JetStream's "wrong last sequence" errors: the subject already holds a dead letter.
_WRONG_LAST_SEQUENCE = (10071, 10164)


class DeadLetterReason(StrEnum):
    """Why a message became a dead letter."""

    invalid = "invalid"  # the payload did not decode into the consumer's model
    permanent = "permanent"  # the handler raised an error no retry can fix
    exhausted = "exhausted"  # the handler failed on the last delivery max_deliver allows
    max_deliveries = "max_deliveries"  # the server's advisory: deliveries ran out unanswered
    terminated = "terminated"  # the server's advisory: terminated outside the kit


class ConsumerAdvisory(BaseModel):
    """The nats-server's MAX_DELIVERIES or MSG_TERMINATED advisory (io.nats.jetstream.advisory.v1).

    The server's shape, not ours: https://docs.nats.io/running-a-nats-service/nats_admin/
    monitoring/monitoring_jetstream (max_deliver and terminated schemas).
    """

    type: str
    id: str
    timestamp: str
    stream: str
    consumer: str
    stream_seq: int
    deliveries: int
    consumer_seq: int | None = None
    reason: str | None = None

    @property
    def is_max_deliveries(self) -> bool:
        return self.type.endswith(".max_deliver")


def dead_letter_subject(stream: str, consumer: str, stream_seq: int) -> str:
    return f"{DEAD_LETTER_PREFIX}.{stream}.{consumer}.{stream_seq}"


def _header_value(text: str) -> str:
    """One line of printable text: NATS headers cannot carry CR/LF."""
    flat = " ".join(text.split())
    return flat[:_MAX_DETAIL]


async def write_dead_letter(
    js: JetStreamContext,
    *,
    stream: str,
    consumer: str,
    stream_seq: int,
    subject: str | None,
    data: bytes | None,
    headers: Mapping[str, str] | None,
    reason: DeadLetterReason,
    detail: str,
    deliveries: int,
) -> bool:
    """Store one dead letter; False when this message already has one. Raises on a broker error."""
    original_headers = dict(headers or {})
    msg_id = original_headers.pop(api.Header.MSG_ID.value, None)
    out = {k: v for k, v in original_headers.items() if not k.startswith("Nats-")}
    out.update(
        {
            HDR_STREAM: stream,
            HDR_CONSUMER: consumer,
            HDR_STREAM_SEQ: str(stream_seq),
            HDR_SUBJECT: subject or "",
            HDR_DELIVERIES: str(deliveries),
            HDR_REASON: reason.value,
            HDR_DETAIL: _header_value(detail) or reason.value,
            HDR_ORIGINAL: "kept" if data is not None else "missing",
            # The server refuses a second message on this subject: one dead letter per message.
            api.Header.EXPECTED_LAST_SUBJECT_SEQUENCE.value: "0",
            api.Header.MSG_ID.value: dead_letter_subject(stream, consumer, stream_seq),
        }
    )
    if msg_id:
        out[HDR_ORIGINAL_MSG_ID] = msg_id
    try:
        ack = await js.publish(
            dead_letter_subject(stream, consumer, stream_seq),
            data or b"",
            stream=DEAD_LETTER_STREAM,
            headers=out,
        )
    except APIError as e:
        if e.err_code in _WRONG_LAST_SEQUENCE:
            return False
        raise
    return not ack.duplicate


async def forward_advisory(js: JetStreamContext, advisory: ConsumerAdvisory) -> bool:
    """Turn one advisory into a dead letter (False when the kit already wrote it).

    The original is fetched by stream sequence when the stream still holds it. A message that
    ran out of deliveries stays in a work-queue stream forever (nothing else may consume it), so
    there it is deleted once its dead letter is stored.
    """
    reason = (
        DeadLetterReason.max_deliveries
        if advisory.is_max_deliveries
        else DeadLetterReason.terminated
    )
    try:
        await js.get_last_msg(
            DEAD_LETTER_STREAM,
            dead_letter_subject(advisory.stream, advisory.consumer, advisory.stream_seq),
        )
        return False
    except NotFoundError:
        pass
    original: api.RawStreamMsg | None
    try:
        original = await js.get_msg(advisory.stream, advisory.stream_seq)
    except NotFoundError:
        original = None
    detail = advisory.reason or (
        f"{advisory.deliveries} deliveries without an answer"
        if advisory.is_max_deliveries
        else "terminated"
    )
    written = await write_dead_letter(
        js,
        stream=advisory.stream,
        consumer=advisory.consumer,
        stream_seq=advisory.stream_seq,
        subject=original.subject if original else None,
        data=(original.data or b"") if original else None,
        headers=original.headers if original else None,
        reason=reason,
        detail=detail,
        deliveries=advisory.deliveries,
    )
    if original is not None and advisory.is_max_deliveries:
        info = await js.stream_info(advisory.stream)
        if info.config.retention == api.RetentionPolicy.WORK_QUEUE:
            try:
                await js.delete_msg(advisory.stream, advisory.stream_seq)
            except NotFoundError:
                pass
    return written


@dataclass(frozen=True)
class DeadLetter:
    """One dead letter as an operator reads it."""

    seq: int  # sequence in the DLQ stream
    stream: str
    consumer: str
    stream_seq: int
    subject: str  # the original message's subject ("" when the original was gone)
    reason: str
    detail: str
    deliveries: int
    original_kept: bool
    time: dt.datetime | None
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)  # the original's, minus Dlq-*

    @property
    def original_msg_id(self) -> str | None:
        return self.headers.get(HDR_ORIGINAL_MSG_ID)


def _dead_letter(raw: api.RawStreamMsg) -> DeadLetter:
    # The DLQ's own publish directives (Nats-Msg-Id, Nats-Expected-*) are not the original's.
    headers = {
        str(k): str(v) for k, v in (raw.headers or {}).items() if not str(k).startswith("Nats-")
    }
    dlq = {
        k: headers.pop(k)
        for k in list(headers)
        if k.startswith("Dlq-") and k != HDR_ORIGINAL_MSG_ID
    }
    return DeadLetter(
        seq=raw.seq or 0,
        stream=dlq.get(HDR_STREAM, ""),
        consumer=dlq.get(HDR_CONSUMER, ""),
        stream_seq=int(dlq.get(HDR_STREAM_SEQ) or 0),
        subject=dlq.get(HDR_SUBJECT, ""),
        reason=dlq.get(HDR_REASON, ""),
        detail=dlq.get(HDR_DETAIL, ""),
        deliveries=int(dlq.get(HDR_DELIVERIES) or 0),
        original_kept=dlq.get(HDR_ORIGINAL) == "kept",
        time=raw.time,
        data=raw.data or b"",
        headers=headers,
    )


def dead_letter_filter(stream: str | None = None, consumer: str | None = None) -> str:
    """The DLQ subject filter of one stream and/or consumer (all dead letters by default)."""
    return f"{DEAD_LETTER_PREFIX}.{stream or '*'}.{consumer or '*'}.*"


async def read_dead_letters(
    js: JetStreamContext,
    *,
    stream: str | None = None,
    consumer: str | None = None,
    after_seq: int = 0,
    limit: int = 100,
) -> list[DeadLetter]:
    """Dead letters in DLQ order after `after_seq`, optionally of one stream and/or consumer."""
    found: list[DeadLetter] = []
    seq = after_seq + 1
    subject = dead_letter_filter(stream, consumer)
    while len(found) < limit:
        try:
            raw = await js.get_msg(DEAD_LETTER_STREAM, seq=seq, subject=subject, next=True)
        except NotFoundError:
            break
        found.append(_dead_letter(raw))
        seq = (raw.seq or seq) + 1
    return found


async def get_dead_letter(js: JetStreamContext, seq: int) -> DeadLetter:
    """The dead letter at DLQ sequence `seq`; NotFoundError when there is none."""
    return _dead_letter(await js.get_msg(DEAD_LETTER_STREAM, seq=seq))


async def replay_dead_letter(js: JetStreamContext, seq: int, *, delete: bool = True) -> api.PubAck:
    """Publish the original of dead letter `seq` again on its subject (then delete the letter).

    The replay carries the original headers and a fresh `Nats-Msg-Id`
    (`<original id>.replay.<seq>`): the original id may still sit in the stream's duplicate
    window. Handlers are idempotent by business id, so a replay of work already done is a no-op.
    """
    letter = await get_dead_letter(js, seq)
    if not letter.original_kept or not letter.subject:
        raise ValueError(f"dead letter {seq} has no original message to replay")
    headers = {k: v for k, v in letter.headers.items() if k != HDR_ORIGINAL_MSG_ID}
    headers[api.Header.MSG_ID.value] = f"{letter.original_msg_id or letter.stream_seq}.replay.{seq}"
    ack = await js.publish(letter.subject, letter.data, headers=headers)
    if delete:
        await js.delete_msg(DEAD_LETTER_STREAM, seq)
    return ack


def no_letters_line(stream: str | None, consumer: str | None, after_seq: int) -> str:
    """What `list` says when it finds nothing: "no dead letters (stream REVIEW, after #4)"."""
    where = [f"stream {stream}"] if stream else []
    where += [f"consumer {consumer}"] if consumer else []
    where += [f"after #{after_seq}"] if after_seq else []
    return "no dead letters" + (f" ({', '.join(where)})" if where else "")


def _print_letter(letter: DeadLetter, *, full: bool) -> None:
    when = letter.time.isoformat(timespec="seconds") if letter.time else "?"
    print(
        f"{letter.seq}\t{when}\t{letter.stream}/{letter.consumer}#{letter.stream_seq}\t"
        f"{letter.reason}\tdeliveries={letter.deliveries}\t{letter.subject}\t{letter.detail}"
    )
    if full:
        for k, v in sorted(letter.headers.items()):
            print(f"  {k}: {v}")
        print(letter.data.decode("utf-8", "replace"))


async def _cli(args: argparse.Namespace) -> int:
    nc = await nats.connect(
        servers=nats_servers(args.nats_url), inbox_prefix=inbox_prefix_for(args.nats_url)
    )
    try:
        js = nc.jetstream()
        if args.command == "list":
            found = await read_dead_letters(
                js,
                stream=args.stream,
                consumer=args.consumer,
                after_seq=args.after,
                limit=args.limit,
            )
            for letter in found:
                _print_letter(letter, full=False)
            if not found:
                # A line for a person (on stderr: stdout stays one line per letter).
                print(no_letters_line(args.stream, args.consumer, args.after), file=sys.stderr)
        elif args.command == "show":
            _print_letter(await get_dead_letter(js, args.seq), full=True)
        else:
            ack = await replay_dead_letter(js, args.seq, delete=not args.keep)
            print(f"replayed dead letter {args.seq} as {ack.stream} #{ack.seq}")
        return 0
    except NotFoundError:
        print("no such dead letter", file=sys.stderr)
        return 1
    finally:
        await nc.close()


def main(argv: list[str] | None = None) -> int:
    """`python -m quiz_servicekit.dead_letters list|show SEQ|replay SEQ` against $NATS_URL."""
    parser = argparse.ArgumentParser(prog="python -m quiz_servicekit.dead_letters")
    parser.add_argument("--nats-url", default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    sub = parser.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="one line per dead letter")
    ls.add_argument("--stream")
    ls.add_argument("--consumer")
    ls.add_argument("--after", type=int, default=0, help="DLQ sequence to start after")
    ls.add_argument("--limit", type=int, default=100)
    show = sub.add_parser("show", help="one dead letter with its headers and payload")
    show.add_argument("seq", type=int)
    replay = sub.add_parser("replay", help="publish the original again, then delete the letter")
    replay.add_argument("seq", type=int)
    replay.add_argument("--keep", action="store_true", help="keep the dead letter")
    return asyncio.run(_cli(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
