"""The gateway's rows: every SQL statement, by group of tables, composed into `Repository`.

`base` (the tables, the statements of every call, the row shapes, `is_outage`), `tables` (the
SQLModel tables), and one module per group of tables on `base.Tables`: `ledger`, `holds`,
`rates`, `slices`, `requests`.
"""

from __future__ import annotations

from quiz_llm_gateway.rows.base import (
    HOT_SQL,
    LEDGER_COLUMNS,
    OUTAGE_ERRORS,
    Admission,
    AdmitArgs,
    Claim,
    DayTotals,
    Held,
    HeldRow,
    LedgerRow,
    RateKey,
    SpendRow,
    is_outage,
    outage_error,
)
from quiz_llm_gateway.rows.holds import HoldRows
from quiz_llm_gateway.rows.ledger import LedgerRows
from quiz_llm_gateway.rows.requests import RequestIdRows
from quiz_llm_gateway.rows.slices import CapSliceRows


class Repository(LedgerRows, HoldRows, CapSliceRows, RequestIdRows):
    """The gateway's database: one short transaction per operation, each run whole in a thread.

    On servicekit's Database (a sync engine and a bounded thread pool; docs/llm-gateway.md says
    why not the async engine). The hot path runs plain driver SQL (`exec_driver_sql`): five
    times cheaper than compiled Core. One group of tables a module, each on the
    shared base `rows.base.Tables`: `ledger` (settles, spend), `holds` (admissions, holds),
    `rates` (the rate log), `slices` (the cap's slices), `requests` (request ids).
    """


__all__ = [
    "HOT_SQL",
    "LEDGER_COLUMNS",
    "OUTAGE_ERRORS",
    "Admission",
    "AdmitArgs",
    "CapSliceRows",
    "Claim",
    "DayTotals",
    "Held",
    "HeldRow",
    "HoldRows",
    "LedgerRow",
    "LedgerRows",
    "RateKey",
    "Repository",
    "RequestIdRows",
    "SpendRow",
    "is_outage",
    "outage_error",
]
