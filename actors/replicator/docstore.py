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

from .docs_model import (LOCAL_PREFIX, Change, Conflict, DatabaseNotFound, Doc, DocStoreError, Fenced,
                         StoreUnavailable, rev_rank)
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
