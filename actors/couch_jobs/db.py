"""Job operations inside one store transaction (the seed's ``couch_jobs_fdb``).

Each function takes an open `StoreTx` and works on encoded types
(`model.encode_type`) and JSON-text data; the public API in `api` does the
encoding, opens transactions and turns records into `Job` values.  Keeping
the operations transaction-scoped is what lets a caller compose several of
them - or its own writes - into one atomic commit.

Data model (compare the seed's key layout)::

    jobs      (type, id) -> state, seq, jlock, sched_time, resubmit, data
    pending   (type, sched_time, id)
    timeouts  type -> activity timeout (seconds)
    activity  type -> sequence of the type's latest activity
    counters  activity_seq: bumped on every accept, update, finish,
              re-enqueue and remove (the versionstamp's role)

A running job's ``seq`` is the sequence of its last accept/update, so "jobs
not updated since sequence S" is a range read on the running-jobs index.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping

from . import pending
from .errors import CouchJobsError, Halt, NotFound, NoTypeTimeout
from .model import PENDING_SEQ, JobState, decode_type
from .store import JobRecord, StoreTx

__all__ = [
    "accept",
    "add",
    "bump_activity",
    "finish",
    "get_active_since",
    "get_activity_seq",
    "get_inactive_since",
    "get_job",
    "get_job_or_halt",
    "get_running_seqs",
    "get_types",
    "job_counts",
    "re_enqueue_inactive",
    "remove",
    "resubmit",
    "update",
]


def bump_activity(tx: StoreTx, type_key: str) -> int:
    """Advance the global activity sequence and record it as the type's latest.

    The seed's ``update_watch``: notifiers and activity monitors compare this
    per-type value between checks to see whether anything happened.
    """
    seq = tx.bump_type_activity(type_key)
    tx.touch(type_key)
    return seq


def get_activity_seq(tx: StoreTx, type_key: str) -> int | None:
    return tx.get_type_activity(type_key)


def get_job(tx: StoreTx, type_key: str, job_id: str) -> JobRecord | None:
    return tx.get_job(type_key, job_id)


def get_job_or_halt(tx: StoreTx, type_key: str, job_id: str, jlock: str) -> JobRecord:
    """The job if ``jlock`` still owns it; `Halt` if it was removed or re-enqueued."""
    record = tx.get_job(type_key, job_id)
    if record is None:
        raise Halt(f"job {job_id!r} of type {decode_type(type_key)!r} was removed")
    if record.jlock != jlock:
        raise Halt(
            f"job {job_id!r} of type {decode_type(type_key)!r} is no longer locked by "
            "this worker (re-enqueued after its activity timeout, or finished)"
        )
    return record


def _maybe_enqueue(tx: StoreTx, type_key: str, job_id: str, sched_time: int, resubmit: bool, data: str) -> JobRecord:
    """Store the job unlocked: pending (and queued) if ``resubmit``, else finished."""
    if resubmit:
        record = JobRecord(type_key, job_id, JobState.PENDING, PENDING_SEQ, None, sched_time, False, data)
        tx.put_job(record)
        pending.enqueue(tx, type_key, sched_time, job_id)
    else:
        record = JobRecord(type_key, job_id, JobState.FINISHED, None, None, sched_time, False, data)
        tx.put_job(record)
        tx.touch(type_key)
    return record


def add(tx: StoreTx, type_key: str, job_id: str, data: str, sched_time: int) -> JobRecord:
    """Create a pending job, or resubmit an existing one with the new time and data."""
    if tx.get_type_timeout(type_key) is None:
        raise NoTypeTimeout(decode_type(type_key))
    if tx.get_job(type_key, job_id) is not None:
        return resubmit(tx, type_key, job_id, sched_time, data)
    return _maybe_enqueue(tx, type_key, job_id, sched_time, True, data)


def remove(tx: StoreTx, type_key: str, job_id: str) -> None:
    """Delete a job in any state; its worker's next write gets `Halt`.

    Unlike the seed this also bumps the type's activity, so subscribers hear
    ``not_found`` promptly instead of at the type's next unrelated change.
    """
    record = tx.get_job(type_key, job_id)
    if record is None:
        raise NotFound(f"no job {job_id!r} of type {decode_type(type_key)!r}")
    pending.remove(tx, type_key, job_id, record.sched_time)
    tx.delete_job(type_key, job_id)
    bump_activity(tx, type_key)


def resubmit(tx: StoreTx, type_key: str, job_id: str, sched_time: int | None, data: str | None = None) -> JobRecord:
    """Run the job (again) at ``sched_time`` (None keeps the current one).

    finished: re-enqueued as pending; pending: moved to the new time (new data
    stored, as upstream later did); running: flagged so that `finish` puts it
    back in the queue instead of finishing it.  ``data`` of None keeps the
    stored data; a running job's data always stays the worker's.
    """
    record = tx.get_job(type_key, job_id)
    if record is None:
        raise NotFound(f"no job {job_id!r} of type {decode_type(type_key)!r}")
    stime = record.sched_time if sched_time is None else sched_time
    new_data = record.data if data is None else data
    if record.state == JobState.FINISHED:
        return _maybe_enqueue(tx, type_key, job_id, stime, True, new_data)
    if record.state == JobState.PENDING:
        updated = record.evolve(seq=PENDING_SEQ, sched_time=stime, data=new_data)
        tx.put_job(updated)
        if stime != record.sched_time:
            pending.remove(tx, type_key, job_id, record.sched_time)
            pending.enqueue(tx, type_key, stime, job_id)
        # Wake the type's waiters either way: an accept that skipped this row
        # while we held it (SKIP LOCKED on PostgreSQL) sleeps until told.
        tx.touch(type_key)
        return updated
    updated = record.evolve(sched_time=stime, resubmit=True)
    tx.put_job(updated)
    tx.touch(type_key)
    return updated


def accept(
    tx: StoreTx,
    type_key: str,
    max_sched_time: int,
    no_schedule: bool,
    rng: random.Random,
    new_lock: Callable[[], str],
) -> JobRecord | None:
    """Take a due pending job and lock it for this worker; None when none is due."""
    job_id = pending.dequeue(tx, type_key, max_sched_time, no_schedule, rng)
    if job_id is None:
        return None
    record = tx.get_job(type_key, job_id)
    if record is None or record.jlock is not None:
        raise CouchJobsError(
            f"pending index names job {job_id!r} of type {decode_type(type_key)!r} "
            f"but the job is {record.state if record else 'missing'}"
        )
    seq = bump_activity(tx, type_key)
    locked = record.evolve(state=JobState.RUNNING, seq=seq, jlock=new_lock(), resubmit=False)
    tx.put_job(locked)
    return locked


def finish(tx: StoreTx, type_key: str, job_id: str, jlock: str, data: str | None) -> JobRecord:
    """Finish the worker's job, or re-enqueue it if it was resubmitted meanwhile."""
    record = get_job_or_halt(tx, type_key, job_id, jlock)
    new_data = record.data if data is None else data
    done = _maybe_enqueue(tx, type_key, job_id, record.sched_time, record.resubmit, new_data)
    bump_activity(tx, type_key)
    return done


def update(tx: StoreTx, type_key: str, job_id: str, jlock: str, data: str | None) -> JobRecord:
    """Report progress: new data (None keeps it) and a fresh activity sequence."""
    record = get_job_or_halt(tx, type_key, job_id, jlock)
    new_data = record.data if data is None else data
    seq = bump_activity(tx, type_key)
    updated = record.evolve(seq=seq, data=new_data)
    tx.put_job(updated)
    return updated


def get_types(tx: StoreTx) -> list[str]:
    """Encoded types that have an activity timeout (the types the server runs)."""
    return list(tx.list_type_timeouts())


def job_counts(tx: StoreTx) -> dict[str, dict[str, int]]:
    """``{encoded type: {"pending": n, "running": n, "finished": n}}``.

    Every type with jobs or an activity timeout is there, its missing
    states at 0, so a monitor sees an idle type as idle rather than absent.
    """
    out = {t: {state.value: 0 for state in JobState} for t in tx.list_type_timeouts()}
    for type_key, state, count in tx.count_jobs():
        out.setdefault(type_key, {s.value: 0 for s in JobState})[state] = count
    return out


def get_active_since(tx: StoreTx, type_key: str, seq: int) -> dict[str, JobRecord]:
    """Running jobs accepted or updated at or after ``seq``."""
    return {r.id: r for r in tx.running_jobs(type_key, min_seq=seq)}


def get_inactive_since(tx: StoreTx, type_key: str, seq: int) -> list[str]:
    """Running jobs not accepted or updated after ``seq``."""
    return [r.id for r in tx.running_jobs(type_key, max_seq=seq)]


def get_running_seqs(tx: StoreTx, type_key: str) -> dict[str, int]:
    """``{job id: activity sequence}`` of the type's running jobs (what a monitor remembers)."""
    return {r.id: int(r.seq) for r in tx.running_jobs(type_key) if r.seq is not None}


def re_enqueue_inactive(tx: StoreTx, type_key: str, job_ids: Iterable[str] | Mapping[str, int]) -> list[str]:
    """Put stalled running jobs back in the queue; their workers get `Halt`.

    Given ``{job id: seq}``, a job is re-enqueued only if it still carries
    that sequence when read under the write lock: a worker's update that
    committed after the monitor's read keeps its job.
    """
    expected = job_ids if isinstance(job_ids, Mapping) else None
    done = []
    for job_id in job_ids:
        record = tx.get_job(type_key, job_id)
        if record is None or record.state != JobState.RUNNING:
            continue
        if expected is not None and record.seq != expected[job_id]:
            continue
        _maybe_enqueue(tx, type_key, job_id, record.sched_time, True, record.data)
        done.append(job_id)
    if done:
        bump_activity(tx, type_key)
    return done
