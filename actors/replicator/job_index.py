"""The scheduler's job table: records by id, with the indexes and counts it keeps.

`SchedulerState` (the scheduling decisions, in `scheduler_state`) is a
`JobIndex`: this is the bookkeeping below those decisions, apart so that
each reads on its own.  Every record goes in and out through `_put` and
`_delete`, which keep the process index (``pid -> id``), the running set,
and the per-category counts and age sums the scheduler's gauges read in
O(1), and which record the changes the actor layer publishes to readers
(`track_changes`, `drain_changes`).  The dict is only ever rebound per key,
so another thread may read while the scheduler works (the seed's ets table
with ``read_concurrency``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .records import ADDED, STARTED, STARTING, Job, Rep, is_crash

__all__ = ["CATEGORIES", "CRASHED", "JobIndex", "PENDING", "RUNNING"]

#: The categories the scheduler's gauges count (``couch_replicator.jobs.<category>``).
PENDING, RUNNING, CRASHED = "pending", "running", "crashed"
CATEGORIES = (PENDING, RUNNING, CRASHED)


class JobIndex:
    """``id -> Job`` with its indexes, per-category counts and change log."""

    def __init__(self) -> None:
        self._jobs: dict[Any, Job] = {}
        self._by_pid: dict[Any, Any] = {}
        self._running: set[Any] = set()
        # Incremental state statistics: category -> [count, sum of since-times].
        self._category: dict[Any, tuple[str, float]] = {}
        self._agg: dict[str, list[float]] = {PENDING: [0, 0.0], RUNNING: [0, 0.0], CRASHED: [0, 0.0]}
        # id -> latest record (None: deleted) since the last `drain_changes`;
        # None while nobody asked to track (no cost for plain users).
        self._changes: dict[Any, Job | None] | None = None

    def load_jobs(self, jobs: Iterable[Job], now: float = 0.0) -> None:
        """Put records into the table as they are (tests, and restoring a table)."""
        for job in jobs:
            if job.id in self._jobs:
                raise ValueError(f"duplicate job id {job.id!r}")
            self._put(job, now)

    def track_changes(self) -> dict[Any, Job]:
        """Start recording changed records; returns the whole table as it is now.

        The actor layer publishes the table to readers in other threads and
        processes as deltas (`drain_changes`) rather than copying it on every
        event, which would make each ``add_job`` O(jobs).
        """
        self._changes = {}
        return dict(self._jobs)

    def drain_changes(self) -> dict[Any, Job | None]:
        """Records changed since the last drain (``None`` for a removed job)."""
        if self._changes is None:
            raise RuntimeError("drain_changes() called before track_changes()")
        changes, self._changes = self._changes, {}
        return changes

    # -- bookkeeping ------------------------------------------------------

    def _classify(self, job: Job, now: float) -> tuple[str, float]:
        head = job.history[0] if job.history else (ADDED, now)
        if job.pid is not None:
            return RUNNING, head[1] if head[0] == STARTED else now
        if is_crash(head[0]):
            return CRASHED, head[1]
        return PENDING, head[1]

    def _put(self, job: Job, now: float) -> None:
        old = self._jobs.get(job.id)
        if old is not None:
            self._forget_indexes(old)
        self._jobs[job.id] = job
        if self._changes is not None:
            self._changes[job.id] = job
        if job.pid is not None:
            self._running.add(job.id)
            if job.pid is not STARTING:
                self._by_pid[job.pid] = job.id
        category = self._classify(job, now)
        self._category[job.id] = category
        agg = self._agg[category[0]]
        agg[0] += 1
        agg[1] += category[1]

    def _forget_indexes(self, job: Job) -> None:
        self._running.discard(job.id)
        if job.pid is not None and self._by_pid.get(job.pid) == job.id:
            del self._by_pid[job.pid]
        category = self._category.pop(job.id, None)
        if category is not None:
            agg = self._agg[category[0]]
            agg[0] -= 1
            agg[1] -= category[1]

    def _delete(self, job: Job) -> None:
        self._forget_indexes(job)
        self._jobs.pop(job.id, None)
        if self._changes is not None:
            self._changes[job.id] = None

    # -- reads ---------------------------------------------------------------------

    def job_id_of(self, pid: Any) -> Any:
        """The id of the job running as ``pid``, or None."""
        return self._by_pid.get(pid)

    def get_job(self, job_id: Any) -> Job | None:
        """The raw record (not the JSON view of `job`)."""
        return self._jobs.get(job_id)

    def all_jobs(self) -> list[Job]:
        return list(self._jobs.values())

    def rep_state(self, job_id: Any) -> Rep | None:
        job = self._jobs.get(job_id)
        return None if job is None else job.rep

    def find_jobs_by_dbname(self, db_name: str) -> list:
        return [j.id for j in list(self._jobs.values()) if j.rep.db_name == db_name]

    def find_jobs_by_doc(self, db_name: str, doc_id: str) -> list:
        return [j.id for j in list(self._jobs.values()) if j.rep.db_name == db_name and j.rep.doc_id == doc_id]

    def running_job_count(self) -> int:
        return len(self._running)

    def pending_job_count(self) -> int:
        return len(self._jobs) - len(self._running)

    def total_jobs(self) -> int:
        return len(self._jobs)
