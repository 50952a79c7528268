"""A real document store on SQLite: one file per database.

The replicator needs what a CouchDB database offers a replication: documents
with revisions, a changes feed ordered by an integer sequence (``update_seq``),
``_local`` documents that are not replicated (where checkpoints live), a way to
ask which revisions are missing, a bulk write that keeps the given revisions
(``new_edits=false``), and ``ensure_full_commit`` returning the instance start
time so a checkpoint can tell whether the database was reopened underneath.

The store keeps one revision per document: the winning one, chosen as CouchDB
chooses a winner (higher revision position, then higher hash).  That makes a
replicated write idempotent: writing the same revision twice, or an older one,
changes nothing, so a replication resumed from an older checkpoint never
duplicates or loses a document.

The queries are `docstore_sql`'s, shared with the PostgreSQL store
(`docstore_pg`).  Every write is one SQLite transaction (WAL,
``synchronous=FULL``), so what a call acknowledged is on disk.  A handle is
safe to share between threads; a worker in another process opens its own
handle on the same file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

from .docs_model import (
    LOCAL_PREFIX,
    Change,
    Conflict,
    DatabaseNotFound,
    Doc,
    DocStoreError,
    Fenced,
    StoreUnavailable,
    rev_rank,
)
from .docstore_sql import SCHEMA, SQLDocStore

__all__ = [
    "Change",
    "Conflict",
    "DatabaseNotFound",
    "Doc",
    "DocStore",
    "DocStoreError",
    "Fenced",
    "LOCAL_PREFIX",
    "StoreUnavailable",
    "rev_rank",
]

#: The one database a SQLite file holds, as its rows name it.
_FILE_DB = "_"


def _adopt_first_layout(conn: sqlite3.Connection) -> None:
    """Move a file written before the shared SQL layer into its tables, in the open transaction.

    Such a file keeps its documents in ``docs``/``local_docs`` and its sequence in
    ``meta``; without this a ``_replicator`` file or a replicated database from an
    earlier version would open empty (or not at all), and its replications would be
    forgotten.  The move is one transaction with the schema's creation, so a crash
    leaves the file in either layout, never half of each.
    """
    tables = {
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('docs', 'local_docs', 'meta')"
        )
    }
    if "docs" not in tables:
        return
    if conn.execute("SELECT 1 FROM repdb_meta WHERE db = ?", (_FILE_DB,)).fetchone() is not None:
        return  # both layouts present: the new one is the truth, as it was written last
    seq_row = conn.execute("SELECT value FROM meta WHERE key = 'update_seq'").fetchone() if "meta" in tables else None
    if seq_row is None:
        seq_row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM docs").fetchone()
    conn.execute(
        "INSERT INTO repdb_docs (db, id, rev, body, deleted, seq) SELECT ?, id, rev, body, deleted, seq FROM docs",
        (_FILE_DB,),
    )
    if "local_docs" in tables:
        conn.execute("INSERT INTO repdb_local (db, id, rev, body) SELECT ?, id, rev, body FROM local_docs", (_FILE_DB,))
    conn.execute("INSERT INTO repdb_meta (db, update_seq) VALUES (?, ?)", (_FILE_DB, int(seq_row[0])))
    for table in sorted(tables):
        conn.execute(f"DROP TABLE {table}")


class DocStore(SQLDocStore):
    """One database in one SQLite file."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = False) -> None:
        path = os.fspath(path)
        if not create and not os.path.exists(path):
            raise DatabaseNotFound(path)
        super().__init__(path, os.path.splitext(os.path.basename(path))[0], _FILE_DB, create=create)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in SCHEMA:
                    conn.execute(statement.format(blob="BLOB", serial="INTEGER PRIMARY KEY"))
                _adopt_first_layout(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise DocStoreError(f"{self.path} is not a document store: {exc}") from exc
        return conn

    @contextlib.contextmanager
    def _begin(self, connection: sqlite3.Connection) -> Iterator[None]:
        connection.execute("BEGIN IMMEDIATE")  # the writer holds the file: no row locks needed
        try:
            yield
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def _now(self, connection: Any) -> float:
        return time.time()  # one machine: its clock is the store's

    def _translate(self, exc: BaseException) -> DocStoreError | None:
        if isinstance(exc, sqlite3.OperationalError):
            return StoreUnavailable(f"{self.path}: {exc}")
        if isinstance(exc, sqlite3.Error):
            return DocStoreError(f"{self.path}: {exc}")
        return None

    def ensure_full_commit(self) -> str:
        """Every write is already a committed transaction; returns the instance start time."""
        if not os.path.exists(self.path):
            raise DatabaseNotFound(self.path)
        return super().ensure_full_commit()
