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

Every write is one SQLite transaction (WAL, ``synchronous=FULL``), so what a
call acknowledged is on disk.  A handle is safe to share between threads; a
worker in another process opens its own handle on the same file.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = [
    "Change",
    "Conflict",
    "DatabaseNotFound",
    "Doc",
    "DocStore",
    "DocStoreError",
    "LOCAL_PREFIX",
    "rev_rank",
]

LOCAL_PREFIX = "_local/"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS docs ("
    " id TEXT PRIMARY KEY, rev TEXT NOT NULL, body BLOB NOT NULL,"
    " deleted INTEGER NOT NULL DEFAULT 0, seq INTEGER NOT NULL UNIQUE)",
    "CREATE TABLE IF NOT EXISTS local_docs (id TEXT PRIMARY KEY, rev INTEGER NOT NULL, body BLOB NOT NULL)",
    "INSERT OR IGNORE INTO meta (key, value) VALUES ('update_seq', '0')",
)


class DocStoreError(Exception):
    """Base of the document store's errors."""


class DatabaseNotFound(DocStoreError):
    """The database file does not exist (CouchDB's ``db_not_found``)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"db_not_found: could not open {path}")
        self.path = path


class Conflict(DocStoreError):
    """A write named a revision that is not the document's current one."""

    def __init__(self, doc_id: str, expected: str | None, current: str | None) -> None:
        super().__init__(f"conflict on {doc_id!r}: given rev {expected!r}, current rev {current!r}")
        self.doc_id = doc_id


@dataclass(frozen=True)
class Doc:
    id: str
    rev: str
    body: dict = field(default_factory=dict)
    deleted: bool = False


@dataclass(frozen=True)
class Change:
    """One row of the changes feed: a document at its latest sequence."""

    seq: int
    id: str
    rev: str
    deleted: bool = False


def rev_rank(rev: str) -> tuple[int, str]:
    """Sort key of a revision ``"N-hash"``: position first, then hash (CouchDB's winner)."""
    pos, sep, digest = rev.partition("-")
    if not sep or not pos.isdigit():
        raise ValueError(f"bad revision {rev!r}: expected 'N-hash'")
    return int(pos), digest


def _new_rev(previous: str | None, body: dict, deleted: bool) -> str:
    pos = rev_rank(previous)[0] + 1 if previous else 1
    digest = hashlib.md5(
        (previous or "").encode() + orjson.dumps(body, option=orjson.OPT_SORT_KEYS) + (b"d" if deleted else b"")
    ).hexdigest()
    return f"{pos}-{digest}"


def _check_id(doc_id: Any) -> str:
    if not isinstance(doc_id, str) or not doc_id:
        raise ValueError(f"document id must be a non-empty string, got {doc_id!r}")
    if doc_id.startswith(LOCAL_PREFIX):
        raise ValueError(f"{doc_id!r} is a _local document id; use put_local/get_local")
    return doc_id


class DocStore:
    """One database in one SQLite file."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = False) -> None:
        self.path = os.fspath(path)
        if not create and not os.path.exists(self.path):
            raise DatabaseNotFound(self.path)
        self.name = os.path.splitext(os.path.basename(self.path))[0]
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            with self._transaction():
                for statement in _SCHEMA:
                    self._conn.execute(statement)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise DocStoreError(f"{self.path} is not a document store: {exc}") from exc
        # A new value every time the database is opened, like CouchDB's
        # instance_start_time: a checkpoint compares it to detect a reopen.
        self.instance_start_time = str(time.time_ns() // 1000)
        self._closed = False

    # -- plumbing ----------------------------------------------------------------

    def _transaction(self) -> "_Txn":
        return _Txn(self._conn)

    def _check_open(self) -> None:
        if self._closed:
            raise DocStoreError(f"{self.path} is closed")

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __enter__(self) -> "DocStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next_seq(self) -> int:
        (value,) = self._conn.execute("SELECT value FROM meta WHERE key = 'update_seq'").fetchone()
        seq = int(value) + 1
        self._conn.execute("UPDATE meta SET value = ? WHERE key = 'update_seq'", (str(seq),))
        return seq

    # -- documents -----------------------------------------------------------------

    @property
    def update_seq(self) -> int:
        with self._lock:
            self._check_open()
            (value,) = self._conn.execute("SELECT value FROM meta WHERE key = 'update_seq'").fetchone()
            return int(value)

    def info(self) -> dict[str, Any]:
        with self._lock:
            self._check_open()
            (count,) = self._conn.execute("SELECT COUNT(*) FROM docs WHERE deleted = 0").fetchone()
            return {
                "db_name": self.name,
                "update_seq": self.update_seq,
                "doc_count": count,
                "instance_start_time": self.instance_start_time,
            }

    def get(self, doc_id: str, *, include_deleted: bool = False) -> Doc | None:
        with self._lock:
            self._check_open()
            row = self._conn.execute(
                "SELECT id, rev, body, deleted FROM docs WHERE id = ?", (_check_id(doc_id),)
            ).fetchone()
        if row is None or (row[3] and not include_deleted):
            return None
        return Doc(row[0], row[1], orjson.loads(row[2]), bool(row[3]))

    def put(self, doc_id: str, body: Mapping[str, Any], rev: str | None = None, *, deleted: bool = False) -> str:
        """Write a new revision (``new_edits=true``); ``rev`` must be the current one."""
        _check_id(doc_id)
        if not isinstance(body, Mapping):
            raise TypeError(f"body of {doc_id!r} must be a mapping, got {type(body).__name__}")
        data = dict(body)
        with self._lock:
            self._check_open()
            with self._transaction():
                row = self._conn.execute("SELECT rev, deleted FROM docs WHERE id = ?", (doc_id,)).fetchone()
                current = None if row is None else row[0]
                live = row is not None and not row[1]
                if (live and rev != current) or (not live and rev is not None and rev != current):
                    raise Conflict(doc_id, rev, current)
                new_rev = _new_rev(current, data, deleted)
                self._conn.execute(
                    "INSERT OR REPLACE INTO docs (id, rev, body, deleted, seq) VALUES (?, ?, ?, ?, ?)",
                    (doc_id, new_rev, orjson.dumps(data), int(deleted), self._next_seq()),
                )
        return new_rev

    def delete(self, doc_id: str, rev: str) -> str:
        return self.put(doc_id, {}, rev, deleted=True)

    def changes(self, since: int = 0, limit: int | None = None) -> list[Change]:
        """Documents changed after ``since``, in sequence order, at most ``limit``."""
        if not isinstance(since, int) or since < 0:
            raise ValueError(f"since must be a non-negative integer sequence, got {since!r}")
        if limit is not None and (not isinstance(limit, int) or limit <= 0):
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        sql = "SELECT seq, id, rev, deleted FROM docs WHERE seq > ? ORDER BY seq"
        args: tuple = (since,)
        if limit is not None:
            sql += " LIMIT ?"
            args = (since, limit)
        with self._lock:
            self._check_open()
            rows = self._conn.execute(sql, args).fetchall()
        return [Change(seq, doc_id, rev, bool(deleted)) for seq, doc_id, rev, deleted in rows]

    def revs_diff(self, revs: Mapping[str, str]) -> dict[str, str]:
        """Of ``{doc_id: rev}``, those this store lacks and would keep if written."""
        missing: dict[str, str] = {}
        with self._lock:
            self._check_open()
            for doc_id, rev in revs.items():
                row = self._conn.execute("SELECT rev FROM docs WHERE id = ?", (doc_id,)).fetchone()
                if row is None or rev_rank(rev) > rev_rank(row[0]):
                    missing[doc_id] = rev
        return missing

    def open_docs(self, doc_ids: Iterable[str]) -> list[Doc]:
        """Current revisions of the given documents, deleted ones included."""
        docs = []
        for doc_id in doc_ids:
            doc = self.get(doc_id, include_deleted=True)
            if doc is not None:
                docs.append(doc)
        return docs

    def bulk_docs(self, docs: Iterable[Doc]) -> int:
        """Store documents with their revisions (``new_edits=false``); returns how many won.

        A revision that loses to the stored one (or equals it) is a no-op,
        which is what makes a repeated replication batch harmless.
        """
        written = 0
        with self._lock:
            self._check_open()
            with self._transaction():
                for doc in docs:
                    _check_id(doc.id)
                    row = self._conn.execute("SELECT rev FROM docs WHERE id = ?", (doc.id,)).fetchone()
                    if row is not None and rev_rank(doc.rev) <= rev_rank(row[0]):
                        continue
                    self._conn.execute(
                        "INSERT OR REPLACE INTO docs (id, rev, body, deleted, seq) VALUES (?, ?, ?, ?, ?)",
                        (doc.id, doc.rev, orjson.dumps(doc.body), int(doc.deleted), self._next_seq()),
                    )
                    written += 1
        return written

    # -- _local documents -------------------------------------------------------------

    def get_local(self, doc_id: str) -> Doc | None:
        key = doc_id[len(LOCAL_PREFIX):] if doc_id.startswith(LOCAL_PREFIX) else doc_id
        with self._lock:
            self._check_open()
            row = self._conn.execute("SELECT rev, body FROM local_docs WHERE id = ?", (key,)).fetchone()
        if row is None:
            return None
        return Doc(LOCAL_PREFIX + key, f"0-{row[0]}", orjson.loads(row[1]))

    def put_local(self, doc_id: str, body: Mapping[str, Any]) -> str:
        """Write a ``_local`` document (never in the changes feed); returns its rev."""
        key = doc_id[len(LOCAL_PREFIX):] if doc_id.startswith(LOCAL_PREFIX) else doc_id
        if not key:
            raise ValueError(f"bad _local document id {doc_id!r}")
        with self._lock:
            self._check_open()
            with self._transaction():
                row = self._conn.execute("SELECT rev FROM local_docs WHERE id = ?", (key,)).fetchone()
                rev = 1 if row is None else row[0] + 1
                self._conn.execute(
                    "INSERT OR REPLACE INTO local_docs (id, rev, body) VALUES (?, ?, ?)",
                    (key, rev, orjson.dumps(dict(body))),
                )
        return f"0-{rev}"

    def ensure_full_commit(self) -> str:
        """Every write is already a committed transaction; returns the instance start time."""
        with self._lock:
            self._check_open()
            if not os.path.exists(self.path):
                raise DatabaseNotFound(self.path)
            return self.instance_start_time


class _Txn:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``/``ROLLBACK`` on an autocommit connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")
