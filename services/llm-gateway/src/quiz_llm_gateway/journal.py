"""A local write-ahead journal of settles the database did not take (issue 10, item 3).

When a settle cannot be written (the database refuses connections, is locked, or does not
answer within `settle_timeout_s`), its hold and ledger row are appended to this process's
journal file and fsync'ed *before* the caller gets its reply: a paid call is never only in
memory. The sweep (every `sweep_interval_s`, at start and at stop) replays every journal in
the directory — this process's own, and those of processes that are gone (a dead process's
`flock` is released by the OS) — and drops what the database took. The replay is safe to
repeat: settle is idempotent on (call_id, attempt) (migration 0003).

Files: `<dir>/settle-<random>.jsonl` (one JSON object a line: the hold and the ledger row, no
prompt text) and its `.lock`, held with `flock` while the process lives.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import date, datetime
from pathlib import Path
from typing import IO

from quiz_llm_gateway.repository import Held, LedgerRow

log = logging.getLogger(__name__)
Entry = tuple[Held | None, LedgerRow]


def encode(held: Held | None, row: LedgerRow) -> str:
    """One journal line."""
    r = asdict(row)
    r["at"] = row.at.isoformat()
    r["day"] = row.day.isoformat()
    h = None
    if held is not None:
        h = {"id": held.id, "day": held.day.isoformat(), "amount_micros": held.amount_micros}
    return json.dumps({"held": h, "row": r}, separators=(",", ":")) + "\n"


def decode(line: str) -> Entry:
    """The hold and row of a journal line."""
    data = json.loads(line)
    r = data["row"]
    r["at"] = datetime.fromisoformat(r["at"])
    r["day"] = date.fromisoformat(r["day"])
    h = data["held"]
    held = Held(h["id"], date.fromisoformat(h["day"]), int(h["amount_micros"])) if h else None
    return held, LedgerRow(**r)


def _key(row: LedgerRow) -> tuple[str, int]:
    return row.call_id, row.attempt


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

    async def append(self, held: Held | None, row: LedgerRow) -> None:
        """Write the entry and fsync it (file and directory); returns once it is durable."""
        line = encode(held, row)
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

    async def replay(self, settle: Callable[[Held | None, LedgerRow], Awaitable[None]]) -> int:
        """Settle every entry of every journal nobody alive holds; returns how many landed."""
        if not self.directory.is_dir():
            return 0
        landed = 0
        for path in sorted(self.directory.glob("settle-*.jsonl")):
            own = path == self.path
            lock = None if own else _try_lock(path.with_suffix(".lock"))
            if not own and lock is None:
                continue  # a live process replays its own
            try:
                landed += await self._replay_file(path, settle, own)
            finally:
                if lock is not None:
                    lock.close()
        return landed

    async def _replay_file(
        self,
        path: Path,
        settle: Callable[[Held | None, LedgerRow], Awaitable[None]],
        own: bool,
    ) -> int:
        entries = await asyncio.to_thread(_read, path)
        done: set[tuple[str, int]] = set()
        for held, row in entries:
            try:
                await settle(held, row)
            except Exception:
                log.warning("journal replay: settle of call %s still failing", row.call_id)
                break  # the database is still away: keep the rest for the next sweep
            done.add(_key(row))
        if done:
            async with self._mutex:
                # Re-read under the mutex: entries appended during the replay are kept.
                await asyncio.to_thread(_rewrite, path, done, own)
            log.info("journal replay: %d settle(s) written from %s", len(done), path.name)
        return len(done)

    def close(self) -> None:
        """Release this process's lock (its journal stays for the next start)."""
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None
            with contextlib.suppress(OSError):
                if not self.path.exists():
                    (self.directory / f"{self.name}.lock").unlink()


def _read(path: Path) -> list[Entry]:
    entries: list[Entry] = []
    with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break  # torn last line of a crash mid-write: its call never got a reply
            try:
                entries.append(decode(line))
            except (ValueError, KeyError, TypeError):
                log.error("journal %s: unreadable line skipped", path.name)
    return entries


def _rewrite(path: Path, done: set[tuple[str, int]], own: bool) -> None:
    remaining = [e for e in _read(path) if _key(e[1]) not in done]
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
        f.writelines(encode(h, r) for h, r in remaining)
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


def entries_of(directory: str | Path) -> list[Entry]:
    """Every entry of every journal in `directory` (tests, operations)."""
    found: list[Entry] = []
    for path in sorted(Path(directory).glob("settle-*.jsonl")):
        found.extend(_read(path))
    return found


__all__ = ["SettleJournal", "decode", "encode", "entries_of"]
