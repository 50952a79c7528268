"""The couch_jobs API: add, accept, update, finish, subscribe, wait.

Names and results follow the seed's ``couch_jobs`` module.  The seed's
``{error, _}`` results are exceptions (`errors`); ``ok`` is None; ``{ok, X}``
is X.  Times: ``sched_time``/``max_sched_time`` are integers the caller
chooses (by convention seconds since the epoch), type timeouts are seconds,
call timeouts are seconds (None waits forever, as the seed's ``infinity``).

Every function that takes ``tx`` accepts None (it opens and commits its own
transaction), a transaction from `CouchJobs.transaction`, or any object with
a ``tx`` attribute holding one of those (the seed's ``#{tx := Tx}`` db
handle).  Passing a transaction lets a caller change its own tables and a
job in one commit.

`CouchJobs` (`instance`) is the instance API; the module-level functions
here use the process's default instance, set with `configure` or `set_default`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable
from typing import Any

from .errors import CouchJobsError
from .instance import CouchJobs, store_counts
from .model import (
    UNDEFINED_MAX_SCHEDULED_TIME,
    Job,
    JobEvent,
    JobState,
    JobType,
    Subscription,
)
from .store import Store, StoreTx

__all__ = [
    "CouchJobs",
    "accept",
    "add",
    "clear_type_timeout",
    "configure",
    "counts",
    "default",
    "finish",
    "get_job",
    "get_job_data",
    "get_job_state",
    "get_jobs",
    "get_type_timeout",
    "is_resubmitted",
    "remove",
    "resubmit",
    "set_default",
    "set_type_timeout",
    "subscribe",
    "transaction",
    "unsubscribe",
    "update",
    "wait",
]

# -- the process's default instance ---------------------------------------

_default: CouchJobs | None = None
_default_lock = threading.Lock()


def set_default(jobs: CouchJobs | None) -> CouchJobs | None:
    """Install the instance the module-level functions use; returns the previous one."""
    global _default
    with _default_lock:
        previous, _default = _default, jobs
    return previous


def configure(store: Store | str | os.PathLike[str], **options: Any) -> CouchJobs:
    """Open ``CouchJobs(store, **options)`` and make it this process's default."""
    jobs = CouchJobs(store, **options)
    set_default(jobs)
    return jobs


def default() -> CouchJobs:
    jobs = _default
    if jobs is None:
        raise CouchJobsError(
            "couch_jobs is not configured in this process; call actors.couch_jobs.configure(path) first"
        )
    return jobs


def transaction(write: bool = True) -> contextlib.AbstractContextManager[StoreTx]:
    return default().transaction(write)


def add(tx: Any, job_type: JobType, job_id: str, data: dict[str, Any], sched_time: int = 0) -> None:
    return default().add(tx, job_type, job_id, data, sched_time)


def remove(tx: Any, job_type: JobType, job_id: str) -> None:
    return default().remove(tx, job_type, job_id)


def get_job_data(tx: Any, job_type: JobType, job_id: str) -> dict[str, Any]:
    return default().get_job_data(tx, job_type, job_id)


def get_job_state(tx: Any, job_type: JobType, job_id: str) -> JobState:
    return default().get_job_state(tx, job_type, job_id)


def accept(
    job_type: JobType,
    *,
    max_sched_time: int | None = None,
    no_schedule: bool = False,
    timeout: float | None = None,
) -> tuple[Job, dict[str, Any]]:
    return default().accept(job_type, max_sched_time=max_sched_time, no_schedule=no_schedule, timeout=timeout)


def finish(tx: Any, job: Job, data: dict[str, Any] | None = None) -> None:
    return default().finish(tx, job, data)


def resubmit(tx: Any, job: Job, sched_time: int | None = UNDEFINED_MAX_SCHEDULED_TIME) -> Job:
    return default().resubmit(tx, job, sched_time)


def is_resubmitted(job: Job) -> bool:
    return CouchJobs.is_resubmitted(job)


def update(tx: Any, job: Job, data: dict[str, Any] | None = None) -> Job:
    return default().update(tx, job, data)


def subscribe(job_type: JobType, job_id: str, tx: Any = None) -> tuple[Subscription | None, JobState, dict[str, Any]]:
    return default().subscribe(job_type, job_id, tx)


def unsubscribe(sub: Subscription) -> None:
    return default().unsubscribe(sub)


def wait(
    subs: Subscription | Iterable[Subscription],
    state: str | None = None,
    timeout: float | None = None,
) -> JobEvent | None:
    return default().wait(subs, state, timeout)


def set_type_timeout(job_type: JobType, timeout: float) -> None:
    return default().set_type_timeout(job_type, timeout)


def clear_type_timeout(job_type: JobType) -> None:
    return default().clear_type_timeout(job_type)


def get_type_timeout(job_type: JobType) -> float | None:
    return default().get_type_timeout(job_type)


def get_job(job_type: JobType, job_id: str) -> Job | None:
    return default().get_job(job_type, job_id)


def counts(store: Store | None = None) -> dict[JobType, dict[str, int]]:
    """``{type: {"pending": n, "running": n, "finished": n}}`` in one read transaction.

    Every type with jobs or an activity timeout is there.  ``store``: any
    store, for instance one a monitor opened with ``open_store(location,
    read_only=True)`` (no `CouchJobs`, no listener threads); None reads the
    process's default instance.  One aggregate query, on SQLite and
    PostgreSQL alike.
    """
    return store_counts(default().store if store is None else store)


def get_jobs(job_type: JobType | None = None) -> list[tuple[JobType, str, JobState, dict[str, Any]]]:
    return default().get_jobs(job_type)
