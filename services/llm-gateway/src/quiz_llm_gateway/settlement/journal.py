"""The local write-ahead journal: the last resort of settles nothing else took (issues 10, 20).

A settle (or a paid call's stored reply) the database does not take within `settle_timeout_s`
goes to the JetStream journal (`stream_journal.py`), which any replica replays; only when
JetStream does not take it either (NATS away too) is it appended to this process's journal
file and fsync'ed — still *before* the caller gets its reply: a paid call is never only in
memory. The sweep (every `sweep_interval_s`, at start and at stop) replays every journal file
in the directory — this process's own, and those of processes that are gone (a dead process's
`flock` is released by the OS) — into the database, or into the JetStream journal when only
that is back, and drops what was taken. The replay is safe to repeat: settle is idempotent on
(call_id, attempt) (migration 0003), a stored reply on (key, call_id).

Files: `<dir>/settle-<random>.jsonl` (one `quiz_contracts.llm_journal.JournalEntry` a line: a
hold and ledger row, or a stored reply; no prompt text) and its `.lock`, held with `flock`
while the process lives. Lines of the issue-10 format (`{"held", "row"}`) read the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm_journal import JournalEntry, JournalHold
from quiz_llm_gateway.rows import Held, LedgerRow, is_outage

log = logging.getLogger(__name__)
Apply = Callable[[JournalEntry], Awaitable[None]]


def settle_entry(held: Held | None, row: LedgerRow) -> JournalEntry:
    """The journal entry of a settle."""
    hold = None
    if held is not None:
        hold = JournalHold(
            id=held.id, day=held.day, amount_micros=held.amount_micros, lease_id=held.lease_id
        )
    # The row is the contract's own model (rows.LedgerRow derives from it): sent as it is.
    return JournalEntry(held=hold, row=row)


def settle_of(entry: JournalEntry) -> tuple[Held | None, LedgerRow]:
    """The hold and ledger row of a settle entry (ValueError for a reply entry)."""
    if entry.row is None:
        raise ValueError("not a settle entry")
    h = entry.held
    held = Held(h.id, h.day, h.amount_micros, h.lease_id) if h is not None else None
    return held, LedgerRow.model_validate(entry.row.model_dump())


def entry_key(entry: JournalEntry) -> tuple[str, str, int]:
    """What makes an entry one write: (call_id, attempt) of a settle, (key, call_id) of a reply."""
    if entry.reply is not None:
        return "reply", f"{entry.reply.key}#{entry.reply.call_id}", 0
    assert entry.row is not None
    return "settle", entry.row.call_id, entry.row.attempt


def entry_msg_id(entry: JournalEntry) -> str:
    """The entry's Nats-Msg-Id: a publish retried inside the duplicate window is stored once."""
    kind, name, attempt = entry_key(entry)
    return f"{kind}:{name}:{attempt}"


def encode(entry: JournalEntry) -> str:
    """One journal line."""
    return entry.model_dump_json() + "\n"


def decode(line: str) -> JournalEntry:
    """The entry of a journal line (ValueError when it is neither a settle nor a reply)."""
    entry = JournalEntry.model_validate_json(line)
    if entry.row is None and entry.reply is None:
        raise ValueError("empty journal entry")
    return entry


def transient(error: BaseException) -> bool:
    """A failure that passes (database or NATS away): replay stops and tries again later.

    Anything else (a bug, an entry the database refuses for good) skips that entry, kept for
    an operator, and the replay goes on: one bad entry never holds the others back.
    """
    if isinstance(error, ContractError):  # the kit's JetStream publish: NATS away, no stream
        return error.code in (ErrorCode.unavailable, ErrorCode.timeout)
    return (
        is_outage(error)
        or isinstance(error, TimeoutError | OSError | ConnectionError)
        or type(error).__module__.startswith("nats.")
    )


class SettleJournal:
    """This process's journal file, and the replay of every journal in its directory."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.name = f"settle-{uuid.uuid4().hex}"
        self.path = self.directory / f"{self.name}.jsonl"
        self._lock_file: IO[str] | None = None
        self._mutex = asyncio.Lock()

    def _open(self) -> None:
        if self._lock_file is not None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        lock = open(self.directory / f"{self.name}.lock", "w")
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._lock_file = lock

    async def append(self, entry: JournalEntry) -> None:
        """Write the entry and fsync it (file and directory); returns once it is durable."""
        line = encode(entry)
        async with self._mutex:
            await asyncio.to_thread(self._append, line)

    def _append(self, line: str) -> None:
        self._open()
        created = not self.path.exists()
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        if created:
            _fsync_dir(self.directory)

    async def replay(self, apply: Apply) -> int:
        """Apply every entry of every journal nobody alive holds; returns how many were taken."""
        if not self.directory.is_dir():
            return 0
        landed = 0
        for path in sorted(self.directory.glob("settle-*.jsonl")):
            own = path == self.path
            lock = None if own else _try_lock(path.with_suffix(".lock"))
            if not own and lock is None:
                continue  # a live process replays its own
            try:
                landed += await self._replay_file(path, apply, own)
            finally:
                if lock is not None:
                    lock.close()
        return landed

    async def _replay_file(self, path: Path, apply: Apply, own: bool) -> int:
        entries = await asyncio.to_thread(_read, path)
        done: set[tuple[str, str, int]] = set()
        for entry in entries:
            try:
                await apply(entry)
            except Exception as e:
                if transient(e):
                    log.warning("journal replay: %s still failing (%s)", path.name, e)
                    break  # the database is still away: keep the rest for the next sweep
                log.exception("journal replay: entry %s refused; kept", entry_key(entry))
                continue
            done.add(entry_key(entry))
        if done:
            async with self._mutex:
                # Re-read under the mutex: entries appended during the replay are kept.
                await asyncio.to_thread(_rewrite, path, done, own)
            log.info("journal replay: %d entr(ies) taken from %s", len(done), path.name)
        return len(done)

    def count(self) -> int:
        """Entries in every journal file of the directory (this process's and dead ones')."""
        return len(entries_of(self.directory)) if self.directory.is_dir() else 0

    def close(self) -> None:
        """Release this process's lock (its journal stays for the next start)."""
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None
            with contextlib.suppress(OSError):
                if not self.path.exists():
                    (self.directory / f"{self.name}.lock").unlink()


def _read(path: Path) -> list[JournalEntry]:
    entries: list[JournalEntry] = []
    with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break  # torn last line of a crash mid-write: its call never got a reply
            try:
                entries.append(decode(line))
            except (ValueError, ValidationError):
                log.error("journal %s: unreadable line skipped", path.name)
    return entries


def _rewrite(path: Path, done: set[tuple[str, str, int]], own: bool) -> None:
    remaining = [e for e in _read(path) if entry_key(e) not in done]
    if not remaining:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if not own:
            with contextlib.suppress(FileNotFoundError):
                path.with_suffix(".lock").unlink()
        _fsync_dir(path.parent)
        return
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(encode(e) for e in remaining)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _try_lock(path: Path) -> IO[str] | None:
    try:
        lock = open(path, "a")
    except OSError:
        return None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return None
    return lock


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def entries_of(directory: str | Path) -> list[JournalEntry]:
    """Every entry of every journal in `directory` (tests, operations)."""
    found: list[JournalEntry] = []
    for path in sorted(Path(directory).glob("settle-*.jsonl")):
        found.extend(_read(path))
    return found


__all__ = [
    "SettleJournal",
    "decode",
    "encode",
    "entries_of",
    "entry_key",
    "entry_msg_id",
    "settle_entry",
    "settle_of",
    "transient",
]
