"""Test databases: a SQLite file always, a fresh PostgreSQL database when 127.0.0.1:5432 answers."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

PG_HOST = os.environ.get("QUIZ_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("QUIZ_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("QUIZ_TEST_PG_USER", "postgres")


def postgres_available() -> bool:
    """Whether a PostgreSQL server answers where the tests expect one."""
    try:
        with socket.create_connection((PG_HOST, PG_PORT), timeout=0.5):
            pass
        with psycopg.connect(
            host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", connect_timeout=2
        ):
            return True
    except OSError:
        return False
    except psycopg.Error:
        return False


@contextmanager
def postgres_database(prefix: str = "quiz_test") -> Iterator[str]:
    """A new, empty PostgreSQL database, dropped afterwards; yields its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = dict(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", autocommit=True)
    with psycopg.connect(**admin) as conn:  # type: ignore[arg-type]
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        with psycopg.connect(**admin) as conn:  # type: ignore[arg-type]
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
