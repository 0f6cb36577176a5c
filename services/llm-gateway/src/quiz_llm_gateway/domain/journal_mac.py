"""Journal entries the gateway wrote, and no one else (issue 29 item 2). Pure.

An entry published on the JetStream journal carries `mac`: HMAC-SHA256 (RFC 2104, hex) under
the gateway's journal key (LLM_GATEWAY_JOURNAL_KEY, a secret no other service holds — not the
bus password: a stolen `llm-gateway` bus credential can publish on the journal's subjects but
cannot sign) over `<subject>\\n<entry JSON without mac>`. The subject binds an entry to its
database (`llm.v1.journal.<database id>`): one signed for another database does not verify.
Replay applies only what verifies (`compare_digest`: constant time).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from quiz_contracts.llm_journal import JournalEntry

# A key shorter than this is refused: HMAC-SHA256's strength is at most the key's.
MIN_KEY_BYTES = 32


# Fields added after entries were first signed (issue 31's cache token counts): left out of the
# signed text while they hold their default 0, so an entry written before them — decoded today
# with 0 there — signs to the very text it was signed as, and still verifies and replays.
_CACHE_FIELDS = ("cache_read_input_tokens", "cache_creation_input_tokens")


# Likewise the quota on the reply (issue 31, CompleteReply.remaining_usd/remaining_calls):
# left out while null, so a stored reply journaled before them still verifies.
_QUOTA_FIELDS = ("remaining_usd", "remaining_calls")


def _zero_fields(model: Any) -> set[str]:
    return {name for name in _CACHE_FIELDS if getattr(model, name, None) == 0}


def _message(subject: str, entry: JournalEntry) -> bytes:
    exclude: dict[str, Any] = {"mac": True}
    if entry.row is not None and (row := _zero_fields(entry.row)):
        exclude["row"] = row
    if entry.reply is not None:
        reply = entry.reply.reply
        left_out: dict[str, Any] = {n: True for n in _QUOTA_FIELDS if getattr(reply, n) is None}
        if usage := _zero_fields(reply.usage):
            left_out["usage"] = usage
        if left_out:
            exclude["reply"] = {"reply": left_out}
    body = entry.model_dump_json(exclude=exclude)
    return subject.encode() + b"\n" + body.encode()


def mac_of(key: bytes, subject: str, entry: JournalEntry) -> str:
    """The entry's MAC on `subject` (hex, 64 characters)."""
    return hmac.new(key, _message(subject, entry), hashlib.sha256).hexdigest()


def sign(key: bytes, subject: str, entry: JournalEntry) -> JournalEntry:
    """The entry with its `mac` for `subject`."""
    return entry.model_copy(update={"mac": mac_of(key, subject, entry)})


def verify(key: bytes, subject: str, entry: JournalEntry) -> bool:
    """Whether `entry` carries the MAC `key` gives it on `subject` (False without one)."""
    if entry.mac is None:
        return False
    return hmac.compare_digest(entry.mac, mac_of(key, subject, entry))


def check_key(key: bytes) -> bytes:
    """`key` when long enough; ValueError otherwise."""
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"the journal key must be at least {MIN_KEY_BYTES} bytes")
    return key
