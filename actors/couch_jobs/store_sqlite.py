"""The SQLite job store: one database file shared by every OS process of a node.

The default store.  WAL mode lets readers run beside the single writer,
``BEGIN IMMEDIATE`` makes every writing transaction take the write lock up
front (so two workers racing to accept the same job are serialised by
SQLite, not by luck), and a busy timeout makes a writer wait its turn
instead of failing.  The queries are `store_sql`'s; what is SQLite's own is
here: a small pool of connections per process, the write lock, the schema, one
counter for activity sequences, and wake-ups through commit listeners (the
process agents carry them to other processes).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

from .errors import StoreUnavailable
from .store_sql import SQLStore, SQLTransaction

__all__ = ["SQLiteStore", "SQLiteTransaction"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS couch_jobs (
    type TEXT NOT NULL,
    id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'finished')),
    seq INTEGER,
    jlock TEXT,
    sched_time INTEGER NOT NULL,
    resubmit INTEGER NOT NULL DEFAULT 0,
    data TEXT NOT NULL,
    PRIMARY KEY (type, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS couch_jobs_activity
    ON couch_jobs (type, seq) WHERE state = 'running';
CREATE TABLE IF NOT EXISTS couch_jobs_pending (
    type TEXT NOT NULL,
    sched_time INTEGER NOT NULL,
    id TEXT NOT NULL,
    PRIMARY KEY (type, sched_time, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS couch_jobs_type_timeouts (
    type TEXT PRIMARY KEY,
    timeout NOT NULL
);
CREATE TABLE IF NOT EXISTS couch_jobs_type_activity (
    type TEXT PRIMARY KEY,
    seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS couch_jobs_counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO couch_jobs_counters (name, value) VALUES ('activity_seq', 0);
"""


class SQLiteTransaction(SQLTransaction):
    """One open SQLite transaction; also what host code uses for its own tables.

    ``execute`` runs any SQL on the same connection, so a caller can change
    its own tables and a job in one atomic commit (the seed's
    ``use_fabric_transaction_object`` case).
    """

    param = "?"  # PostgreSQL's is "%s"
    claim_limit = 1024  # the seed's RANGE_LIMIT: the write lock already serialises accepts

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self.connection.execute(sql, params)

    # -- activity: one counter, one row per type ----------------------------

    def bump_type_activity(self, type_key: str) -> int:
        seq = self.next_sequence()
        self.set_type_activity(type_key, seq)
        return seq

    def next_sequence(self) -> int:
        (value,) = self.connection.execute(
            "UPDATE couch_jobs_counters SET value = value + 1 WHERE name = 'activity_seq' RETURNING value"
        ).fetchone()
        return int(value)

    def set_type_activity(self, type_key: str, seq: int) -> None:
        self.connection.execute(
            "INSERT OR REPLACE INTO couch_jobs_type_activity (type, seq) VALUES (?, ?)",
            (type_key, seq),
        )


class _Conn:
    """A connection, the process that opened it, and whether a transaction is using it.

    ``busy`` is guarded by the store's lock.
    """

    __slots__ = ("connection", "pid", "busy")

    def __init__(self, connection: sqlite3.Connection, pid: int) -> None:
        self.connection = connection
        self.pid = pid
        self.busy = False


class SQLiteStore(SQLStore):
    """The node's jobs database: one file, a small pool of connections per process.

    A transaction checks a connection out of the pool and returns it when it
    ends, so a connection belongs to no thread: an actor is a thread and a
    restart is a new one, and a connection kept per thread would stay open
    for every incarnation that ever touched the store.  At most
    ``idle_connections`` idle connections are kept; more threads in
    transactions at once open more, and those close as they come back.

    Connections are remembered with the process that opened them, so an
    instance inherited across ``fork`` never reuses (nor closes) the
    parent's.  ``synchronous=NORMAL`` in WAL mode loses nothing a committed
    transaction wrote when a process dies; pass ``synchronous="FULL"`` to
    survive power loss as well.

    Closing is safe while other threads use the store: a connection is
    closed only when no transaction is using it (an idle one at once, a busy
    one by its own thread when its transaction ends), and every transaction
    begun after `close` raises `StoreClosed`.  Closing a sqlite3 connection
    another thread is executing on crashes the interpreter, so this rule is
    what keeps a late actor from taking the process down.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        synchronous: str = "NORMAL",
        read_only: bool = False,
        idle_connections: int = 4,
    ) -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        if busy_timeout <= 0:
            raise ValueError(f"busy_timeout must be positive seconds, got {busy_timeout!r}")
        if idle_connections < 1:
            raise ValueError(f"idle_connections must be at least 1, got {idle_connections!r}")
        super().__init__(os.fspath(path), read_only)
        self.path = self.location
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous.upper()
        self.idle_connections = idle_connections
        self._local = threading.local()  # .entry: the connection this thread's transaction holds
        self._idle = threading.Condition(self._lock)
        #: Every connection open in this process, busy or in the pool (and,
        #: after a fork, the parent's, kept so that they are never closed here).
        self._connections: list[_Conn] = []
        self._pool: list[_Conn] = []  # idle connections of this process, most recent last
        if read_only:
            try:  # fail now, not at the first read, when there is no store to read
                with self._use() as conn:
                    conn.execute("SELECT 1 FROM couch_jobs LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                self.close()
                raise StoreUnavailable(f"couch_jobs store {self.path!r} cannot be read: {exc}") from None
            return
        try:  # a file that cannot be opened fails the start naming it, like a bad PostgreSQL URL
            with self._use() as conn:
                conn.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            self.close()
            raise StoreUnavailable(f"couch_jobs store {self.path!r} cannot be opened: {exc}") from None

    # -- connections -------------------------------------------------------

    def _open(self, pid: int) -> _Conn:
        if self.read_only:
            # mode=ro: this process can never write the file, whatever it runs.
            conn = sqlite3.connect(
                f"file:{urllib.parse.quote(self.path)}?mode=ro",
                uri=True,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            return _Conn(conn, pid)
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        except BaseException:
            conn.close()
            raise
        return _Conn(conn, pid)

    def _acquire(self) -> _Conn:
        """A connection from the pool (or a new one), marked busy; `StoreClosed` once closed."""
        pid = os.getpid()
        held: _Conn | None = getattr(self._local, "entry", None)
        if held is not None and held.pid == pid:
            raise RuntimeError(
                "a couch_jobs transaction is already open in this thread; "
                "pass it as the tx argument instead of opening another"
            )
        with self._lock:
            if self._closed:
                raise self._closed_error()
            if self._pool and self._pool[0].pid != pid:
                self._pool = []  # forked: the parent's stay in _connections, never used or closed here
            entry = self._pool.pop() if self._pool else None
            if entry is not None:
                entry.busy = True
        if entry is None:
            entry = self._open(pid)
            with self._lock:
                if self._closed:
                    entry.connection.close()
                    raise self._closed_error()
                entry.busy = True
                self._connections.append(entry)
        self._local.entry = entry
        return entry

    def _release(self, entry: _Conn) -> None:
        """Back to the pool, or closed: when the store is closed, the pool is
        full, or the connection is left inside a transaction it could not end."""
        self._local.entry = None
        close_now = False
        if entry.connection.in_transaction:
            try:
                entry.connection.execute("ROLLBACK")
            except sqlite3.Error:
                close_now = True
        with self._lock:
            entry.busy = False
            pooled = [c for c in self._pool if c.pid == entry.pid]
            close_now = close_now or self._closed or len(pooled) >= self.idle_connections
            if close_now:
                if entry in self._connections:
                    self._connections.remove(entry)
            else:
                self._pool.append(entry)
            self._idle.notify_all()
        if close_now:
            entry.connection.close()

    @contextlib.contextmanager
    def _use(self) -> Iterator[sqlite3.Connection]:
        entry = self._acquire()
        try:
            yield entry.connection
        finally:
            self._release(entry)

    @contextlib.contextmanager
    def _begin(self, write: bool) -> Iterator[SQLiteTransaction]:
        """This thread's connection in a transaction; ``write`` takes the write lock at BEGIN (``BEGIN IMMEDIATE``)."""
        with self._use() as conn:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            tx = SQLiteTransaction(self, conn, write)
            try:
                yield tx
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def close(self, timeout: float = 5.0) -> None:
        """Close the store in this process; other processes keep theirs.

        New transactions are refused at once (`StoreClosed`); transactions
        already running get up to ``timeout`` seconds to end (an actor the
        tree just stopped may still be finishing its last callback).  Idle
        connections close here; one still busy after the wait closes when its
        transaction ends, in its own thread.  Idempotent.
        """
        pid = os.getpid()
        current = getattr(self._local, "entry", None)
        with self._lock:
            self._closed = True

            def others_busy() -> bool:
                return any(c.busy and c.pid == pid and c is not current for c in self._connections)

            self._idle.wait_for(lambda: not others_busy(), timeout)
            idle = [c for c in self._connections if c.pid == pid and not c.busy]
            self._connections = [c for c in self._connections if c not in idle]
            self._pool = []
        for entry in idle:
            entry.connection.close()

    def open_connections(self) -> int:
        """How many connections this process holds open now (busy and pooled)."""
        pid = os.getpid()
        with self._lock:
            return sum(1 for c in self._connections if c.pid == pid)
