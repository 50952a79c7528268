"""In-process delivery of job notifications: mailboxes fed by `NotifierLogic`.

In the seed a notifier process per type sends ``?COUCH_JOBS_EVENT`` messages
to the subscriber's mailbox and `wait` receives them.  Without the actor
layer, this hub plays both parts inside one process: it keeps a
`NotifierLogic` per type and a mailbox per subscription, and whoever calls
`wait` first pumps the notifier (when the type's activity sequence moved or
a subscription was added) and then takes from the mailboxes.

Mailboxes keep delivery order across subscriptions (a global counter), so
waiting on several subscriptions returns events in the order they were
delivered, as a single Erlang mailbox would.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Collection, Hashable

from . import db
from .model import JobEvent, JobType, Subscription, encode_type
from .notifications import Notification, NotifierLogic
from .store import Store

__all__ = ["LocalSubscriptions"]

_UNSEEN = object()


class LocalSubscriptions:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._notifiers: dict[str, NotifierLogic] = {}
        self._last_seq: dict[str, object] = {}
        self._dirty: set[str] = set()
        self._mailboxes: dict[str, deque[tuple[int, JobEvent]]] = {}
        self._order = itertools.count()

    def subscribe(
        self,
        job_type: JobType,
        job_id: str,
        state: str,
        seq: int | None,
        subscriber: Hashable,
    ) -> Subscription:
        type_key = encode_type(job_type)
        with self._lock:
            notifier = self._notifiers.get(type_key)
            if notifier is None:
                notifier = self._notifiers[type_key] = NotifierLogic(job_type, self.store)
            ref = notifier.subscribe(job_id, state, seq, subscriber)
            self._mailboxes.setdefault(ref, deque())
            self._dirty.add(type_key)
        return Subscription(job_type, job_id, ref)

    def unsubscribe(self, sub: Subscription, subscriber: Hashable) -> None:
        """Stop notifications and discard those delivered but not yet taken."""
        type_key = encode_type(sub.type)
        with self._lock:
            notifier = self._notifiers.get(type_key)
            if notifier is not None:
                notifier.unsubscribe(sub.ref, subscriber)
            self._mailboxes.pop(sub.ref, None)

    def pump(self, type_keys: Collection[str]) -> int:
        """Run the notifiers of ``type_keys`` whose activity moved; returns events delivered."""
        delivered = 0
        with self._lock:
            for type_key in type_keys:
                notifier = self._notifiers.get(type_key)
                if notifier is None or not len(notifier):
                    continue
                with self.store.transaction(write=False) as tx:
                    seq = db.get_activity_seq(tx, type_key)
                if seq == self._last_seq.get(type_key, _UNSEEN) and type_key not in self._dirty:
                    continue
                self._dirty.discard(type_key)
                self._last_seq[type_key] = seq
                for note in notifier.type_updated(seq):
                    delivered += self._deliver(note)
        return delivered

    def _deliver(self, note: Notification) -> int:
        box = self._mailboxes.get(note.ref)
        if box is None:
            return 0
        box.append((next(self._order), JobEvent(note.type, note.id, note.state, note.data)))
        return 1

    def take(self, refs: Collection[str], state: str | None) -> JobEvent | None:
        """The oldest delivered event for ``refs`` in ``state`` (any when None).

        Events of those subscriptions in another state are dropped on the
        way, as the seed's selective receive drops them.
        """
        with self._lock:
            while True:
                heads = [(box[0][0], ref) for ref in refs if (box := self._mailboxes.get(ref))]
                if not heads:
                    return None
                _, ref = min(heads)
                _, event = self._mailboxes[ref].popleft()
                self._forget_if_done(ref)
                if state is None or event.state == state:
                    return event

    def _forget_if_done(self, ref: str) -> None:
        box = self._mailboxes.get(ref)
        if box:
            return
        if not any(ref in notifier for notifier in self._notifiers.values()):
            self._mailboxes.pop(ref, None)

    def pending_events(self, ref: str) -> int:
        with self._lock:
            return len(self._mailboxes.get(ref, ()))
