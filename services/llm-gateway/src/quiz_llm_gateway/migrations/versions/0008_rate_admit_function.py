"""PostgreSQL's rate check as one statement: the function `llm_rate_admit` (issue 32 point 6).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# VOLATILE PL/pgSQL: each query inside takes its own snapshot (READ COMMITTED), so the count,
# run after the key's lock is granted, sees every event committed by the holder before us —
# what the two statements of `rate_lock` then `rate_step` did, without the BEGIN and COMMIT
# around them (one statement, its own transaction: the lock is held until its commit).
# `p_async` lowers synchronous_commit for this transaction only (rows/rates.py says why).
_CREATE = """
CREATE OR REPLACE FUNCTION llm_rate_admit(
    p_key text, p_at double precision, p_since double precision, p_limit integer,
    p_async boolean
) RETURNS TABLE (admitted boolean, times double precision[], counted bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    n bigint;
BEGIN
    IF p_async THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
    SELECT count(*) INTO n FROM rate_events WHERE key = p_key AND at > p_since;
    IF n < p_limit THEN
        INSERT INTO rate_events (key, at) VALUES (p_key, p_at);
        RETURN QUERY SELECT true, NULL::double precision[], n;
    ELSE
        RETURN QUERY SELECT false,
            ARRAY(SELECT e.at FROM rate_events e WHERE e.key = p_key AND e.at > p_since), n;
    END IF;
END
$fn$
"""


def upgrade() -> None:
    """Create `llm_rate_admit` on PostgreSQL (SQLite checks rates in process: nothing)."""
    if op.get_context().dialect.name == "postgresql":
        op.execute(_CREATE)


def downgrade() -> None:
    """Drop the function."""
    if op.get_context().dialect.name == "postgresql":
        op.execute(
            "DROP FUNCTION IF EXISTS llm_rate_admit("
            "text, double precision, double precision, integer, boolean)"
        )
