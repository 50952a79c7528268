"""The couch_jobs supervision tree (``couch_jobs_sup`` and its two
``simple_one_for_one`` supervisors), in the seed's child order.

``couch_jobs_sup`` (``rest_for_one``, intensity 3 in 10 s)::

    couch_jobs_fdb                   StoreInit: open the store, attach this process; ignore
    couch_jobs_wakeups               WakeupHub: cross-process wake-ups (this port)
    couch_jobs_activity_monitor_sup  simple_one_for_one of ActivityMonitor (temporary)
    couch_jobs_notifier_sup          simple_one_for_one of Notifier (temporary)
    couch_jobs_server                JobsServer

``rest_for_one``: when a child dies, the children after it are restarted
with it; the server, last, restarting alone resets the monitors and
notifiers it finds.  The hub sits before the supervisors so that their
churn never restarts it.
"""

from __future__ import annotations

import os
from typing import Any

import supervision
from actors import ActorRef, GenServer, ignore
from supervision import ChildSpec, Supervisor, SupFlags

from .activity_monitor import ActivityMonitor
from .model import JobType
from .naming import ACTIVITY_MONITOR_SUP, HUB_NAME, NOTIFIER_SUP, TOP_SUP, register_self
from .notifier import Notifier
from .process import use
from .server import JobsServer
from .wakeups import WakeupHub

__all__ = [
    "ACTIVITY_MONITOR_SUP",
    "NOTIFIER_SUP",
    "TOP_SUP",
    "ActivityMonitorSup",
    "CouchJobsSup",
    "NotifierSup",
    "StoreInit",
    "get_child_pids",
    "start_monitor",
    "start_notifier",
    "stop_monitor",
    "stop_notifier",
]


class StoreInit(GenServer):
    """The seed's ``couch_jobs_fdb:init_cache`` child: set up shared state, then ``ignore``.

    Opens this process's couch_jobs instance (``path`` or ``[couch_jobs]
    database_path``) and attaches it to the actor layer, so that the
    monitors and notifiers of this process find the store.
    """

    def init(self, path: str | os.PathLike[str] | None = None) -> Any:
        use(self, path)
        return ignore


class ActivityMonitorSup(Supervisor):
    def init(self) -> tuple[SupFlags, list[ChildSpec]]:
        register_self(self, ACTIVITY_MONITOR_SUP)
        flags = SupFlags(strategy="simple_one_for_one", intensity=10, period=3)
        child = ChildSpec("couch_jobs_activity_monitor", (ActivityMonitor, ()), restart="temporary")
        return flags, [child]


class NotifierSup(Supervisor):
    def init(self) -> tuple[SupFlags, list[ChildSpec]]:
        register_self(self, NOTIFIER_SUP)
        flags = SupFlags(strategy="simple_one_for_one", intensity=10, period=3)
        child = ChildSpec("couch_jobs_notifier", (Notifier, ()), restart="temporary")
        return flags, [child]


class CouchJobsSup(Supervisor):
    """The top supervisor; start it with `actors.couch_jobs.app.start`."""

    def init(self, path: str | None = None) -> tuple[SupFlags, list[ChildSpec]]:
        flags = SupFlags(strategy="rest_for_one", intensity=3, period=10)
        children = [
            ChildSpec("couch_jobs_fdb", (StoreInit, (path,)), restart="transient"),
            ChildSpec(HUB_NAME, (WakeupHub, ()), shutdown="brutal_kill"),
            ChildSpec(ACTIVITY_MONITOR_SUP, (ActivityMonitorSup, ()), shutdown="brutal_kill", type="supervisor"),
            ChildSpec(NOTIFIER_SUP, (NotifierSup, ()), shutdown="brutal_kill", type="supervisor"),
            ChildSpec("couch_jobs_server", (JobsServer, ()), shutdown="brutal_kill"),
        ]
        return flags, children


# -- the seed's supervisor helper functions ------------------------------------


def start_monitor(sup: ActorRef, job_type: JobType) -> ActorRef | None:
    return supervision.start_child(sup, [job_type])


def stop_monitor(sup: ActorRef, ref: ActorRef) -> None:
    supervision.terminate_child(sup, ref)


start_notifier = start_monitor
stop_notifier = stop_monitor


def get_child_pids(sup: ActorRef) -> list[ActorRef]:
    """The running children of a supervisor (the seed's ``get_child_pids/0``)."""
    return [c.child for c in supervision.which_children(sup) if isinstance(c.child, ActorRef)]
