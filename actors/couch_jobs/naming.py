"""Registered names of couch_jobs's actors, and how an actor takes one.

The seed registers ``couch_jobs_server`` and its supervisors locally
(``{local, ?MODULE}``) so any process finds them by name.  The names live
here, at the bottom of the actor layer, so that a module can name an actor
without importing the module that defines it.  The kernel's actor takes its
name from its own ``init`` with `GenServer.register`, which ties it to the
actor as ``spawn(name=...)`` does: it is released before anyone hears of the
actor's death, so a restarted successor can take it.
"""

from __future__ import annotations

from actors import AlreadyRegistered, Exit, GenServer
from actors.gen_server import PREVIOUS_HOLDER_WAIT

__all__ = [
    "ACTIVITY_MONITOR_SUP",
    "HUB_NAME",
    "NOTIFIER_SUP",
    "SERVER_NAME",
    "TOP_SUP",
    "register_self",
]

TOP_SUP = "couch_jobs_sup"
ACTIVITY_MONITOR_SUP = "couch_jobs_activity_monitor_sup"
NOTIFIER_SUP = "couch_jobs_notifier_sup"
SERVER_NAME = "couch_jobs_server"
#: The wake-up hub's registered name.  CouchDB has no such process (its workers
#: wait on FoundationDB watches); this port's hub fans commit notices out instead (`wakeups`).
HUB_NAME = "couch_jobs_wakeups"


def register_self(actor: GenServer, name: str) -> None:
    """Register the calling actor (from its ``init``) as ``name``.

    Raises `AlreadyRegistered` when another live actor holds the name.
    """
    if actor._actor_cell.name is not None:
        raise RuntimeError(f"{actor.ref!r} is already registered as {actor._actor_cell.name!r}")
    try:
        actor.register(name, wait=PREVIOUS_HOLDER_WAIT)
    except Exit as exc:
        if isinstance(exc.reason, tuple) and exc.reason[0] == "already_registered":
            raise AlreadyRegistered(("already_started", exc.reason[1]), f"name {name!r} is taken") from None
        raise
