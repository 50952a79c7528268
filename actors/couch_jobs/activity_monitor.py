"""``couch_jobs_activity_monitor``: one actor per job type re-enqueueing idle jobs.

The policy lives in `ActivityMonitorLogic`; this actor only runs its timer.
As in the seed, anything but its own ``check_activity`` timer message stops
it (``bad_call``/``bad_cast``/``bad_info``): the server monitors it and,
through the supervision tree, starts a fresh one.
"""

from __future__ import annotations

from typing import Any

from actors import GenServer, Stop

from .activity import ActivityMonitorLogic
from .model import JobType
from .attachment import local_jobs

__all__ = ["ActivityMonitor"]


class ActivityMonitor(GenServer):
    def init(self, job_type: JobType) -> None:
        self.logic = ActivityMonitorLogic(job_type, local_jobs().store)
        self.timer = self.send_after(self.logic.init(), "check_activity")
        self.re_enqueued = 0

    def handle_call(self, request: Any, from_: Any) -> Any:
        return Stop(("bad_call", request), reply=("bad_call", request))

    def handle_cast(self, request: Any) -> Any:
        return Stop(("bad_cast", request))

    def handle_info(self, message: Any) -> Any:
        if message == "check_activity":
            ids, delay = self.logic.handle_check()
            self.re_enqueued += len(ids)
            self.timer = self.send_after(delay, "check_activity")
            return None
        return Stop(("bad_info", message))
