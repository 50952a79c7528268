"""Where jobs live: the narrow store interface everything above talks to.

The seed keeps jobs in FoundationDB.  Here a store is a transactional SQL
database shared by the processes of a node (SQLite, `store_sqlite`, the
default) or by nodes on many machines (PostgreSQL, `store_postgres`); both
run the queries of `store_sql` and differ only in connections, locking and
wake-ups.

Everything above the stores talks to the `Store`/`StoreTx` protocols, which
are deliberately small - rows in, rows out, no policy - so that a backend can
be added without touching the rest.  Types arrive here already encoded
(`model.encode_type`) and data as JSON text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

__all__ = [
    "CommitListener",
    "JobRecord",
    "Store",
    "StoreTx",
]

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
