"""Who to tell about which job changes (the logic of ``couch_jobs_notifier``
and ``couch_jobs_type_monitor``), as plain classes.

`NotifierLogic` holds one type's subscriptions and, given the type's latest
activity sequence, returns the notifications to deliver; delivering them
(a message to an actor, an entry in an in-process mailbox) is the caller's
job.  `TypeMonitorLogic` decides when a change of the type's activity
sequence should be passed on, applying the hold-off.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from . import db
from .model import JobState, JobType, decode_data, encode_type
from .store import Store

__all__ = ["NOT_FOUND", "Notification", "NotifierLogic", "TypeMonitorLogic"]

#: The state reported for a job that was removed.
NOT_FOUND = "not_found"

_UNSUBSCRIBE_STATES = frozenset({JobState.FINISHED, NOT_FOUND})


@dataclass(frozen=True, slots=True)
class Notification:
    """Tell ``subscriber`` that job ``id`` is now ``state`` (the seed's ``?COUCH_JOBS_EVENT``)."""

    subscriber: Hashable
    ref: str
    type: JobType
    id: str
    state: str
    data: dict[str, Any] | None


@dataclass(slots=True)
class _Sub:
    subscriber: Hashable
    state: str
    seq: int | None


def _new_ref() -> str:
    return uuid.uuid4().hex


class NotifierLogic:
    """One type's subscriptions: ``subscribe``, ``unsubscribe`` and ``type_updated``.

    A thin actor calls `subscribe`/`unsubscribe` from ``handle_call``,
    `subscriber_down` on a DOWN message, and `type_updated` on the type
    monitor's message, sending each returned `Notification` to its
    subscriber.  Subscribers that reach ``finished`` or ``not_found`` are
    unsubscribed as they are notified.
    """

    def __init__(self, job_type: JobType, store: Store, new_ref: Callable[[], str] = _new_ref) -> None:
        self.type = job_type
        self.type_key = encode_type(job_type)
        self.store = store
        self._new_ref = new_ref
        self._subs: dict[str, dict[str, _Sub]] = {}  # job id -> ref -> sub
        self._pidmap: dict[tuple[str, Hashable], str] = {}  # (job id, subscriber) -> ref
        self._refmap: dict[str, str] = {}  # ref -> job id

    # -- subscriptions -----------------------------------------------------

    def activity_seq(self) -> int | None:
        """The type's current activity sequence (where a type monitor starts)."""
        with self.store.transaction(write=False) as tx:
            return db.get_activity_seq(tx, self.type_key)

    def subscribe(self, job_id: str, state: str, seq: int | None, subscriber: Hashable) -> str:
        """Subscribe ``subscriber`` to ``job_id`` last seen in ``state``/``seq``; returns the ref.

        A subscriber subscribing again to the same job gets the same ref back,
        with the state it last saw replaced.
        """
        ref = self._pidmap.get((job_id, subscriber))
        if ref is None:
            ref = self._new_ref()
            self._pidmap[(job_id, subscriber)] = ref
            self._refmap[ref] = job_id
        self._subs.setdefault(job_id, {})[ref] = _Sub(subscriber, str(state), seq)
        return ref

    def unsubscribe(self, ref: str, subscriber: Hashable) -> None:
        job_id = self._refmap.pop(ref, None)
        if job_id is None:
            return
        refs = self._subs.get(job_id)
        if refs is not None:
            refs.pop(ref, None)
            if not refs:
                del self._subs[job_id]
        self._pidmap.pop((job_id, subscriber), None)

    def subscriber_down(self, ref: str, subscriber: Hashable) -> None:
        """The subscriber died: drop its subscription (the seed's DOWN handler)."""
        self.unsubscribe(ref, subscriber)

    def subscriptions(self) -> dict[str, dict[str, tuple[Hashable, str, int | None]]]:
        """A copy of ``{job_id: {ref: (subscriber, state, seq)}}``."""
        return {
            job_id: {ref: (s.subscriber, s.state, s.seq) for ref, s in refs.items()}
            for job_id, refs in self._subs.items()
        }

    def __len__(self) -> int:
        return len(self._refmap)

    def __contains__(self, ref: object) -> bool:
        return ref in self._refmap

    # -- notifying ---------------------------------------------------------

    def type_updated(self, activity_seq: int | None) -> list[Notification]:
        """The type's activity moved to ``activity_seq``: read jobs, return notifications.

        Running jobs updated at or after ``activity_seq`` are found with one
        range read; the other subscribed jobs are read one by one, as the
        seed does.
        """
        if not self._subs:
            return []
        with self.store.transaction(write=False) as tx:
            active = {} if activity_seq is None else db.get_active_since(tx, self.type_key, activity_seq)
            jobs: dict[str, tuple[int | None, str, dict[str, Any] | None]] = {}
            for job_id in self._subs:
                record = active.get(job_id) or db.get_job(tx, self.type_key, job_id)
                if record is None:
                    jobs[job_id] = (None, NOT_FOUND, None)
                else:
                    jobs[job_id] = (record.seq, record.state, decode_data(record.data))
        return self.notify_job_ids(jobs)

    def notify_job_ids(self, jobs: dict[str, tuple[int | None, str, dict[str, Any] | None]]) -> list[Notification]:
        """Pure part of `type_updated`: ``{job_id: (seq, state, data)}`` -> notifications.

        Running jobs are reported every time their sequence advances (so
        subscribers see intermediate progress); other states only when they
        differ from what the subscriber last saw.
        """
        out: list[Notification] = []
        for job_id, (seq, state, data) in jobs.items():
            for ref, sub in list(self._subs.get(job_id, {}).items()):
                if state == JobState.RUNNING and sub.state == JobState.RUNNING:
                    if sub.seq is not None and seq is not None and sub.seq >= seq:
                        continue
                elif sub.state == state:
                    continue
                out.append(Notification(sub.subscriber, ref, self.type, job_id, str(state), data))
                if state in _UNSUBSCRIBE_STATES:
                    self.unsubscribe(ref, sub.subscriber)
                else:
                    sub.state = str(state)
                    sub.seq = seq
        return out


class TypeMonitorLogic:
    """When to pass a type's activity change on to its notifier (with hold-off).

    The actor loop reads the type's activity sequence (on a wake-up or every
    ``type_monitor_timeout_msec``) and calls `observe`; a returned delay
    means "send ``type_updated(seq)`` after this many seconds", None means
    nothing changed.  Consecutive notifications are at least ``holdoff``
    seconds apart, so a burst of updates costs the notifier one read.
    """

    def __init__(self, seq: int | None, holdoff: float) -> None:
        if holdoff < 0:
            raise ValueError(f"holdoff must not be negative, got {holdoff!r}")
        self.seq = seq
        self.holdoff = holdoff
        self._last_sent: float | None = None

    def observe(self, seq: int | None, now: float) -> float | None:
        if seq == self.seq:
            return None
        self.seq = seq
        delay = 0.0
        if self._last_sent is not None:
            delay = max(0.0, self.holdoff - (now - self._last_sent))
        self._last_sent = now + delay
        return delay
