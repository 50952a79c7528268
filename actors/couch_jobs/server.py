"""``couch_jobs_server``: starts an activity monitor and a notifier per job type.

A job type exists while it has an activity timeout.  The server reads the
types from the store (`TypeDiscovery`) at start, on ``check_types`` calls
and every ``type_check_period_msec`` plus jitter; it starts an
`ActivityMonitor` and a `Notifier` for each new type under the two
``simple_one_for_one`` supervisors and stops those of types that went away.

It monitors every monitor and notifier it started: any of them dying stops
the server (``unexpected_process_exit``), and the ``rest_for_one`` top
supervisor restarts it; its ``init`` first stops whatever monitors and
notifiers are left, then starts fresh ones.  That is why killing a notifier
takes the server down too, exactly as in the seed.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from typing import Any

import supervision
from actors import ActorRef, Exit, GenServer, Stop

from .attachment import local_jobs
from .client import CALL_TIMEOUT, force_check_types, get_notifier_server
from .errors import StoreUnavailable
from .model import JobType, encode_type
from .naming import ACTIVITY_MONITOR_SUP, NOTIFIER_SUP, SERVER_NAME, register_self
from .type_discovery import TypeDiscovery, diff_types

__all__ = ["CALL_TIMEOUT", "SERVER_NAME", "JobsServer", "force_check_types", "get_notifier_server"]

_log = logging.getLogger(__name__)


@dataclass
class _TypeActors:
    type: JobType
    monitor: ActorRef
    monitor_mref: Any
    notifier: ActorRef
    notifier_mref: Any


class JobsServer(GenServer):
    def init(self) -> None:
        register_self(self, SERVER_NAME)
        self.monitor_sup = self.whereis(ACTIVITY_MONITOR_SUP)
        self.notifier_sup = self.whereis(NOTIFIER_SUP)
        if self.monitor_sup is None or self.notifier_sup is None:
            raise Exit(("noproc", "couch_jobs supervisors are not running"))
        # Started after both supervisors: after a restart of this server
        # stale monitors and notifiers may be left; stop them, fresh ones follow.
        self.reset(self.monitor_sup)
        self.reset(self.notifier_sup)
        self.types: dict[str, _TypeActors] = {}
        self.discovery = TypeDiscovery(local_jobs().store)
        self.check_types()
        self.schedule_check()

    # -- callbacks ---------------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "check_types":
            self.check_types()
            return "ok"
        if _tagged(request, "get_notifier_server", 2):
            return self.get_notifier(request[1])
        if request == "types":
            return sorted(self.types)
        return Stop(("bad_call", request), reply=("bad_call", request))

    def handle_cast(self, request: Any) -> Any:
        return Stop(("bad_cast", request))

    def handle_info(self, message: Any) -> Any:
        if message == "check_types":
            self.check_types()
            self.schedule_check()
            return None
        if _tagged(message, "DOWN", 4):
            _, _mref, ref, reason = message
            _log.error("couch_jobs_server: %r exited with %r", ref, reason)
            return Stop(("unexpected_process_exit", ref, reason))
        return Stop(("bad_info", message))

    # -- types -------------------------------------------------------------

    def get_notifier(self, type_key: str) -> ActorRef | None:
        entry = self.types.get(type_key)
        if entry is None:
            self.check_types()
            entry = self.types.get(type_key)
        return None if entry is None else entry.notifier

    def check_types(self) -> None:
        try:
            store_types = self.discovery.store_types()
        except (sqlite3.OperationalError, StoreUnavailable) as exc:
            # The seed treats an FDB timeout as "no types" and so stops every
            # monitor; the intent is to ride out a slow store: change nothing.
            _log.warning("couch_jobs_server: timed out reading job types: %s", exc)
            return
        wanted = {encode_type(t): t for t in store_types}
        to_start, to_stop = diff_types(list(wanted), list(self.types))
        for key in to_start:
            self.start_type(key, wanted[key])
        for key in to_stop:
            self.stop_type(key)

    def start_type(self, key: str, job_type: JobType) -> None:
        try:
            mon = supervision.start_child(self.monitor_sup, [job_type])
        except Exception as exc:
            raise Exit(("failed_to_start_monitor", job_type, repr(exc))) from None
        try:
            notifier = supervision.start_child(self.notifier_sup, [job_type])
        except Exception as exc:
            raise Exit(("failed_to_start_notifier", job_type, repr(exc))) from None
        if mon is None or notifier is None:
            raise Exit(("failed_to_start_monitors", job_type, "ignore"))
        self.types[key] = _TypeActors(job_type, mon, self.monitor(mon), notifier, self.monitor(notifier))

    def stop_type(self, key: str) -> None:
        entry = self.types.pop(key)
        self.demonitor(entry.monitor_mref)
        self.demonitor(entry.notifier_mref)
        supervision.terminate_child(self.monitor_sup, entry.monitor)
        supervision.terminate_child(self.notifier_sup, entry.notifier)

    @staticmethod
    def reset(sup: ActorRef) -> None:
        for child in supervision.which_children(sup):
            if isinstance(child.child, ActorRef):
                try:
                    supervision.terminate_child(sup, child.child)
                except supervision.NotFound:
                    pass  # it died on its own meanwhile

    def schedule_check(self) -> None:
        self.send_after(self.discovery.next_check_delay(), "check_types")


def _tagged(message: Any, tag: str, size: int) -> bool:
    return isinstance(message, (list, tuple)) and len(message) == size and message[0] == tag
