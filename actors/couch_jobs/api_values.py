"""Between the store's rows and the API's values: `Job` from a `JobRecord`, and the API's argument checks.

What `CouchJobs` needs on both sides of every call, kept apart from its
calls so that each reads on its own: a row becomes a `Job` (type and data
decoded), a `Job` passed back must be one `accept` returned (it carries
the lock), and timeouts are None (wait for ever) or non-negative seconds.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from .model import Job, JobState, decode_data, decode_type, encode_data
from .notifications import NOT_FOUND
from .store import JobRecord

__all__ = ["WAIT_STATES", "check_timeout", "job_from_record", "locked_job", "new_lock", "optional_data"]

#: The states `wait` may filter on: a job's states, and not found (removed).
WAIT_STATES = frozenset({*JobState, NOT_FOUND})


def new_lock() -> str:
    return uuid.uuid4().hex


def job_from_record(record: JobRecord, jlock: str | None = None) -> Job:
    return Job(
        type=decode_type(record.type),
        id=record.id,
        jlock=record.jlock if jlock is None else jlock,
        seq=record.seq,
        stime=record.sched_time,
        resubmit=record.resubmit,
        state=JobState(record.state),
        data=decode_data(record.data),
    )


def locked_job(job: Any, what: str) -> Job:
    if not isinstance(job, Job):
        raise TypeError(f"{what} needs a Job returned by accept, got {type(job).__name__}")
    if not isinstance(job.jlock, str):
        raise ValueError(f"{what} needs a Job returned by accept (with a lock); job {job.id!r} has none")
    return job


def optional_data(data: Any) -> str | None:
    return None if data is None else encode_data(data)


def check_timeout(timeout: float | None, name: str = "timeout") -> float:
    if timeout is None:
        return math.inf
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise ValueError(f"{name} must be None or non-negative seconds, got {timeout!r}")
    return float(timeout)
