"""Every SQL statement of review: the read model of published versions, reviews, opted-in pools.

Plain SQL valid on SQLite and PostgreSQL alike (`Database.sql` adapts the parameter style). Each
operation is one transaction (`@transaction` / `@read_only`); results are frozen records.
Idempotence of the at-least-once inputs lives here: a version is inserted once (its id is the
key), a review row is keyed by its version, and what the store deleted or retired is remembered
in `review_gone`, so a late "published" event never revives it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection

from quiz_contracts.review import (
    QuestionReview,
    QuestionVersionPublished,
    ReviewFinding,
    ReviewState,
)
from quiz_review.domain.night import VersionRow
from quiz_review.domain.states import TabRow
from quiz_servicekit.db import Database, read_only, transaction

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def utc_text(at: datetime) -> str:
    """A fixed-width UTC text that sorts as the instants compare (naive times are refused)."""
    if at.tzinfo is None:
        raise ValueError("a naive datetime has no instant")
    return at.astimezone(UTC).strftime(_TIME_FORMAT)


def from_utc_text(text: str) -> datetime:
    return datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """A published version of the read model, with what a review call needs."""

    question_id: str
    pool_id: str
    version_id: str
    version_number: int
    type: str
    config: dict[str, Any]
    explanation: str
    internal_name: str
    published_at: datetime
    live: bool
    language: str | None = None


_VERSION_COLUMNS = (
    "v.question_id, v.pool_id, v.version_id, v.version_number, v.type, v.config, "
    "v.explanation, v.internal_name, v.published_at, v.live, v.language"
)
_REVIEW_COLUMNS = "r.version_number, r.state, r.findings, r.reviewed_at"
# The latest published version of v's question: the highest number the read model holds.
_IS_LATEST = (
    "v.version_number = (SELECT MAX(w.version_number) FROM review_versions w "
    "WHERE w.question_id = v.question_id)"
)

SQL: dict[str, str] = {
    "gone": "SELECT kind, at FROM review_gone WHERE key = :key",
    "insert_version": (
        "INSERT INTO review_versions (version_id, question_id, pool_id, version_number, type, "
        "config, explanation, internal_name, published_at, live, language) VALUES (:version_id, "
        ":question_id, :pool_id, :version_number, :type, :config, :explanation, :internal_name, "
        ":published_at, :live, :language) ON CONFLICT (version_id) DO NOTHING"
    ),
    "gone_upsert": (
        "INSERT INTO review_gone (key, kind, at) VALUES (:key, :kind, :at) "
        "ON CONFLICT (key) DO UPDATE SET kind = :kind, at = :at"
    ),
    "gone_insert": (
        "INSERT INTO review_gone (key, kind, at) VALUES (:key, :kind, :at) "
        "ON CONFLICT (key) DO NOTHING"
    ),
    "retire_versions": (
        "UPDATE review_versions SET live = :live WHERE question_id = :question_id "
        "AND published_at <= :at"
    ),
    "delete_version": "DELETE FROM review_versions WHERE version_id = :version_id",
    "delete_version_review": "DELETE FROM question_reviews WHERE version_id = :version_id",
    "delete_question_versions": "DELETE FROM review_versions WHERE question_id = :question_id",
    "delete_question_reviews": "DELETE FROM question_reviews WHERE question_id = :question_id",
    # Composed of the constant fragments above only: no input reaches the text.
    "version": (
        f"SELECT {_VERSION_COLUMNS} FROM review_versions v "  # noqa: S608
        "WHERE v.version_id = :version_id"
    ),
    "latest": (
        f"SELECT {_VERSION_COLUMNS} FROM review_versions v "  # noqa: S608
        "WHERE v.question_id = :question_id "
        "ORDER BY v.version_number DESC LIMIT 1"
    ),
    "review": (
        f"SELECT {_REVIEW_COLUMNS} FROM question_reviews r "  # noqa: S608
        "WHERE r.version_id = :version_id"
    ),
    "upsert_review": (
        "INSERT INTO question_reviews (version_id, question_id, version_number, state, findings, "
        "reviewed_at, reviewed_for) VALUES (:version_id, :question_id, :version_number, :state, "
        ":findings, :reviewed_at, :reviewed_for) ON CONFLICT (version_id) DO UPDATE SET "
        "state = :state, findings = :findings, reviewed_at = :reviewed_at, "
        "reviewed_for = :reviewed_for"
    ),
    "update_review": (
        "UPDATE question_reviews SET state = :state, findings = :findings "
        "WHERE version_id = :version_id AND findings = :before AND state = :before_state"
    ),
    "pool": "SELECT 1 FROM review_pools WHERE pool_id = :pool_id",
    "pool_on": (
        "INSERT INTO review_pools (pool_id, enabled_by, enabled_at) VALUES (:pool_id, :who, :at) "
        "ON CONFLICT (pool_id) DO NOTHING"
    ),
    "pool_off": "DELETE FROM review_pools WHERE pool_id = :pool_id",
    "tab": (
        f"SELECT v.question_id, v.internal_name, v.type, {_REVIEW_COLUMNS} "  # noqa: S608
        "FROM review_versions v LEFT JOIN question_reviews r ON r.version_id = v.version_id "
        f"WHERE v.pool_id = :pool_id AND v.live = :live AND {_IS_LATEST} "
        "ORDER BY v.published_at DESC, v.version_id"
    ),
    "night": (
        "SELECT v.question_id, v.pool_id, v.version_id, v.version_number, v.type, "  # noqa: S608
        "v.published_at, v.live, r.state, r.reviewed_at FROM review_versions v "
        "JOIN review_pools p ON p.pool_id = v.pool_id "
        "LEFT JOIN question_reviews r ON r.version_id = v.version_id "
        f"WHERE v.live = :live AND {_IS_LATEST} AND (r.state IS NULL OR r.state = :failed)"
    ),
    "opted_in": "SELECT pool_id FROM review_pools",
    "pool_lint": "SELECT 1 FROM review_pool_lint WHERE pool_id = :pool_id",
    "pool_lint_on": (
        "INSERT INTO review_pool_lint (pool_id, set_by, set_at) VALUES (:pool_id, :who, :at) "
        "ON CONFLICT (pool_id) DO NOTHING"
    ),
    "pool_lint_off": "DELETE FROM review_pool_lint WHERE pool_id = :pool_id",
}


def _findings_json(findings: Sequence[ReviewFinding]) -> str:
    return json.dumps([f.model_dump(mode="json") for f in findings], ensure_ascii=False)


def _review(row: Sequence[Any]) -> QuestionReview:
    number, state, findings, reviewed_at = row
    return QuestionReview(
        version_number=int(number),
        state=ReviewState(state),
        findings=[ReviewFinding.model_validate(f) for f in json.loads(findings)],
        reviewed_at=from_utc_text(reviewed_at),
    )


def _version(row: Sequence[Any]) -> VersionRecord:
    return VersionRecord(
        question_id=row[0],
        pool_id=row[1],
        version_id=row[2],
        version_number=int(row[3]),
        type=row[4],
        config=json.loads(row[5]),
        explanation=row[6],
        internal_name=row[7],
        published_at=from_utc_text(row[8]),
        live=bool(row[9]),
        language=row[10],
    )


class ReviewRepository:
    """The review's tables (models.py)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._sql = {name: db.sql(statement) for name, statement in SQL.items()}

    # ---- the question store's events (idempotent) --------------------------------------------

    @transaction
    def record_published(self, conn: Connection, event: QuestionVersionPublished) -> bool:
        """Insert the version unless it, or its question, is gone; True when inserted now.

        A question retired after this version was published keeps it not live; one published
        after the retirement (the question restored) is live as the event says.
        """
        q = self._sql
        if conn.exec_driver_sql(q["gone"], {"key": f"version:{event.version_id}"}).first():
            return False
        gone = conn.exec_driver_sql(q["gone"], {"key": f"question:{event.question_id}"}).first()
        published = utc_text(event.published_at)
        live = event.live
        if gone is not None:
            if gone[0] == "deleted":
                return False
            if published <= gone[1]:
                live = False
        inserted = conn.exec_driver_sql(
            q["insert_version"],
            {
                "version_id": event.version_id,
                "question_id": event.question_id,
                "pool_id": event.pool_id,
                "version_number": event.version_number,
                "type": event.type,
                "config": json.dumps(event.config, ensure_ascii=False),
                "explanation": event.explanation,
                "internal_name": event.internal_name,
                "published_at": published,
                "live": live,
                "language": event.language,
            },
        ).rowcount
        return bool(inserted)

    @transaction
    def delete_version(self, conn: Connection, version_id: str, at: datetime) -> None:
        """The version and its review row go; a late "published" of it is ignored."""
        q = self._sql
        conn.exec_driver_sql(
            q["gone_upsert"],
            {"key": f"version:{version_id}", "kind": "deleted", "at": utc_text(at)},
        )
        conn.exec_driver_sql(q["delete_version_review"], {"version_id": version_id})
        conn.exec_driver_sql(q["delete_version"], {"version_id": version_id})

    @transaction
    def retire_question(self, conn: Connection, question_id: str, at: datetime) -> None:
        """The question's versions published up to `at` are no longer live (a deletion wins)."""
        q = self._sql
        key = f"question:{question_id}"
        gone = conn.exec_driver_sql(q["gone"], {"key": key}).first()
        if gone is not None and gone[0] == "deleted":
            return
        conn.exec_driver_sql(q["gone_upsert"], {"key": key, "kind": "retired", "at": utc_text(at)})
        conn.exec_driver_sql(
            q["retire_versions"], {"live": False, "question_id": question_id, "at": utc_text(at)}
        )

    @transaction
    def delete_question(self, conn: Connection, question_id: str, at: datetime) -> None:
        """The question, its versions and their reviews go for good."""
        q = self._sql
        conn.exec_driver_sql(
            q["gone_upsert"],
            {"key": f"question:{question_id}", "kind": "deleted", "at": utc_text(at)},
        )
        conn.exec_driver_sql(q["delete_question_reviews"], {"question_id": question_id})
        conn.exec_driver_sql(q["delete_question_versions"], {"question_id": question_id})

    # ---- versions and reviews ------------------------------------------------------------------

    @read_only
    def is_gone(self, conn: Connection, key: str) -> bool:
        """Whether the store deleted or retired `key` (`version:<id>`, `question:<id>`)."""
        return conn.exec_driver_sql(self._sql["gone"], {"key": key}).first() is not None

    @read_only
    def version(self, conn: Connection, version_id: str) -> VersionRecord | None:
        row = conn.exec_driver_sql(self._sql["version"], {"version_id": version_id}).first()
        return None if row is None else _version(row)

    @read_only
    def latest_version(self, conn: Connection, question_id: str) -> VersionRecord | None:
        """The question's latest published version (highest number), live or not."""
        row = conn.exec_driver_sql(self._sql["latest"], {"question_id": question_id}).first()
        return None if row is None else _version(row)

    @read_only
    def review_of(self, conn: Connection, version_id: str) -> QuestionReview | None:
        row = conn.exec_driver_sql(self._sql["review"], {"version_id": version_id}).first()
        return None if row is None else _review(row)

    @read_only
    def latest_with_review(
        self, conn: Connection, question_id: str
    ) -> tuple[VersionRecord | None, QuestionReview | None]:
        """The latest published version and its review, read together."""
        row = conn.exec_driver_sql(self._sql["latest"], {"question_id": question_id}).first()
        if row is None:
            return None, None
        version = _version(row)
        review = conn.exec_driver_sql(
            self._sql["review"], {"version_id": version.version_id}
        ).first()
        return version, None if review is None else _review(review)

    @transaction
    def store_review(
        self,
        conn: Connection,
        version: VersionRecord,
        review: QuestionReview,
        reviewed_for: str | None,
    ) -> bool:
        """Write the version's review row (one per version); False when the version is gone."""
        if (
            conn.exec_driver_sql(self._sql["version"], {"version_id": version.version_id}).first()
            is None
        ):
            return False
        conn.exec_driver_sql(
            self._sql["upsert_review"],
            {
                "version_id": version.version_id,
                "question_id": version.question_id,
                "version_number": review.version_number,
                "state": review.state.value,
                "findings": _findings_json(review.findings),
                "reviewed_at": utc_text(review.reviewed_at),
                "reviewed_for": reviewed_for,
            },
        )
        return True

    @transaction
    def update_review(
        self, conn: Connection, version_id: str, before: QuestionReview, after: QuestionReview
    ) -> bool:
        """Compare-and-set the row's state and findings; False when it changed meanwhile."""
        return bool(
            conn.exec_driver_sql(
                self._sql["update_review"],
                {
                    "version_id": version_id,
                    "state": after.state.value,
                    "findings": _findings_json(after.findings),
                    "before": _findings_json(before.findings),
                    "before_state": before.state.value,
                },
            ).rowcount
        )

    # ---- pools, the tab, the pills, the night ------------------------------------------------

    @read_only
    def pool_enabled(self, conn: Connection, pool_id: str) -> bool:
        return conn.exec_driver_sql(self._sql["pool"], {"pool_id": pool_id}).first() is not None

    @transaction
    def set_pool(
        self, conn: Connection, pool_id: str, enabled: bool, who: str, at: datetime
    ) -> None:
        if enabled:
            conn.exec_driver_sql(
                self._sql["pool_on"], {"pool_id": pool_id, "who": who, "at": utc_text(at)}
            )
        else:
            conn.exec_driver_sql(self._sql["pool_off"], {"pool_id": pool_id})

    @read_only
    def pool_lint(self, conn: Connection, pool_id: str) -> bool:
        """The pool's reviews carry the lint's notices (issue 30)."""
        found = conn.exec_driver_sql(self._sql["pool_lint"], {"pool_id": pool_id}).first()
        return found is not None

    @transaction
    def set_pool_lint(
        self, conn: Connection, pool_id: str, on: bool, who: str, at: datetime
    ) -> None:
        if on:
            conn.exec_driver_sql(
                self._sql["pool_lint_on"], {"pool_id": pool_id, "who": who, "at": utc_text(at)}
            )
        else:
            conn.exec_driver_sql(self._sql["pool_lint_off"], {"pool_id": pool_id})

    @read_only
    def tab_rows(self, conn: Connection, pool_id: str) -> list[TabRow]:
        """The latest version of each live question of the pool, newest first, with its row."""
        rows = conn.exec_driver_sql(self._sql["tab"], {"pool_id": pool_id, "live": True})
        return [
            TabRow(
                question_id=r[0],
                internal_name=r[1],
                type=r[2],
                review=None if r[4] is None else _review(r[3:7]),
            )
            for r in rows
        ]

    @read_only
    def pills_rows(
        self, conn: Connection, question_ids: Sequence[str]
    ) -> dict[str, tuple[str, QuestionReview | None]]:
        """Per known question: its pool and its latest version's review (None: no row)."""
        out: dict[str, tuple[str, QuestionReview | None]] = {}
        for question_id in dict.fromkeys(question_ids):
            row = conn.exec_driver_sql(self._sql["latest"], {"question_id": question_id}).first()
            if row is None or not bool(row[9]):
                continue
            version_id = row[2]
            review = conn.exec_driver_sql(self._sql["review"], {"version_id": version_id}).first()
            out[question_id] = (row[1], None if review is None else _review(review))
        return out

    @read_only
    def night_rows(self, conn: Connection) -> list[VersionRow]:
        """Latest live versions of opted-in pools without a row or with a failed one."""
        rows = conn.exec_driver_sql(
            self._sql["night"], {"live": True, "failed": ReviewState.failed.value}
        )
        return [
            VersionRow(
                question_id=r[0],
                pool_id=r[1],
                version_id=r[2],
                version_number=int(r[3]),
                type=r[4],
                published_at=from_utc_text(r[5]),
                live=bool(r[6]),
                review_state=None if r[7] is None else ReviewState(r[7]),
                reviewed_at=None if r[8] is None else from_utc_text(r[8]),
            )
            for r in rows
        ]

    @read_only
    def opted_in_pools(self, conn: Connection) -> set[str]:
        return {r[0] for r in conn.exec_driver_sql(self._sql["opted_in"])}
