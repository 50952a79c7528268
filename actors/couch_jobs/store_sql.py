"""The SQL both job stores run: `StoreTx` once, over a connection with ``execute``.

SQLite (`store_sqlite`) and PostgreSQL (`store_postgres`) keep the same
tables and ask them the same questions, so the queries live here, written
once with ``?`` markers.  A backend subclasses `SQLTransaction` and
`SQLStore` and says only what really differs:

- ``param``, its parameter marker (a shared statement is rewritten from
  ``?`` once, then cached), and ``execute``, the host's raw access;
- ``row_lock``, appended when a writing transaction reads a job (PostgreSQL
  writers lock rows, ``FOR UPDATE``; SQLite's writer holds the whole file);
- claiming pending jobs and counting activity (`pending_range` in a writing
  transaction, `bump_type_activity`, `set_type_activity`), whose locking
  and tables differ;
- what `touch` sends (PostgreSQL notifies other machines);
- opening, committing and closing transactions (`SQLStore._begin`),
  connection handling, the schema and error mapping.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from .errors import StoreClosed, StoreReadOnly
from .store import CommitListener, JobRecord

__all__ = ["SQLStore", "SQLTransaction"]

_log = logging.getLogger(__name__)

_JOB_COLUMNS = "type, id, state, seq, jlock, sched_time, resubmit, data"
_LAST_SEQ = (1 << 63) - 1  # above any activity sequence (BIGINT's largest)


def _record(row: tuple[Any, ...]) -> JobRecord:
    type_key, job_id, state, seq, jlock, sched_time, resubmit, data = row
    return JobRecord(type_key, job_id, state, seq, jlock, int(sched_time), bool(resubmit), data)


@functools.lru_cache(maxsize=256)
def _with_param(sql: str, param: str) -> str:
    """A shared statement with the backend's parameter marker (the statements are a fixed, small set)."""
    return sql.replace("?", param)


class SQLTransaction(abc.ABC):
    """One open transaction on a couch_jobs SQL store: the `StoreTx` queries both backends share.

    Also what host code uses for its own tables (``execute``), so a
    caller's writes and a job commit together.
    """

    #: The parameter marker of ``execute``: host SQL meant for either store
    #: writes ``f"... VALUES ({tx.param})"``.
    param: ClassVar[str] = "?"
    #: Appended to the read of a job in a writing transaction.
    row_lock: ClassVar[str] = ""
    #: How many due pending jobs a dequeue chooses among (see `pending.dequeue`).
    claim_limit: ClassVar[int]

    def __init__(self, store: SQLStore, connection: Any, write: bool) -> None:
        self.store = store
        self.connection = connection
        self.write = write
        self._touched: set[str] = set()
        self._after_commit: list[Callable[[], None]] = []

    def _run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run a statement written with ``?`` markers on this backend; its cursor."""
        if self.param != "?":
            sql = _with_param(sql, self.param)
        return self.connection.execute(sql, params)

    # -- host access -------------------------------------------------------

    @abc.abstractmethod
    def execute(self, sql: str, params: Any = ()) -> Any:
        """Run the host's own SQL (with this backend's ``param`` markers) in this transaction."""

    def on_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` after this transaction commits (never if it rolls back).

        Only for transactions couch_jobs opened: a caller's own PostgreSQL
        connection commits without telling us.
        """
        self._after_commit.append(callback)

    def touch(self, type_key: str) -> None:
        """Record that this transaction changed jobs of ``type_key`` (for wake-ups)."""
        self._touched.add(type_key)

    @property
    def touched(self) -> frozenset[str]:
        return frozenset(self._touched)

    # -- jobs --------------------------------------------------------------

    def get_job(self, type_key: str, job_id: str) -> JobRecord | None:
        lock = self.row_lock if self.write else ""
        row = self._run(
            f"SELECT {_JOB_COLUMNS} FROM couch_jobs WHERE type = ? AND id = ?{lock}",
            (type_key, job_id),
        ).fetchone()
        return None if row is None else _record(row)

    def put_job(self, record: JobRecord) -> None:
        self._run(
            f"INSERT INTO couch_jobs ({_JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (type, id) DO UPDATE SET state = excluded.state, seq = excluded.seq, "
            "jlock = excluded.jlock, sched_time = excluded.sched_time, "
            "resubmit = excluded.resubmit, data = excluded.data",
            (
                record.type,
                record.id,
                record.state,
                record.seq,
                record.jlock,
                record.sched_time,
                record.resubmit,
                record.data,
            ),
        )

    def delete_job(self, type_key: str, job_id: str) -> None:
        self._run("DELETE FROM couch_jobs WHERE type = ? AND id = ?", (type_key, job_id))

    def list_jobs(self, type_key: str | None = None) -> list[JobRecord]:
        if type_key is None:
            cursor = self._run(f"SELECT {_JOB_COLUMNS} FROM couch_jobs ORDER BY type, id")
        else:
            cursor = self._run(f"SELECT {_JOB_COLUMNS} FROM couch_jobs WHERE type = ? ORDER BY id", (type_key,))
        return [_record(row) for row in cursor.fetchall()]

    def count_jobs(self) -> list[tuple[str, str, int]]:
        rows = self._run(
            "SELECT type, state, count(*) FROM couch_jobs GROUP BY type, state ORDER BY type, state"
        ).fetchall()
        return [(t, state, int(n)) for t, state, n in rows]

    def running_jobs(self, type_key: str, *, min_seq: int | None = None, max_seq: int | None = None) -> list[JobRecord]:
        lo = -1 if min_seq is None else min_seq
        hi = _LAST_SEQ if max_seq is None else max_seq
        rows = self._run(
            f"SELECT {_JOB_COLUMNS} FROM couch_jobs WHERE type = ? AND state = 'running' "
            "AND seq BETWEEN ? AND ? ORDER BY seq",
            (type_key, lo, hi),
        ).fetchall()
        return [_record(row) for row in rows]

    # -- pending queue -----------------------------------------------------

    def add_pending(self, type_key: str, sched_time: int, job_id: str) -> None:
        self._run(
            "INSERT INTO couch_jobs_pending (type, sched_time, id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            (type_key, sched_time, job_id),
        )

    def remove_pending(self, type_key: str, sched_time: int, job_id: str) -> None:
        self._run(
            "DELETE FROM couch_jobs_pending WHERE type = ? AND sched_time = ? AND id = ?",
            (type_key, sched_time, job_id),
        )

    def pending_range(
        self, type_key: str, min_sched_time: int, max_sched_time: int, limit: int
    ) -> list[tuple[int, str]]:
        rows = self._run(
            "SELECT sched_time, id FROM couch_jobs_pending WHERE type = ? "
            "AND sched_time BETWEEN ? AND ? ORDER BY sched_time, id LIMIT ?",
            (type_key, min_sched_time, max_sched_time, limit),
        ).fetchall()
        return [(int(s), i) for s, i in rows]

    # -- activity ----------------------------------------------------------

    def get_type_activity(self, type_key: str) -> int | None:
        """The type's activity: its one row on SQLite, the sum of its per-backend rows on PostgreSQL."""
        (value,) = self._run("SELECT sum(seq) FROM couch_jobs_type_activity WHERE type = ?", (type_key,)).fetchone()
        return None if value is None else int(value)

    # -- type timeouts -----------------------------------------------------

    def _seconds(self, stored: Any) -> float:
        """A timeout as read back: as SQLite stored it (PostgreSQL's column is a double)."""
        return stored

    def get_type_timeout(self, type_key: str) -> float | None:
        row = self._run("SELECT timeout FROM couch_jobs_type_timeouts WHERE type = ?", (type_key,)).fetchone()
        return None if row is None else self._seconds(row[0])

    def set_type_timeout(self, type_key: str, timeout: float) -> None:
        self._run(
            "INSERT INTO couch_jobs_type_timeouts (type, timeout) VALUES (?, ?) "
            "ON CONFLICT (type) DO UPDATE SET timeout = excluded.timeout",
            (type_key, timeout),
        )

    def clear_type_timeout(self, type_key: str) -> None:
        self._run("DELETE FROM couch_jobs_type_timeouts WHERE type = ?", (type_key,))

    def list_type_timeouts(self) -> dict[str, float]:
        rows = self._run("SELECT type, timeout FROM couch_jobs_type_timeouts ORDER BY type").fetchall()
        return {t: self._seconds(v) for t, v in rows}


class SQLStore(abc.ABC):
    """What a couch_jobs SQL store does around its transactions, the same on every backend.

    A backend sets ``location`` (how messages name it: a path, or a URL
    without its password), provides `_begin` (a connection in a transaction,
    committed when the block ends, rolled back if it raises) and ``close``.
    """

    def __init__(self, location: str, read_only: bool) -> None:
        self.location = location
        self.read_only = read_only
        self._lock = threading.Lock()
        self._listeners: list[CommitListener] = []
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def _closed_error(self) -> StoreClosed:
        return StoreClosed(f"couch_jobs store {self.location!r} is closed")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    # -- transactions ------------------------------------------------------

    @abc.abstractmethod
    def _begin(self, write: bool) -> contextlib.AbstractContextManager[SQLTransaction]:
        """The backend's transaction: committed when the block ends, rolled back if it raises."""

    @abc.abstractmethod
    def close(self, timeout: float = 5.0) -> None:
        """Close the store in this process (other processes keep theirs); idempotent."""

    @contextlib.contextmanager
    def transaction(self, write: bool = True) -> Iterator[SQLTransaction]:
        """A transaction; ``write`` ones lock what they change (see the backend's `_begin`).

        Commits when the block ends, rolls back if it raises.  After the
        commit the commit listeners of this process hear which job types
        changed, then the transaction's `on_commit` callbacks run.
        """
        if write and self.read_only:
            raise StoreReadOnly(f"couch_jobs store {self.location!r} was opened read-only")
        with self._begin(write) as tx:
            yield tx
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
