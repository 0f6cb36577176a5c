"""The settle journal on JetStream: durable beyond one replica and its disk (issue 20, item 4).

A settle or stored reply the database did not take is published on the stream `LLM_JOURNAL`
(subject `llm.v1.journal.<database id>`, Nats-Msg-Id `settle:<call_id>:<attempt>` or
`reply:<key>#<call_id>:0`), provisioned by operations from quiz_contracts.topology (no other
service may publish there, nor reshape the stream: issue 29); the publish returns once the
stream acknowledged it (stored on its replicas' disks). Any replica replays the stream — at
start, every sweep, at stop — into the database it shares: entry by entry in stream order,
each deleted from the stream once the database took it. Two replicas replaying at once both
write the same entries, which is harmless: settle is idempotent on (call_id, attempt), a stored
reply on (key, call_id).

Only the gateway's own entries are applied (issue 29 item 2): `append` signs each entry
(HMAC-SHA256 under the journal key, `domain.journal_mac`), `replay` verifies it first; one that
fails (no MAC, a wrong one, signed for another database, or an invalid one: a negative cost)
is not applied, counted in `quiz_llm_gateway_journal_rejected_total{reason}`, logged at ERROR
with its stream sequence, and deleted from the stream (it would be refused at every sweep).

A retention `limits` stream without an age limit: an entry leaves only once written (or by an
operator's hand); `quiz_llm_gateway_settle_journal_pending` counts what is left.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from quiz_contracts import subjects
from quiz_contracts.llm_journal import JournalEntry
from quiz_llm_gateway.domain.journal_mac import check_key, sign, verify
from quiz_llm_gateway.settlement.journal import Apply, entry_key, entry_msg_id, transient
from quiz_servicekit.jetstream import publish

log = logging.getLogger(__name__)


class StreamJournal:
    """The JetStream journal of one gateway database (`database_id`, read from it once).

    `key`: the journal key (LLM_GATEWAY_JOURNAL_KEY, ≥ 32 bytes); `on_rejected(reason)` is
    called for each entry replay refuses (`unsigned`, `bad_mac`, `invalid`)."""

    def __init__(
        self,
        js: JetStreamContext,
        *,
        timeout_s: float,
        key: bytes,
        on_rejected: Callable[[str], None] = lambda _reason: None,
    ) -> None:
        self.js = js
        self.timeout_s = timeout_s
        self.key = check_key(key)
        self.on_rejected = on_rejected
        self.database_id: str | None = None
        # The last count read from the stream (-1: never read); the gauge uses it while NATS
        # cannot be asked.
        self.pending = -1

    @property
    def subject(self) -> str | None:
        return (
            subjects.llm_journal_subject(self.database_id) if self.database_id is not None else None
        )

    async def append(self, entry: JournalEntry) -> None:
        """Publish the entry; returns once the stream stored it. Raises when it did not
        (NATS away, no stream, no acknowledgement within `timeout_s`, database id unknown)."""
        subject = self.subject
        if subject is None:
            raise RuntimeError("the database id is not known yet: no journal subject")
        await publish(
            self.js,
            subject,
            sign(self.key, subject, entry),
            msg_id=entry_msg_id(entry),
            stream=subjects.LLM_JOURNAL_STREAM,
            timeout_s=self.timeout_s,
        )
        if self.pending >= 0:
            self.pending += 1

    async def count(self) -> int:
        """Entries of this database in the stream (also kept as `pending`)."""
        subject = self.subject
        if subject is None:
            return max(self.pending, 0)
        info = await self.js.stream_info(subjects.LLM_JOURNAL_STREAM, subjects_filter=subject)
        self.pending = sum((info.state.subjects or {}).values()) if info.state.messages else 0
        return self.pending

    async def replay(self, apply: Apply) -> int:
        """Apply this database's entries in stream order, deleting each once taken; returns
        how many were. Stops at the first transient failure (the database still away)."""
        subject = self.subject
        if subject is None:
            return 0
        info = await self.js.stream_info(subjects.LLM_JOURNAL_STREAM, subjects_filter=subject)
        if not info.state.messages or not info.state.subjects:
            self.pending = 0
            return 0
        seq, last = info.state.first_seq, info.state.last_seq
        landed = 0
        while seq <= last:
            try:
                msg = await self.js.get_msg(
                    subjects.LLM_JOURNAL_STREAM, seq=seq, subject=subject, next=True
                )
            except NotFoundError:
                break  # nothing of ours at or after seq
            assert msg.seq is not None
            seq = msg.seq + 1
            try:
                entry = JournalEntry.model_validate_json(msg.data or b"")
            except ValidationError as e:
                # Unreadable, or refused by the contract (a negative cost…): if it passed the
                # MAC it would still not be applied. Not ours to keep replaying.
                await self._reject(msg.seq, "invalid", f"{e.error_count()} validation error(s)")
                continue
            if not verify(self.key, subject, entry):
                reason = "unsigned" if entry.mac is None else "bad_mac"
                await self._reject(msg.seq, reason, f"entry {entry_key(entry)}")
                continue
            try:
                await apply(entry)
            except Exception as e:
                if transient(e):
                    log.warning("journal stream replay: still failing (%s)", type(e).__name__)
                    break
                log.exception("journal stream: entry %s refused; kept", entry_key(entry))
                continue
            with contextlib.suppress(NotFoundError):  # another replica deleted it first
                await self.js.delete_msg(subjects.LLM_JOURNAL_STREAM, msg.seq)
            landed += 1
        if landed:
            log.info("journal stream replay: %d entr(ies) written", landed)
        await self.count()
        return landed

    async def _reject(self, seq: int, reason: str, detail: str) -> None:
        """An entry the gateway did not write (or cannot apply): counted, logged, removed."""
        log.error(
            "journal stream: message %d refused (%s: %s), not applied; deleted",
            seq,
            reason,
            detail,
        )
        self.on_rejected(reason)
        with contextlib.suppress(NotFoundError):
            await self.js.delete_msg(subjects.LLM_JOURNAL_STREAM, seq)


__all__ = ["StreamJournal"]
