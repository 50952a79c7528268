"""``couch_jobs_activity_monitor``: one actor per job type re-enqueueing idle jobs.

The policy lives in `ActivityMonitorLogic`; this actor only runs its timer.
As in the seed, anything but its own ``check_activity`` timer message stops
it (``bad_call``/``bad_cast``/``bad_info``): the server monitors it and,
through the supervision tree, starts a fresh one.
"""

from __future__ import annotations

import logging
from typing import Any

from actors import GenServer, Stop
from actors import stats as _stats

from . import db, metrics
from .activity import ActivityMonitorLogic
from .attachment import local_jobs
from .errors import StoreUnavailable
from .model import JobType

_log = logging.getLogger(__name__)

#: Seconds between checks while the store is away (doubling up to the max).
_RETRY_MIN = 0.1
_RETRY_MAX = 5.0

__all__ = ["ActivityMonitor"]


class ActivityMonitor(GenServer):
    def init(self, job_type: JobType) -> None:
        self.logic = ActivityMonitorLogic(job_type, local_jobs().store)
        self.re_enqueued = 0
        self.retry = _RETRY_MIN
        try:
            delay = self.logic.init()
        except StoreUnavailable as exc:
            delay = self.store_away(exc)
        self.timer = self.send_after(delay, "check_activity")

    def store_away(self, exc: StoreUnavailable) -> float:
        """Back off instead of crashing: an outage must not exhaust the tree's restarts."""
        _log.warning("couch_jobs activity monitor %r: %s; retrying in %.2fs", self.logic.type, exc, self.retry)
        delay, self.retry = self.retry, min(_RETRY_MAX, self.retry * 2)
        return delay

    def _record(self, ids: list[str]) -> None:
        """The check's numbers as metrics (`actors.couch_jobs.metrics`): the jobs it put back,
        and the type's running and pending jobs (one aggregate read; skipped if the store is away)."""
        stats, job_type = _stats.current(), self.logic.type
        if ids:
            metrics.re_enqueued(stats, job_type, len(ids))
        try:
            with self.logic.store.transaction(write=False) as tx:
                now = db.job_counts(tx).get(self.logic.type_key, {})
        except StoreUnavailable:
            return  # the gauges keep the last check's numbers
        metrics.jobs_now(stats, job_type, now.get("running", 0), now.get("pending", 0))

    def handle_call(self, request: Any, from_: Any) -> Any:
        return Stop(("bad_call", request), reply=("bad_call", request))

    def handle_cast(self, request: Any) -> Any:
        return Stop(("bad_cast", request))

    def handle_info(self, message: Any) -> Any:
        if message == "check_activity":
            try:
                ids, delay = self.logic.handle_check()
            except StoreUnavailable as exc:
                ids, delay = [], self.store_away(exc)
            else:
                self.retry = _RETRY_MIN
                self._record(ids)
            self.re_enqueued += len(ids)
            self.timer = self.send_after(delay, "check_activity")
            return None
        return Stop(("bad_info", message))
