"""couch_jobs's PostgreSQL schema: its migrations and its version check.

Kept apart from `store_postgres` (pool, queries, errors) because it is the
one part that changes when the tables do.  The schema is created on first
start and versioned (``couch_jobs_schema``): migrations run under an
advisory lock, so nodes starting together agree; a database newer than this
code is refused.  The functions take an open connection; the store maps
connection errors to `StoreUnavailable`.
"""

from __future__ import annotations

import logging
from typing import Any

from .errors import StoreUnavailable

__all__ = ["SCHEMA_VERSION", "check_version", "migrate"]

_log = logging.getLogger(__name__)

#: Migrations, in order; the schema version is their count.
_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE couch_jobs (
        type TEXT NOT NULL,
        id TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'finished')),
        seq BIGINT,
        jlock TEXT,
        sched_time BIGINT NOT NULL,
        resubmit BOOLEAN NOT NULL DEFAULT FALSE,
        data TEXT NOT NULL,
        PRIMARY KEY (type, id)
    );
    CREATE INDEX couch_jobs_activity ON couch_jobs (type, seq) WHERE state = 'running';
    CREATE TABLE couch_jobs_pending (
        type TEXT NOT NULL,
        sched_time BIGINT NOT NULL,
        id TEXT NOT NULL,
        PRIMARY KEY (type, sched_time, id)
    );
    CREATE TABLE couch_jobs_type_timeouts (
        type TEXT PRIMARY KEY,
        timeout DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE couch_jobs_type_activity (
        type TEXT PRIMARY KEY,
        seq BIGINT NOT NULL
    );
    """,
    # 2: job sequences from a SEQUENCE; the type's activity counted per backend
    # (shard 0 keeps what version 1 counted, so the value never goes back).
    """
    CREATE SEQUENCE couch_jobs_activity_seq;
    SELECT setval('couch_jobs_activity_seq', GREATEST(1,
        (SELECT max(seq) FROM couch_jobs), (SELECT max(seq) FROM couch_jobs_type_activity)));
    ALTER TABLE couch_jobs_type_activity ADD COLUMN shard INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE couch_jobs_type_activity DROP CONSTRAINT couch_jobs_type_activity_pkey;
    ALTER TABLE couch_jobs_type_activity ADD PRIMARY KEY (type, shard);
    """,
)
SCHEMA_VERSION = len(_MIGRATIONS)

#: Advisory lock key under which migrations run (any fixed 64-bit value).
_MIGRATION_LOCK = 0x636F7563686A6F62  # "couchjob"


def migrate(conn: Any, location: str) -> None:
    """Bring the schema on ``conn`` (a psycopg connection) to `SCHEMA_VERSION`, in one transaction."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS couch_jobs_schema (version INTEGER NOT NULL)")
        row = conn.execute("SELECT max(version) FROM couch_jobs_schema").fetchone()
        current = 0 if row is None or row[0] is None else int(row[0])
        if current > SCHEMA_VERSION:
            raise StoreUnavailable(
                f"couch_jobs store {location!r} has schema version {current}, "
                f"newer than this couch_jobs ({SCHEMA_VERSION}); upgrade the code"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            conn.execute(_MIGRATIONS[version - 1])
            conn.execute("INSERT INTO couch_jobs_schema (version) VALUES (%s)", (version,))
            _log.info("couch_jobs store %s: schema version %d", location, version)


def check_version(row: Any, location: str) -> None:
    """A read-only store migrates nothing: it needs a schema version (``row``) this code can read."""
    current = 0 if row is None or row[0] is None else int(row[0])
    if not 0 < current <= SCHEMA_VERSION:
        raise StoreUnavailable(
            f"couch_jobs store {location!r} has schema version {current}; "
            f"this couch_jobs reads versions 1 to {SCHEMA_VERSION}"
        )
