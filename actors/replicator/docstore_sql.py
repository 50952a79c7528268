"""The document store's SQL, written once for both backends (SQLite files, PostgreSQL).

A store holds databases; each database has documents with revisions, a
changes feed ordered by its own ``update_seq``, and ``_local`` documents.
Both backends keep the same tables with a ``db`` column (a SQLite file holds
one database, a PostgreSQL database holds many) and ask them the same
questions, written here with ``?`` markers.  A backend subclasses
`SQLDocStore` and says only what differs: its parameter marker, how to
connect and open a transaction, its column types, its row locks, its clock,
and which of its errors mean "unreachable".

A write transaction first locks its database's ``repdb_meta`` row (the
sequence counter), so writers of one database queue there and the changes
feed commits in sequence order on both backends.  A write may carry a lease
`Fence`: then the same transaction checks the lease (`lease_sql`) and is
refused with `Fenced` once the job's lease has moved on, so nothing a node
that lost a job writes after that lands.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson

from actors.leases import sql as lease_sql
from actors.leases.policy import Fence

from .docs_model import (
    LOCAL_PREFIX,
    Change,
    Conflict,
    DatabaseNotFound,
    Doc,
    DocStoreError,
    Fenced,
    StoreUnavailable,
    check_id,
    rev_rank,
)

__all__ = ["SCHEMA", "SQLDocStore", "SQLTx"]

#: Templated with the backend's ``{blob}`` and ``{serial}`` column types.
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS repdb_meta (db TEXT PRIMARY KEY, update_seq BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS repdb_docs (db TEXT NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL,"
    " body {blob} NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, seq BIGINT NOT NULL,"
    " PRIMARY KEY (db, id), UNIQUE (db, seq))",
    "CREATE TABLE IF NOT EXISTS repdb_local (db TEXT NOT NULL, id TEXT NOT NULL, rev BIGINT NOT NULL,"
    " body {blob} NOT NULL, PRIMARY KEY (db, id))",
    *lease_sql.LEASE_SCHEMA,
)

_UPSERT_DOC = (
    "INSERT INTO repdb_docs (db, id, rev, body, deleted, seq) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (db, id) DO UPDATE SET rev = excluded.rev, body = excluded.body, "
    "deleted = excluded.deleted, seq = excluded.seq"
)


def _new_rev(previous: str | None, body: dict, deleted: bool) -> str:
    pos = rev_rank(previous)[0] + 1 if previous else 1
    digest = hashlib.md5(
        (previous or "").encode() + orjson.dumps(body, option=orjson.OPT_SORT_KEYS) + (b"d" if deleted else b"")
    ).hexdigest()
    return f"{pos}-{digest}"


def _local_key(doc_id: str) -> str:
    return doc_id[len(LOCAL_PREFIX) :] if doc_id.startswith(LOCAL_PREFIX) else doc_id


class SQLTx:
    """One open transaction: ``run`` (``?`` markers), the store's clock, its lock suffixes."""

    def __init__(self, store: "SQLDocStore", connection: Any) -> None:
        self.store = store
        self.connection = connection
        self.row_lock = store.row_lock
        self.share_lock = store.share_lock

    def run(self, sql: str, params: Any = ()) -> Any:
        return self.store._execute(self.connection, sql, params)

    def now(self) -> float:
        return self.store._now(self.connection)


class SQLDocStore(abc.ABC):
    """One database of a document store.  Safe to share between threads (one lock, one connection)."""

    param = "?"
    row_lock = ""
    share_lock = ""

    def __init__(self, location: str, name: str, key: str, *, create: bool) -> None:
        #: How messages name the database (a path, or a URL without password and ``#name``).
        self.path = location
        self.name = name
        self._db = key
        self._lock = threading.RLock()
        self._conn: Any = None
        self._closed = False
        with self._guard():
            with self.transaction() as tx:
                if create:
                    tx.run(
                        "INSERT INTO repdb_meta (db, update_seq) VALUES (?, 0) ON CONFLICT (db) DO NOTHING", (self._db,)
                    )
                elif tx.run("SELECT 1 FROM repdb_meta WHERE db = ?", (self._db,)).fetchone() is None:
                    raise DatabaseNotFound(self.path)
        # A new value every time the database is opened, like CouchDB's
        # instance_start_time: a checkpoint compares it to detect a reopen.
        self.instance_start_time = str(time.time_ns() // 1000)

    @property
    def store_id(self) -> str:
        """Which store this database lives in: two handles with the same id share tables
        (a lease in one fences writes to the other in the same transaction)."""
        return self.path

    # -- what a backend provides -------------------------------------------------------

    @abc.abstractmethod
    def _connect(self) -> Any:
        """A new connection, with the schema in place."""

    @abc.abstractmethod
    def _begin(self, connection: Any) -> contextlib.AbstractContextManager[Any]:
        """A writing transaction on ``connection``: committed at the end, rolled back on error."""

    @abc.abstractmethod
    def _now(self, connection: Any) -> float:
        """The store's clock, seconds since the epoch."""

    @abc.abstractmethod
    def _translate(self, exc: BaseException) -> DocStoreError | None:
        """The store error a backend exception means (None: not the backend's);
        a `StoreUnavailable` also drops the connection, to reconnect next time."""

    def _execute(self, connection: Any, sql: str, params: Any) -> Any:
        if self.param != "?":
            sql = sql.replace("?", self.param)
        return connection.execute(sql, params)

    # -- plumbing ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except DocStoreError:
            raise
        except Exception as exc:
            mapped = self._translate(exc)
            if mapped is None:
                raise
            if isinstance(mapped, StoreUnavailable):
                self._drop()
            raise mapped from exc

    def _connection(self) -> Any:
        if self._closed:
            raise DocStoreError(f"{self.path} is closed")
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[SQLTx]:
        """A writing transaction on this store (the caller's own SQL, the leases)."""
        with self._lock, self._guard():
            conn = self._connection()
            with self._begin(conn):
                yield SQLTx(self, conn)

    def _read(self, sql: str, params: Any = ()) -> list[tuple]:
        with self._lock, self._guard():
            return list(self._execute(self._connection(), sql, params).fetchall())

    def _lock_db(self, tx: SQLTx) -> int:
        row = tx.run(f"SELECT update_seq FROM repdb_meta WHERE db = ?{self.row_lock}", (self._db,)).fetchone()
        if row is None:
            raise DatabaseNotFound(self.path)
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._drop()

    def __enter__(self) -> "SQLDocStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- documents ----------------------------------------------------------------------

    @property
    def update_seq(self) -> int:
        rows = self._read("SELECT update_seq FROM repdb_meta WHERE db = ?", (self._db,))
        if not rows:
            raise DatabaseNotFound(self.path)
        return int(rows[0][0])

    def info(self) -> dict[str, Any]:
        (count,) = self._read("SELECT COUNT(*) FROM repdb_docs WHERE db = ? AND deleted = 0", (self._db,))[0]
        return {
            "db_name": self.name,
            "update_seq": self.update_seq,
            "doc_count": int(count),
            "instance_start_time": self.instance_start_time,
        }

    def get(self, doc_id: str, *, include_deleted: bool = False) -> Doc | None:
        rows = self._read(
            "SELECT id, rev, body, deleted FROM repdb_docs WHERE db = ? AND id = ?", (self._db, check_id(doc_id))
        )
        if not rows or (rows[0][3] and not include_deleted):
            return None
        row = rows[0]
        return Doc(row[0], row[1], orjson.loads(row[2]), bool(row[3]))

    def put(
        self,
        doc_id: str,
        body: Mapping[str, Any],
        rev: str | None = None,
        *,
        deleted: bool = False,
        fence: Fence | None = None,
    ) -> str:
        """Write a new revision (``new_edits=true``); ``rev`` must be the current one."""
        check_id(doc_id)
        if not isinstance(body, Mapping):
            raise TypeError(f"body of {doc_id!r} must be a mapping, got {type(body).__name__}")
        data = dict(body)
        with self.transaction() as tx:
            seq = self._lock_db(tx)
            if fence is not None:
                lease_sql.check_fence(tx, fence, Fenced)
            row = tx.run("SELECT rev, deleted FROM repdb_docs WHERE db = ? AND id = ?", (self._db, doc_id)).fetchone()
            current = None if row is None else row[0]
            live = row is not None and not row[1]
            if (live and rev != current) or (not live and rev is not None and rev != current):
                raise Conflict(doc_id, rev, current)
            new_rev = _new_rev(current, data, deleted)
            tx.run(_UPSERT_DOC, (self._db, doc_id, new_rev, orjson.dumps(data), int(deleted), seq + 1))
            tx.run("UPDATE repdb_meta SET update_seq = ? WHERE db = ?", (seq + 1, self._db))
        return new_rev

    def delete(self, doc_id: str, rev: str) -> str:
        return self.put(doc_id, {}, rev, deleted=True)

    def changes(self, since: int = 0, limit: int | None = None) -> list[Change]:
        """Documents changed after ``since``, in sequence order, at most ``limit``."""
        if not isinstance(since, int) or since < 0:
            raise ValueError(f"since must be a non-negative integer sequence, got {since!r}")
        if limit is not None and (not isinstance(limit, int) or limit <= 0):
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        sql = "SELECT seq, id, rev, deleted FROM repdb_docs WHERE db = ? AND seq > ? ORDER BY seq"
        args: tuple = (self._db, since)
        if limit is not None:
            sql += " LIMIT ?"
            args = (self._db, since, limit)
        return [Change(int(seq), doc_id, rev, bool(deleted)) for seq, doc_id, rev, deleted in self._read(sql, args)]

    def _revs(self, run: Any, ids: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for doc_id, rev in run(
                f"SELECT id, rev FROM repdb_docs WHERE db = ? AND id IN ({marks})", (self._db, *chunk)
            ):
                found[doc_id] = rev
        return found

    def revs_diff(self, revs: Mapping[str, str]) -> dict[str, str]:
        """Of ``{doc_id: rev}``, those this store lacks and would keep if written."""
        current = self._revs(self._read, list(revs))
        return {
            doc_id: rev
            for doc_id, rev in revs.items()
            if doc_id not in current or rev_rank(rev) > rev_rank(current[doc_id])
        }

    def open_docs(self, doc_ids: Iterable[str]) -> list[Doc]:
        """Current revisions of the given documents, deleted ones included."""
        docs = []
        for doc_id in doc_ids:
            doc = self.get(doc_id, include_deleted=True)
            if doc is not None:
                docs.append(doc)
        return docs

    def bulk_docs(self, docs: Iterable[Doc], *, fence: Fence | None = None) -> int:
        """Store documents with their revisions (``new_edits=false``); returns how many won.

        A revision that loses to the stored one (or equals it) is a no-op,
        which is what makes a repeated replication batch harmless.
        """
        docs = list(docs)
        for doc in docs:
            check_id(doc.id)
        written = 0
        with self.transaction() as tx:
            seq = self._lock_db(tx)
            if fence is not None:
                lease_sql.check_fence(tx, fence, Fenced)
            current = self._revs(lambda sql, p: tx.run(sql, p).fetchall(), [d.id for d in docs])
            for doc in docs:
                if doc.id in current and rev_rank(doc.rev) <= rev_rank(current[doc.id]):
                    continue
                seq += 1
                tx.run(_UPSERT_DOC, (self._db, doc.id, doc.rev, orjson.dumps(doc.body), int(doc.deleted), seq))
                current[doc.id] = doc.rev
                written += 1
            if written:
                tx.run("UPDATE repdb_meta SET update_seq = ? WHERE db = ?", (seq, self._db))
        return written

    # -- _local documents -----------------------------------------------------------------

    def get_local(self, doc_id: str) -> Doc | None:
        key = _local_key(doc_id)
        rows = self._read("SELECT rev, body FROM repdb_local WHERE db = ? AND id = ?", (self._db, key))
        if not rows:
            return None
        return Doc(LOCAL_PREFIX + key, f"0-{rows[0][0]}", orjson.loads(rows[0][1]))

    def put_local(self, doc_id: str, body: Mapping[str, Any], *, fence: Fence | None = None) -> str:
        """Write a ``_local`` document (never in the changes feed); returns its rev.
        With ``fence``, refused (`Fenced`) unless that lease is still current."""
        key = _local_key(doc_id)
        if not key:
            raise ValueError(f"bad _local document id {doc_id!r}")
        with self.transaction() as tx:
            self._lock_db(tx)
            if fence is not None:
                lease_sql.check_fence(tx, fence, Fenced)
            row = tx.run("SELECT rev FROM repdb_local WHERE db = ? AND id = ?", (self._db, key)).fetchone()
            rev = 1 if row is None else int(row[0]) + 1
            tx.run(
                "INSERT INTO repdb_local (db, id, rev, body) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (db, id) DO UPDATE SET rev = excluded.rev, body = excluded.body",
                (self._db, key, rev, orjson.dumps(dict(body))),
            )
        return f"0-{rev}"

    def ensure_full_commit(self) -> str:
        """Every write is already a committed transaction; returns the instance start time."""
        self.update_seq  # noqa: B018 - raises DatabaseNotFound when the database is gone
        return self.instance_start_time
