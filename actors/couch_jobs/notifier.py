"""``couch_jobs_notifier`` and ``couch_jobs_type_monitor``: subscriptions as actors.

One `Notifier` per job type holds that type's subscriptions
(`NotifierLogic`) and sends each notification as a message to the
subscriber's process agent.  It starts a linked `TypeMonitor` that watches
the type's activity sequence and sends ``["type_updated", seq]`` (after the
hold-off) when it moves; the notifier then reads the subscribed jobs and
notifies.  Where the seed's type monitor blocks on an FDB watch, ours is
woken by the process agent (which the wake-up hub tells about every commit
in the node) and re-reads at least every ``wakeup_recheck_msec`` (or
``type_monitor_timeout_msec`` if shorter), for writes from outside the node.

Bad calls, casts and info messages stop the notifier (and with it its type
monitor); the server, which monitors every notifier, stops too and the
supervision tree starts everything again, as in the seed.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from actors import ActorRef, GenServer, Stop

from . import db, settings
from .actor_subscriptions import event_message
from .attachment import attachment, local_jobs
from .errors import StoreUnavailable
from .model import JobType, decode_data
from .notifications import Notification, NotifierLogic, TypeMonitorLogic

__all__ = ["Notifier", "TypeMonitor"]

_log = logging.getLogger(__name__)

#: Back-off (seconds) for retrying a notification while the store is away.
_RETRY_MIN = 0.05
_RETRY_MAX = 2.0


class Notifier(GenServer):
    def init(self, job_type: JobType) -> None:
        jobs = local_jobs()
        self.logic = NotifierLogic(job_type, jobs.store)
        self.deliver_to: dict[str, ActorRef] = {}  # sub ref -> agent
        self.sub_mrefs: dict[str, Any] = {}  # sub ref -> monitor ref
        self.mref_subs: dict[Any, tuple[str, Any]] = {}  # monitor ref -> (sub ref, subscriber)
        try:
            seq = self.logic.activity_seq()
        except StoreUnavailable as exc:
            # The store is away: start anyway (the type monitor notices its
            # return), so an outage does not become a storm of restarts.
            _log.warning("couch_jobs notifier %r: %s", job_type, exc)
            seq = None
        self.retry = _RETRY_MIN
        holdoff = settings.type_monitor_holdoff_msec() / 1000.0
        timeout = settings.type_monitor_timeout_msec() / 1000.0
        interval = min(timeout, jobs.waker.recheck_interval)
        self.type_monitor = self.spawn_link(TypeMonitor, self.logic.type_key, seq, holdoff, interval, self.ref)

    # -- calls -------------------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        if _tagged(request, "subscribe", 6):
            _, job_id, state, seq, subscriber, deliver_to = request
            try:
                return self.subscribe(job_id, state, seq, subscriber, deliver_to)
            except StoreUnavailable as exc:
                return ("store_unavailable", str(exc))
        if _tagged(request, "unsubscribe", 3):
            _, ref, subscriber = request
            self.logic.unsubscribe(ref, subscriber)
            self.forget(ref)
            return "ok"
        if request == "subscriptions":
            return len(self.logic)
        return Stop(("bad_call", request), reply=("bad_call", request))

    def subscribe(self, job_id: str, state: str, seq: int | None, subscriber: Any, deliver_to: ActorRef) -> str:
        ref = self.logic.subscribe(job_id, state, seq, subscriber)
        if ref not in self.sub_mrefs:
            mref = self.monitor(deliver_to)
            self.sub_mrefs[ref] = mref
            self.mref_subs[mref] = (ref, subscriber)
        self.deliver_to[ref] = deliver_to
        # The job may have moved between the caller's read and this
        # subscription; check it once now rather than at the type's next change.
        with self.logic.store.transaction(write=False) as tx:
            record = db.get_job(tx, self.logic.type_key, job_id)
        current = (None, "not_found", None) if record is None else (record.seq, record.state, decode_data(record.data))
        self.send_all(self.logic.notify_job_ids({job_id: current}))
        return ref

    def handle_cast(self, request: Any) -> Any:
        return Stop(("bad_cast", request))

    # -- info --------------------------------------------------------------

    def handle_info(self, message: Any) -> Any:
        if _tagged(message, "type_updated", 2):
            try:
                notes = self.logic.type_updated(message[1])
            except StoreUnavailable as exc:
                # Try the same update again later, backing off while the store is away.
                _log.warning("couch_jobs notifier: %s; retrying in %.2fs", exc, self.retry)
                self.send_after(self.retry, message)
                self.retry = min(_RETRY_MAX, self.retry * 2)
                return None
            self.retry = _RETRY_MIN
            self.send_all(notes)
            return None
        if _tagged(message, "DOWN", 4):
            sub = self.mref_subs.pop(message[1], None)
            if sub is not None:
                ref, subscriber = sub
                self.logic.subscriber_down(ref, subscriber)
                self.sub_mrefs.pop(ref, None)
                self.deliver_to.pop(ref, None)
            return None
        return Stop(("bad_info", message))

    def send_all(self, notes: list[Notification]) -> None:
        for note in notes:
            agent = self.deliver_to.get(note.ref)
            if agent is not None:
                agent.send(event_message(note.ref, note.type, note.id, note.state, note.data))
            if note.ref not in self.logic:  # finished / not_found ended it
                self.forget(note.ref)

    def forget(self, ref: str) -> None:
        mref = self.sub_mrefs.pop(ref, None)
        if mref is not None:
            self.mref_subs.pop(mref, None)
            self.demonitor(mref)
        self.deliver_to.pop(ref, None)


class TypeMonitor(GenServer):
    """Watches one type's activity sequence for its (linked) notifier."""

    def init(self, type_key: str, seq: int | None, holdoff: float, interval: float, notifier: ActorRef) -> None:
        self.type_key = type_key
        self.logic = TypeMonitorLogic(seq, holdoff)
        self.store = local_jobs().store
        self.notifier = notifier
        self.interval = interval
        self.check_queued = False
        self.store_away = False
        att = attachment()
        if att is not None and att.agent is not None:
            att.agent.cast(["listen", type_key, self.ref])
        self.timer = self.schedule()

    def schedule(self) -> Any:
        if math.isinf(self.interval):
            return None
        return self.send_after(self.interval, "check")

    def check(self) -> None:
        try:
            with self.store.transaction(write=False) as tx:
                seq = db.get_activity_seq(tx, self.type_key)
        except StoreUnavailable as exc:
            # Ride out the outage: the next periodic check (or change) reads again.
            if not self.store_away:
                _log.warning("couch_jobs type monitor: %s", exc)
            self.store_away = True
            return
        self.store_away = False
        delay = self.logic.observe(seq, time.monotonic())
        if delay is not None:
            self.send_after(delay, ["type_updated", seq], dest=self.notifier)

    def handle_info(self, message: Any) -> Any:
        if message == "check":
            self.check()
            self.timer = self.schedule()
            return None
        if _tagged(message, "changed", 2):
            # A burst of commits queues many "changed"; one read covers them all.
            if not self.check_queued:
                self.check_queued = True
                self.ref.send("check_now")
            return None
        if message == "check_now":
            self.check_queued = False
            self.check()
            return None
        return Stop(("bad_info", message))

    def handle_call(self, request: Any, from_: Any) -> Any:
        return Stop(("bad_call", request), reply=("bad_call", request))

    def handle_cast(self, request: Any) -> Any:
        return Stop(("bad_cast", request))


def _tagged(message: Any, tag: str, size: int) -> bool:
    return isinstance(message, (list, tuple)) and len(message) == size and message[0] == tag
