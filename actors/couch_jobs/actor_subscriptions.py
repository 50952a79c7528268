"""Subscriptions served by the notifier actors, for any process of the node.

`CouchJobs.subscribe`/`wait` talk to a subscription backend.  Without the
actor layer that is `LocalSubscriptions` (an in-process notifier pumped by
`wait`).  Once a process is attached to the actor layer (`process.use`),
its backend is this class: `subscribe` asks ``couch_jobs_server`` for the
type's notifier actor and registers there; the notifier sends each event as
a message to this process's `ProcessAgent`, which drops it into the
mailboxes below and wakes the waiters; `wait` takes from them.

The subscriber the notifier sees is ``(agent id, thread id)``: the same
thread (an actor's thread, or a thread of the host program) subscribing
twice to a job gets the same subscription back, as the same Erlang process
would.  The notifier monitors the agent, so a dead process's subscriptions
are dropped.
"""

from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Collection, Hashable
from typing import TYPE_CHECKING, Any

from actors import ActorRef, Exit

from .client import get_notifier_server
from .errors import NotFound, StoreUnavailable
from .model import JobEvent, JobType, Subscription, decode_type, encode_type

if TYPE_CHECKING:
    from .attachment import Attachment

__all__ = ["ActorSubscriptions", "EVENT_TAG"]

#: First item of a notification message (the seed's ``?COUCH_JOBS_EVENT``).
EVENT_TAG = "$couch_jobs_event"

#: How many closed subscription refs are remembered to drop late events.
_CLOSED_MEMORY = 10_000

#: Seconds a subscribe/unsubscribe call may take before failing.
CALL_TIMEOUT = 30.0


class ActorSubscriptions:
    """This process's mailboxes for notifications from notifier actors."""

    def __init__(self, attachment: "Attachment") -> None:
        self.attachment = attachment
        self._lock = threading.Lock()
        self._mailboxes: dict[str, collections.deque[tuple[int, JobEvent]]] = {}
        # Events for a ref may arrive before subscribe() returns it, or after
        # unsubscribe() discarded its mailbox: refs are never reused, so
        # anything for a closed ref is dropped and anything else kept.
        self._closed: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._order = itertools.count()

    # -- the CouchJobs backend protocol ------------------------------------

    def subscribe(
        self, job_type: JobType, job_id: str, state: str, seq: int | None, subscriber: Hashable
    ) -> Subscription:
        agent = self.attachment.agent
        if agent is None:
            raise NotFound("couch_jobs has no process agent in this process (detached)")
        try:
            notifier = get_notifier_server(job_type)
        except Exit as exc:
            raise NotFound(f"couch_jobs_server is not running ({exc.reason!r})") from exc
        if notifier is None:
            raise NotFound(f"no notifier runs for job type {job_type!r}")
        request = ("subscribe", job_id, str(state), seq, (agent.id, subscriber), agent)
        try:
            ref = notifier.call(request, timeout=CALL_TIMEOUT)
        except Exit as exc:
            raise NotFound(f"the notifier of job type {job_type!r} is gone ({exc.reason!r})") from exc
        if isinstance(ref, (list, tuple)) and len(ref) == 2 and ref[0] == "store_unavailable":
            raise StoreUnavailable(ref[1])
        with self._lock:
            self._closed.pop(ref, None)
        return Subscription(job_type, job_id, ref, server=notifier)

    def unsubscribe(self, sub: Subscription, subscriber: Hashable) -> None:
        """Unsubscribe at the notifier, then discard undelivered and late events."""
        server = sub.server
        try:
            agent = self.attachment.agent
            if isinstance(server, ActorRef) and agent is not None:
                server.call(("unsubscribe", sub.ref, (agent.id, subscriber)), timeout=CALL_TIMEOUT)
        except Exit:
            pass  # a dead notifier has no subscriptions left to drop
        finally:
            with self._lock:
                self._mailboxes.pop(sub.ref, None)
                self._closed[sub.ref] = None
                while len(self._closed) > _CLOSED_MEMORY:
                    self._closed.popitem(last=False)

    def pump(self, type_keys: Collection[str]) -> int:
        """Nothing to pump: the notifier actors push events to the agent."""
        return 0

    def take(self, refs: Collection[str], state: str | None) -> JobEvent | None:
        """The oldest delivered event for ``refs`` in ``state`` (any when None).

        Events of those subscriptions in another state are dropped on the way,
        as the seed's selective receive drops them.
        """
        with self._lock:
            for _ in range(sum(len(self._mailboxes.get(r, ())) for r in refs) + 1):
                heads = [(box[0][0], ref) for ref in refs if (box := self._mailboxes.get(ref))]
                if not heads:
                    return None
                _, ref = min(heads)
                box = self._mailboxes[ref]
                _, event = box.popleft()
                if not box:
                    del self._mailboxes[ref]
                if state is None or event.state == state:
                    return event
        return None

    # -- fed by the ProcessAgent -------------------------------------------

    def deliver(self, message: Any) -> str | None:
        """File ``[EVENT_TAG, ref, type_key, id, state, data]``; returns the type key.

        None when the message is malformed or its subscription was closed.
        """
        if not (isinstance(message, (list, tuple)) and len(message) == 6):
            return None
        _, ref, type_key, job_id, state, data = message
        event = JobEvent(decode_type(type_key), job_id, state, data)
        with self._lock:
            if ref in self._closed:
                return None
            box = self._mailboxes.setdefault(ref, collections.deque())
            box.append((next(self._order), event))
        return type_key

    def pending_events(self, ref: str) -> int:
        with self._lock:
            return len(self._mailboxes.get(ref, ()))


def event_message(ref: str, job_type: JobType, job_id: str, state: str, data: Any) -> list[Any]:
    """The message a notifier sends for one notification (plain data: orjson on the wire)."""
    return [EVENT_TAG, ref, encode_type(job_type), job_id, str(state), data]
