"""The pending-jobs queue (the seed's ``couch_jobs_pending``).

Pending jobs are indexed by ``(type, sched_time, job_id)``.  Dequeue picks a
random job among the first `RANGE_LIMIT` due ones rather than the oldest, as
the seed does, so that many workers accepting at once spread over different
jobs; here the write lock of the enclosing transaction (SQLite) or a row
lock taken with ``FOR UPDATE SKIP LOCKED`` (PostgreSQL, which chooses among
one candidate: the first one no other worker holds), not a read-conflict
key, guarantees that no two workers take the same one.
"""

from __future__ import annotations

import math
import random

from .model import UNDEFINED_MAX_SCHEDULED_TIME
from .store import StoreTx

__all__ = [
    "MIN_ACCEPT_WAIT",
    "RANGE_LIMIT",
    "accept_wait_limit",
    "dequeue",
    "enqueue",
    "remove",
]

#: ``?RANGE_LIMIT``: how many due jobs a dequeue chooses among.
RANGE_LIMIT = 1024

#: ``?MIN_ACCEPT_WAIT_MSEC``, in seconds: the shortest wait of an accept
#: bounded by its ``max_sched_time``.
MIN_ACCEPT_WAIT = 0.1

#: The seed's ``limit_timeout``: waits of 2^32 ms or more are ``infinity``.
_LIMIT_TIMEOUT = 0xFFFFFFFF / 1000.0


def accept_wait_limit(max_sched_time: int, no_schedule: bool, wall_now: float) -> float:
    """How long an accept with nothing due may wait before `NotFound`, in seconds.

    The seed's ``wait_pending``: a ``max_sched_time`` (seconds since the
    epoch) says which jobs the caller wants, so waiting past it is pointless:
    the wait ends when that time comes, and no sooner than 100 ms from now
    (a time already past gives up after 100 ms, whatever the caller's own
    timeout).  The default ``max_sched_time`` and ``no_schedule`` wait
    without this limit (the seed's ``limit_timeout``; ``no_schedule`` as
    upstream couch_jobs later fixed it: its ``max_sched_time`` of 0 is not a
    time in the past).
    """
    if no_schedule or max_sched_time >= UNDEFINED_MAX_SCHEDULED_TIME:
        return math.inf
    limit = max(MIN_ACCEPT_WAIT, max_sched_time - wall_now)
    return math.inf if limit >= _LIMIT_TIMEOUT else limit


def enqueue(tx: StoreTx, type_key: str, sched_time: int, job_id: str) -> None:
    tx.add_pending(type_key, sched_time, job_id)
    tx.touch(type_key)


def dequeue(
    tx: StoreTx,
    type_key: str,
    max_sched_time: int,
    no_schedule: bool,
    rng: random.Random,
) -> str | None:
    """Take one due pending job off the queue; None when there is none.

    ``no_schedule`` considers only jobs added with sched_time 0 (the seed's
    cheaper path for types that never schedule); otherwise every job with
    ``sched_time <= max_sched_time`` is due.
    """
    hi = 0 if no_schedule else max_sched_time
    limit = min(RANGE_LIMIT, getattr(tx, "claim_limit", RANGE_LIMIT))
    candidates = tx.pending_range(type_key, 0, hi, limit)
    if not candidates:
        return None
    sched_time, job_id = candidates[0] if len(candidates) == 1 else rng.choice(candidates)
    tx.remove_pending(type_key, sched_time, job_id)
    return job_id


def remove(tx: StoreTx, type_key: str, job_id: str, sched_time: int) -> None:
    tx.remove_pending(type_key, sched_time, job_id)
    tx.touch(type_key)
