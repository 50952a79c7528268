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

import random

from .store import StoreTx

__all__ = ["RANGE_LIMIT", "dequeue", "enqueue", "remove"]

#: ``?RANGE_LIMIT``: how many due jobs a dequeue chooses among.
RANGE_LIMIT = 1024


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
