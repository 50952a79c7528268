"""`CouchJobs`: couch_jobs on one store, the seed's ``couch_jobs`` API as methods.

An instance owns (or borrows) a store, a waker that blocked `accept` and
`wait` calls sleep on, and the in-process subscription hub; every call
checks its arguments, runs one store transaction (the caller's, when given
``tx``) through `db`, and turns rows into values (`api_values`).  The
module-level functions of `api` call the process's default instance.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

from actors import api
from actors import stats as _stats
from actors.clock import Clock, MonotonicClock, WallClock
from actors.config import Config

from . import db, metrics, pending, settings
from .api_values import WAIT_STATES, check_timeout, job_from_record, locked_job, new_lock, optional_data
from .errors import NotFound
from .model import (
    UNDEFINED_MAX_SCHEDULED_TIME,
    Job,
    JobEvent,
    JobState,
    JobType,
    Subscription,
    check_job_id,
    check_sched_time,
    decode_data,
    decode_type,
    encode_data,
    encode_type,
)
from .store import JobRecord, Store, StoreTx
from .stores import open_store
from .subscriptions import LocalSubscriptions
from .waker import ConditionWaker, Waker

__all__ = ["CouchJobs", "store_counts"]


class CouchJobs:
    """couch_jobs on one store, with its waker and in-process subscription hub."""

    def __init__(
        self,
        store: Store | str | os.PathLike[str],
        *,
        waker: Waker | None = None,
        config: Config | None = None,
        clock: Clock | None = None,
        wall_clock: Clock | None = None,
        rng: random.Random | None = None,
        new_lock: Callable[[], str] = new_lock,
    ) -> None:
        self._owns_store = not hasattr(store, "transaction")
        if self._owns_store:
            store = open_store(
                store,  # type: ignore[arg-type]
                busy_timeout=settings.busy_timeout_msec(config) / 1000.0,
                connect_timeout=settings.pg_connect_timeout_msec(config) / 1000.0,
                pool_size=settings.pg_pool_size(config),
                idle_in_transaction_timeout=(settings.pg_idle_in_transaction_timeout_msec(config) / 1000.0 or None),
            )
        self.store: Store = store  # type: ignore[assignment]
        self.config = config
        self.waker: Waker = (
            waker if waker is not None else ConditionWaker(settings.wakeup_recheck_msec(config) / 1000.0)
        )
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        # Only to tell how far off an accept's max_sched_time (epoch seconds) is.
        self.wall_clock: Clock = wall_clock if wall_clock is not None else WallClock()
        self.rng = rng if rng is not None else random.Random()
        self._rng_lock = threading.Lock()
        self.new_lock = new_lock
        self.subscriptions = self.local_subscriptions()
        self.store.add_commit_listener(self.waker.notify_many)
        # A store shared across machines (PostgreSQL) also reports others' commits.
        self._add_change = getattr(self.store, "add_change_listener", None)
        if self._add_change is not None:
            self._add_change(self.waker.notify_many)

    def local_subscriptions(self) -> LocalSubscriptions:
        """A fresh in-process subscription backend (used when no actor layer serves this process)."""
        return LocalSubscriptions(self.store)

    def close(self) -> None:
        self.store.remove_commit_listener(self.waker.notify_many)
        remove_change = getattr(self.store, "remove_change_listener", None)
        if remove_change is not None:
            remove_change(self.waker.notify_many)
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> "CouchJobs":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions ------------------------------------------------------

    def transaction(self, write: bool = True) -> contextlib.AbstractContextManager[StoreTx]:
        """A store transaction to pass as ``tx`` (and to run your own SQL in)."""
        return self.store.transaction(write)

    @contextlib.contextmanager
    def _tx(self, tx: Any, write: bool = True) -> Iterator[StoreTx]:
        adopt = getattr(self.store, "adopt", None)
        while tx is not None and not hasattr(tx, "get_job"):
            adopted = adopt(tx) if adopt is not None else None
            if adopted is not None:  # the caller's own database connection, as a transaction scope
                with adopted as own:
                    yield own
                return
            if not hasattr(tx, "tx"):
                raise TypeError(
                    f"tx must be None, a couch_jobs transaction or an object with a "
                    f"'tx' attribute, got {type(tx).__name__}"
                )
            tx = tx.tx
        if tx is not None:
            yield tx
            return
        with self.store.transaction(write) as own:
            yield own

    # -- job creation ------------------------------------------------------

    def add(self, tx: Any, job_type: JobType, job_id: str, data: dict[str, Any], sched_time: int = 0) -> None:
        """Add a pending job; re-adding resubmits it (see `db.resubmit`).

        Raises `NoTypeTimeout` if the type has no timeout, `JsonEncodingError`
        for data that is not a JSON object with string keys.
        """
        type_key = encode_type(job_type)
        check_job_id(job_id)
        check_sched_time(sched_time)
        text = encode_data(data)
        with self._tx(tx) as t:
            db.add(t, type_key, job_id, text, sched_time)
        metrics.count(_stats.current(), "add", job_type)

    def remove(self, tx: Any, job_type: JobType, job_id: str) -> None:
        """Delete a job in any state; raises `NotFound` if there is none."""
        type_key = encode_type(job_type)
        check_job_id(job_id)
        with self._tx(tx) as t:
            db.remove(t, type_key, job_id)
        metrics.count(_stats.current(), "remove", job_type)

    def _record(self, tx: Any, job_type: JobType, job_id: str) -> JobRecord:
        type_key = encode_type(job_type)
        check_job_id(job_id)
        with self._tx(tx, write=False) as t:
            record = db.get_job(t, type_key, job_id)
        if record is None:
            raise NotFound(f"no job {job_id!r} of type {job_type!r}")
        return record

    def get_job_data(self, tx: Any, job_type: JobType, job_id: str) -> dict[str, Any]:
        data = decode_data(self._record(tx, job_type, job_id).data)
        assert data is not None
        return data

    def get_job_state(self, tx: Any, job_type: JobType, job_id: str) -> JobState:
        return JobState(self._record(tx, job_type, job_id).state)

    # -- job processing ----------------------------------------------------

    def accept(
        self,
        job_type: JobType,
        *,
        max_sched_time: int | None = None,
        no_schedule: bool = False,
        timeout: float | None = None,
    ) -> tuple[Job, dict[str, Any]]:
        """Lock a due pending job for this worker; returns ``(job, data)``.

        Due means ``sched_time <= max_sched_time`` (any time by default;
        only sched_time 0 with ``no_schedule``).  Blocks until one is due or
        ``timeout`` seconds pass, then raises `NotFound`.  A given
        ``max_sched_time`` (seconds since the epoch) also ends the wait when
        that time comes, and one already past after 100 ms, as the seed's
        ``wait_pending`` does (`pending.accept_wait_limit`).
        """
        type_key = encode_type(job_type)
        if max_sched_time is None:
            max_sched_time = 0 if no_schedule else UNDEFINED_MAX_SCHEDULED_TIME
        check_sched_time(max_sched_time, "max_sched_time")
        if no_schedule and max_sched_time != 0:
            raise ValueError(
                f"no_schedule requires max_sched_time 0, got {max_sched_time} "
                "(the seed's no_schedule_require_0_max_sched_time)"
            )
        limit = min(
            check_timeout(timeout),
            pending.accept_wait_limit(max_sched_time, no_schedule, self.wall_clock.now()),
        )
        deadline = self.clock.now() + limit
        keys = (type_key,)
        while True:
            token = self.waker.token(keys)
            record = self._try_accept(type_key, max_sched_time, no_schedule)
            if record is not None:
                job = job_from_record(record)
                assert job.data is not None
                metrics.count(_stats.current(), "accept", job_type)
                return job, job.data
            remaining = deadline - self.clock.now()
            if remaining <= 0:
                raise NotFound(
                    f"no pending job of type {job_type!r} due by max_sched_time {max_sched_time} within {limit:g}s"
                )
            self.waker.wait(keys, token, remaining)

    def _try_accept(self, type_key: str, max_sched_time: int, no_schedule: bool) -> JobRecord | None:
        # A read first: idle workers re-checking must not queue for the write lock.
        hi = 0 if no_schedule else max_sched_time
        with self.store.transaction(write=False) as tx:
            if not tx.pending_range(type_key, 0, hi, 1):
                return None
        with self.store.transaction(write=True) as tx, self._rng_lock:
            return db.accept(tx, type_key, max_sched_time, no_schedule, self.rng, self.new_lock)

    def finish(self, tx: Any, job: Job, data: dict[str, Any] | None = None) -> None:
        """Finish the job (or re-enqueue it if resubmitted); `Halt` if the lock is gone."""
        job = locked_job(job, "finish")
        text = optional_data(data)
        with self._tx(tx) as t:
            db.finish(t, encode_type(job.type), job.id, job.jlock, text)  # type: ignore[arg-type]
        metrics.count(_stats.current(), "finish", job.type)

    def resubmit(self, tx: Any, job: Job, sched_time: int | None = UNDEFINED_MAX_SCHEDULED_TIME) -> Job:
        """Run the job again after it finishes, at ``sched_time``.

        Without a time the job goes to ``UNDEFINED_MAX_SCHEDULED_TIME``, as
        the seed's ``resubmit/2`` does: due to accepts that take any time,
        after every job with an earlier one, never to ``no_schedule`` ones.
        None (the seed's ``undefined``) keeps the job's current time.
        """
        job = locked_job(job, "resubmit")
        if sched_time is not None:
            check_sched_time(sched_time)
        with self._tx(tx) as t:
            record = db.resubmit(t, encode_type(job.type), job.id, sched_time)
        metrics.count(_stats.current(), "resubmit", job.type)
        return job_from_record(record, jlock=job.jlock)

    @staticmethod
    def is_resubmitted(job: Job) -> bool:
        if not isinstance(job, Job):
            raise TypeError(f"is_resubmitted needs a Job, got {type(job).__name__}")
        return bool(job.resubmit)

    def update(self, tx: Any, job: Job, data: dict[str, Any] | None = None) -> Job:
        """Report progress (and new data); `Halt` if the lock is gone."""
        job = locked_job(job, "update")
        text = optional_data(data)
        with self._tx(tx) as t:
            record = db.update(t, encode_type(job.type), job.id, job.jlock, text)  # type: ignore[arg-type]
        return job_from_record(record)

    # -- subscriptions -----------------------------------------------------

    def subscribe(
        self, job_type: JobType, job_id: str, tx: Any = None
    ) -> tuple[Subscription | None, JobState, dict[str, Any]]:
        """``(subscription, state, data)`` now; later changes arrive through `wait`.

        A finished job gives ``(None, "finished", data)`` and no subscription
        (the seed's ``{ok, finished, Data}``).  Raises `NotFound` for a
        missing job or a type without a timeout.
        """
        type_key = encode_type(job_type)
        check_job_id(job_id)
        # As the seed: a finished job answers from the read alone; only a
        # subscription needs the type's notifier (a type with a timeout).
        with self._tx(tx, write=False) as t:
            record = db.get_job(t, type_key, job_id)
            has_timeout = record is not None and t.get_type_timeout(type_key) is not None
        if record is None:
            raise NotFound(f"no job {job_id!r} of type {job_type!r}")
        state = JobState(record.state)
        data = decode_data(record.data)
        assert data is not None
        if state == JobState.FINISHED:
            return None, state, data
        if not has_timeout:
            raise NotFound(f"job type {job_type!r} has no timeout, so no notifier")
        sub = self.subscriptions.subscribe(job_type, job_id, state, record.seq, _subscriber())
        return sub, state, data

    def unsubscribe(self, sub: Subscription) -> None:
        """Stop notifications and drop any delivered but not yet waited for."""
        if not isinstance(sub, Subscription):
            raise TypeError(f"unsubscribe needs a Subscription, got {type(sub).__name__}")
        self.subscriptions.unsubscribe(sub, _subscriber())

    def wait(
        self,
        subs: Subscription | Iterable[Subscription],
        state: str | None = None,
        timeout: float | None = None,
    ) -> JobEvent | None:
        """The next change of the subscribed job(s): ``(type, id, state, data)``.

        With ``state``, changes to other states are skipped.  Returns None
        when ``timeout`` seconds pass first (the seed's ``timeout``).
        """
        sub_list = [subs] if isinstance(subs, Subscription) else list(subs)
        for sub in sub_list:
            if not isinstance(sub, Subscription):
                raise TypeError(f"wait needs Subscriptions, got {type(sub).__name__}")
        if state is not None and state not in WAIT_STATES:
            raise ValueError(
                f"state must be one of {sorted(WAIT_STATES)} or None, got {state!r} (pass the timeout as timeout=)"
            )
        limit = check_timeout(timeout)
        deadline = self.clock.now() + limit
        keys = tuple(dict.fromkeys(encode_type(s.type) for s in sub_list))
        refs = [s.ref for s in sub_list]
        while True:
            token = self.waker.token(keys)
            self.subscriptions.pump(keys)
            event = self.subscriptions.take(refs, state)
            if event is not None:
                return event
            remaining = deadline - self.clock.now()
            if remaining <= 0:
                return None
            self.waker.wait(keys, token, remaining)

    # -- type timeouts -----------------------------------------------------

    def set_type_timeout(self, job_type: JobType, timeout: float) -> None:
        """Set the activity timeout (seconds) of a type; jobs of it may then be added."""
        type_key = encode_type(job_type)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"type timeout must be positive seconds, got {timeout!r}")
        if math.isinf(timeout):
            raise ValueError("type timeout must be finite")
        with self.store.transaction() as tx:
            tx.set_type_timeout(type_key, timeout)

    def clear_type_timeout(self, job_type: JobType) -> None:
        type_key = encode_type(job_type)
        with self.store.transaction() as tx:
            tx.clear_type_timeout(type_key)

    def get_type_timeout(self, job_type: JobType) -> float | None:
        """The type's timeout in seconds, None if unset (the seed's ``not_found``)."""
        type_key = encode_type(job_type)
        with self.store.transaction(write=False) as tx:
            return tx.get_type_timeout(type_key)

    # -- inspection --------------------------------------------------------

    def get_job(self, job_type: JobType, job_id: str) -> Job | None:
        """The whole job, or None (the seed's ``couch_jobs_fdb:get_job/2``)."""
        type_key = encode_type(job_type)
        with self.store.transaction(write=False) as tx:
            record = db.get_job(tx, type_key, job_id)
        return None if record is None else job_from_record(record)

    def get_jobs(self, job_type: JobType | None = None) -> list[tuple[JobType, str, JobState, dict[str, Any]]]:
        """``[(type, id, state, data)]`` of all jobs, or of one type."""
        type_key = None if job_type is None else encode_type(job_type)
        with self.store.transaction(write=False) as tx:
            records = tx.list_jobs(type_key)
        out = []
        for r in records:
            data = decode_data(r.data)
            assert data is not None
            out.append((decode_type(r.type), r.id, JobState(r.state), data))
        return out

    def counts(self) -> dict[JobType, dict[str, int]]:
        """Jobs per type and state (see `store_counts`)."""
        return store_counts(self.store)


def store_counts(store: Store) -> dict[JobType, dict[str, int]]:
    """``{type: {"pending": n, "running": n, "finished": n}}`` of ``store``, in one read transaction.

    Every type with jobs or an activity timeout is there.  One aggregate
    query, on SQLite and PostgreSQL alike."""
    with store.transaction(write=False) as tx:
        raw = db.job_counts(tx)
    return {decode_type(key): value for key, value in raw.items()}


def _subscriber() -> Hashable:
    """Who subscribes (the seed's ``self()``): the calling actor, else the
    calling thread.  Actors share worker threads, so a thread is not one."""
    ref = api.self_ref()
    return ref if ref is not None else threading.get_ident()
