"""The request ids (`idempotency_keys`): one answer per request_id across replicas."""

from __future__ import annotations

from sqlalchemy import Connection

from quiz_llm_gateway.rows.base import (
    Claim,
    Tables,
)
from quiz_servicekit.db import read_only, transaction


class RequestIdRows(Tables):
    """The request ids (`idempotency_keys`): a call's claim, the reply kept for its repeats, the
    release after a failure, and the pruning of expired ones."""

    @transaction
    def claim_request(
        self, conn: Connection, key: str, digest: str, call_id: str, now: float, until: float
    ) -> Claim:
        """Take `key` for `call_id` until `until`, unless a live row has it (returned)."""
        q = self._q
        conn.exec_driver_sql(q["idem_expire"], {"key": key, "now": now})
        params = {"key": key, "digest": digest, "call_id": call_id, "now": now, "until": until}
        if conn.exec_driver_sql(q["idem_claim"], params).rowcount == 1:
            return Claim(True)
        row = conn.exec_driver_sql(q["idem_get"], {"key": key}).first()
        if row is None:  # released between our insert and read: the caller claims again
            return Claim(False)
        return Claim(False, str(row[0]), str(row[1]), row[2])

    @read_only
    def request_row(self, conn: Connection, key: str) -> Claim | None:
        """The current row of `key`, if any."""
        row = conn.exec_driver_sql(self._q["idem_get"], {"key": key}).first()
        return Claim(False, str(row[0]), str(row[1]), row[2]) if row is not None else None

    @transaction
    def finish_request(
        self,
        conn: Connection,
        key: str,
        digest: str,
        call_id: str,
        reply: str,
        until: float,
        now: float,
    ) -> None:
        """Keep `call_id`'s reply for `key` until `until`.

        Its claim row is there (the usual case), or was pruned meanwhile (a reply replayed from
        the journal after a long database outage): then the row is made again with the reply,
        unless another call holds the key now (that call answers it).
        """
        params = {"key": key, "call_id": call_id, "reply": reply, "until": until}
        if conn.exec_driver_sql(self._q["idem_done"], params).rowcount == 1 or until <= now:
            return
        conn.exec_driver_sql(self._q["idem_put"], {**params, "digest": digest, "now": now})

    @transaction
    def forget_request(self, conn: Connection, key: str, call_id: str) -> None:
        """Release `key` after `call_id` failed: the request may be asked again."""
        conn.exec_driver_sql(self._q["idem_forget"], {"key": key, "call_id": call_id})

    @transaction
    def prune_requests(self, conn: Connection, now: float) -> int:
        """Forget expired idempotency keys (and the replies they kept)."""
        return conn.exec_driver_sql(self._q["idem_prune"], {"now": now}).rowcount
