"""Where jobs live: a narrow store interface and its SQLite implementation.

The seed keeps jobs in FoundationDB.  Here the default store is one SQLite
database file shared by every OS process of a node: WAL mode lets readers run
beside the single writer, ``BEGIN IMMEDIATE`` makes every writing transaction
take the write lock up front (so two workers racing to accept the same job
are serialised by SQLite, not by luck), and a busy timeout makes a writer
wait its turn instead of failing.

Everything above this module talks to the `Store`/`StoreTx` protocols, which
are deliberately small - rows in, rows out, no policy - so that a server
database can be added later without touching the rest.  Types arrive here
already encoded (`model.encode_type`) and data as JSON text.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

from .errors import StoreClosed, StoreReadOnly, StoreUnavailable

__all__ = [
    "CommitListener",
    "JobRecord",
    "SQLiteStore",
    "SQLiteTransaction",
    "Store",
    "StoreTx",
]

_log = logging.getLogger(__name__)

#: Called after every commit in this process with the encoded types it touched.
CommitListener = Callable[[frozenset[str]], None]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One row of the jobs table (the seed's ``#jv{}`` plus its key).

    ``seq`` is 0 while pending, the activity sequence of the last
    accept/update while running, and None once finished - exactly the seed's
    encoding; ``state`` is kept alongside so queries need not decode it.
    """

    type: str
    id: str
    state: str
    seq: int | None
    jlock: str | None
    sched_time: int
    resubmit: bool
    data: str

    def evolve(self, **changes: Any) -> "JobRecord":
        return replace(self, **changes)


class StoreTx(Protocol):
    """The operations couch_jobs needs inside one transaction."""

    def get_job(self, type_key: str, job_id: str) -> JobRecord | None: ...
    def put_job(self, record: JobRecord) -> None: ...
    def delete_job(self, type_key: str, job_id: str) -> None: ...
    def list_jobs(self, type_key: str | None = None) -> list[JobRecord]: ...
    def count_jobs(self) -> list[tuple[str, str, int]]:
        """``(type, state, count)`` for every type and state that has jobs (one aggregate query)."""
        ...

    def running_jobs(
        self, type_key: str, *, min_seq: int | None = None, max_seq: int | None = None
    ) -> list[JobRecord]: ...

    def add_pending(self, type_key: str, sched_time: int, job_id: str) -> None: ...
    def remove_pending(self, type_key: str, sched_time: int, job_id: str) -> None: ...
    def pending_range(
        self, type_key: str, min_sched_time: int, max_sched_time: int, limit: int
    ) -> list[tuple[int, str]]: ...

    def bump_type_activity(self, type_key: str) -> int:
        """Record activity of the type and return a fresh job activity sequence.

        The returned value is never handed out again (the activity monitor
        compares a job's sequence for equality across checks); it need not
        commit in order.  `get_type_activity` read after the commit differs
        from any value read before it (what type monitors watch).  SQLite's
        single writer gives both from one counter; PostgreSQL draws the
        sequence from a SEQUENCE and counts activity per backend, so commits
        of one type do not wait for each other.
        """
        ...

    def get_type_activity(self, type_key: str) -> int | None: ...
    def set_type_activity(self, type_key: str, seq: int) -> None: ...

    def get_type_timeout(self, type_key: str) -> float | None: ...
    def set_type_timeout(self, type_key: str, timeout: float) -> None: ...
    def clear_type_timeout(self, type_key: str) -> None: ...
    def list_type_timeouts(self) -> dict[str, float]: ...

    def touch(self, type_key: str) -> None:
        """Record that this transaction changed jobs of ``type_key`` (for wake-ups)."""
        ...

    #: How many due pending jobs a dequeue chooses among (see `pending.dequeue`).
    claim_limit: int


class Store(Protocol):
    """A transactional home for jobs, shared by the processes of a node."""

    def transaction(self, write: bool = True) -> contextlib.AbstractContextManager[StoreTx]: ...
    def add_commit_listener(self, listener: CommitListener) -> None: ...
    def remove_commit_listener(self, listener: CommitListener) -> None: ...
    def close(self) -> None: ...


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

_JOB_COLUMNS = "type, id, state, seq, jlock, sched_time, resubmit, data"


def _record(row: tuple[Any, ...]) -> JobRecord:
    type_key, job_id, state, seq, jlock, sched_time, resubmit, data = row
    return JobRecord(type_key, job_id, state, seq, jlock, sched_time, bool(resubmit), data)


class SQLiteTransaction:
    """One open SQLite transaction; also what host code uses for its own tables.

    ``execute`` runs any SQL on the same connection, so a caller can change
    its own tables and a job in one atomic commit (the seed's
    ``use_fabric_transaction_object`` case).
    """

    #: The parameter marker of ``execute`` (PostgreSQL's is ``%s``): host SQL
    #: meant for either store writes ``f"... VALUES ({tx.param})"``.
    param = "?"

    def __init__(self, store: "SQLiteStore", connection: sqlite3.Connection, write: bool) -> None:
        self.store = store
        self.connection = connection
        self.write = write
        self._touched: set[str] = set()
        self._after_commit: list[Callable[[], None]] = []

    # -- host access -------------------------------------------------------

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self.connection.execute(sql, params)

    def on_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` after this transaction commits (never if it rolls back)."""
        self._after_commit.append(callback)

    def touch(self, type_key: str) -> None:
        self._touched.add(type_key)

    @property
    def touched(self) -> frozenset[str]:
        return frozenset(self._touched)

    # -- jobs --------------------------------------------------------------

    def get_job(self, type_key: str, job_id: str) -> JobRecord | None:
        row = self.connection.execute(
            f"SELECT {_JOB_COLUMNS} FROM couch_jobs WHERE type = ? AND id = ?",
            (type_key, job_id),
        ).fetchone()
        return None if row is None else _record(row)

    def put_job(self, record: JobRecord) -> None:
        self.connection.execute(
            f"INSERT OR REPLACE INTO couch_jobs ({_JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.type,
                record.id,
                record.state,
                record.seq,
                record.jlock,
                record.sched_time,
                int(record.resubmit),
                record.data,
            ),
        )

    def delete_job(self, type_key: str, job_id: str) -> None:
        self.connection.execute(
            "DELETE FROM couch_jobs WHERE type = ? AND id = ?", (type_key, job_id)
        )

    def list_jobs(self, type_key: str | None = None) -> list[JobRecord]:
        if type_key is None:
            rows = self.connection.execute(
                f"SELECT {_JOB_COLUMNS} FROM couch_jobs ORDER BY type, id"
            ).fetchall()
        else:
            rows = self.connection.execute(
                f"SELECT {_JOB_COLUMNS} FROM couch_jobs WHERE type = ? ORDER BY id",
                (type_key,),
            ).fetchall()
        return [_record(row) for row in rows]

    def count_jobs(self) -> list[tuple[str, str, int]]:
        rows = self.connection.execute(
            "SELECT type, state, count(*) FROM couch_jobs GROUP BY type, state ORDER BY type, state"
        ).fetchall()
        return [(t, state, int(n)) for t, state, n in rows]

    def running_jobs(
        self, type_key: str, *, min_seq: int | None = None, max_seq: int | None = None
    ) -> list[JobRecord]:
        lo = -1 if min_seq is None else min_seq
        hi = (1 << 63) - 1 if max_seq is None else max_seq
        rows = self.connection.execute(
            f"SELECT {_JOB_COLUMNS} FROM couch_jobs WHERE type = ? AND state = 'running' "
            "AND seq BETWEEN ? AND ? ORDER BY seq",
            (type_key, lo, hi),
        ).fetchall()
        return [_record(row) for row in rows]

    # -- pending queue -----------------------------------------------------

    def add_pending(self, type_key: str, sched_time: int, job_id: str) -> None:
        self.connection.execute(
            "INSERT OR REPLACE INTO couch_jobs_pending (type, sched_time, id) VALUES (?, ?, ?)",
            (type_key, sched_time, job_id),
        )

    def remove_pending(self, type_key: str, sched_time: int, job_id: str) -> None:
        self.connection.execute(
            "DELETE FROM couch_jobs_pending WHERE type = ? AND sched_time = ? AND id = ?",
            (type_key, sched_time, job_id),
        )

    def pending_range(
        self, type_key: str, min_sched_time: int, max_sched_time: int, limit: int
    ) -> list[tuple[int, str]]:
        rows = self.connection.execute(
            "SELECT sched_time, id FROM couch_jobs_pending WHERE type = ? "
            "AND sched_time BETWEEN ? AND ? ORDER BY sched_time, id LIMIT ?",
            (type_key, min_sched_time, max_sched_time, limit),
        ).fetchall()
        return [(int(s), i) for s, i in rows]

    # -- activity ----------------------------------------------------------

    claim_limit = 1024  # the seed's RANGE_LIMIT: the write lock already serialises accepts

    def bump_type_activity(self, type_key: str) -> int:
        seq = self.next_sequence()
        self.set_type_activity(type_key, seq)
        return seq

    def next_sequence(self) -> int:
        (value,) = self.connection.execute(
            "UPDATE couch_jobs_counters SET value = value + 1 "
            "WHERE name = 'activity_seq' RETURNING value"
        ).fetchone()
        return int(value)

    def get_type_activity(self, type_key: str) -> int | None:
        row = self.connection.execute(
            "SELECT seq FROM couch_jobs_type_activity WHERE type = ?", (type_key,)
        ).fetchone()
        return None if row is None else int(row[0])

    def set_type_activity(self, type_key: str, seq: int) -> None:
        self.connection.execute(
            "INSERT OR REPLACE INTO couch_jobs_type_activity (type, seq) VALUES (?, ?)",
            (type_key, seq),
        )

    # -- type timeouts -----------------------------------------------------

    def get_type_timeout(self, type_key: str) -> float | None:
        row = self.connection.execute(
            "SELECT timeout FROM couch_jobs_type_timeouts WHERE type = ?", (type_key,)
        ).fetchone()
        return None if row is None else row[0]

    def set_type_timeout(self, type_key: str, timeout: float) -> None:
        self.connection.execute(
            "INSERT OR REPLACE INTO couch_jobs_type_timeouts (type, timeout) VALUES (?, ?)",
            (type_key, timeout),
        )

    def clear_type_timeout(self, type_key: str) -> None:
        self.connection.execute("DELETE FROM couch_jobs_type_timeouts WHERE type = ?", (type_key,))

    def list_type_timeouts(self) -> dict[str, float]:
        rows = self.connection.execute(
            "SELECT type, timeout FROM couch_jobs_type_timeouts ORDER BY type"
        ).fetchall()
        return {t: v for t, v in rows}


class _Conn:
    """A connection and whether a transaction is using it (guarded by the store's lock)."""

    __slots__ = ("connection", "pid", "busy")

    def __init__(self, connection: sqlite3.Connection, pid: int) -> None:
        self.connection = connection
        self.pid = pid
        self.busy = False


class SQLiteStore:
    """The node's jobs database: one file, one connection per thread per process.

    Connections are opened lazily and remembered per (process, thread), so an
    instance inherited across ``fork`` never reuses the parent's connection.
    ``synchronous=NORMAL`` in WAL mode loses nothing a committed transaction
    wrote when a process dies; pass ``synchronous="FULL"`` to survive power
    loss as well.

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
    ) -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        if busy_timeout <= 0:
            raise ValueError(f"busy_timeout must be positive seconds, got {busy_timeout!r}")
        self.path = os.fspath(path)
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous.upper()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._connections: list[_Conn] = []
        self._listeners: list[CommitListener] = []
        self._closed = False
        self.read_only = read_only
        if read_only:
            try:  # fail now, not at the first read, when there is no store to read
                with self._use() as conn:
                    conn.execute("SELECT 1 FROM couch_jobs LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                self.close()
                raise StoreUnavailable(f"couch_jobs store {self.path!r} cannot be read: {exc}") from None
            return
        with self._use() as conn:
            conn.executescript(_SCHEMA)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- connections -------------------------------------------------------

    def _closed_error(self) -> StoreClosed:
        return StoreClosed(f"couch_jobs store {self.path!r} is closed")

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
        """This thread's connection, marked busy; `StoreClosed` once closed."""
        pid = os.getpid()
        entry: _Conn | None = getattr(self._local, "entry", None)
        if entry is None or entry.pid != pid:
            if self._closed:
                raise self._closed_error()
            entry = self._open(pid)
            with self._lock:
                if self._closed:
                    entry.connection.close()
                    raise self._closed_error()
                self._connections.append(entry)
            self._local.entry = entry
        with self._lock:
            if self._closed:
                raise self._closed_error()
            if entry.busy:
                raise RuntimeError(
                    "a couch_jobs transaction is already open in this thread; "
                    "pass it as the tx argument instead of opening another"
                )
            entry.busy = True
        return entry

    def _release(self, entry: _Conn) -> None:
        with self._lock:
            entry.busy = False
            close_now = self._closed
            if close_now and entry in self._connections:
                self._connections.remove(entry)
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
    def transaction(self, write: bool = True) -> Iterator[SQLiteTransaction]:
        """A transaction; ``write`` takes the write lock at BEGIN (``BEGIN IMMEDIATE``).

        Commits when the block ends, rolls back if it raises.  After a commit
        the commit listeners are told which job types changed.
        """
        if write and self.read_only:
            raise StoreReadOnly(f"couch_jobs store {self.path!r} was opened read-only")
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
        # Committed: what follows must not make the caller believe it failed.
        touched = tx.touched
        callbacks: list[Callable[[], None]] = []
        if touched:
            callbacks.extend(lambda f=f: f(touched) for f in list(self._listeners))
        callbacks.extend(tx._after_commit)
        for callback in callbacks:
            try:
                callback()
            except Exception:
                _log.exception("couch_jobs commit callback %r failed", callback)

    # -- listeners ---------------------------------------------------------

    def add_commit_listener(self, listener: CommitListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_commit_listener(self, listener: CommitListener) -> None:
        with self._lock:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

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
        for entry in idle:
            entry.connection.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

