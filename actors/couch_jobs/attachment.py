"""This OS process's link between its `CouchJobs` instance and the actor layer.

Plain per-process state, no actors: which instance the couch_jobs actors of
this process use, which `ProcessAgent` receives its wake-ups and
notifications, which hub its commits are cast to.  `process.use` fills it
in, `process.detach` clears it; the actors read it.  Keeping it apart from
both lets the actors and the code that starts them sit in separate layers.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actors import ActorRef

from .api import CouchJobs
from .errors import CouchJobsError

if TYPE_CHECKING:
    from .actor_subscriptions import ActorSubscriptions

__all__ = [
    "DATABASE_PATH_KEY",
    "STORE_KEY",
    "Attachment",
    "attachment",
    "clear",
    "install",
    "local_jobs",
]

#: ``[couch_jobs] database_path``: the SQLite database every process of the node opens.
DATABASE_PATH_KEY = "database_path"
#: ``[couch_jobs] store``: the store URL (``sqlite:///path`` or ``postgresql://...``).
STORE_KEY = "store"


@dataclass(eq=False)
class Attachment:
    """What `process.use` set up in this process.

    ``owns_jobs``: `use` opened ``jobs`` itself (from a path or the config),
    so `process.detach` closes it and clears the process default.
    """

    jobs: CouchJobs
    owns_jobs: bool = False
    agent: ActorRef | None = None
    agent_sup: ActorRef | None = None
    subscriptions: "ActorSubscriptions | None" = None
    hub: ActorRef | None = None
    broadcasts: int = 0

    def on_commit(self, type_keys: Any) -> None:
        """Store commit listener: tell the hub which types changed (never blocks)."""
        hub = self.hub
        if hub is not None and type_keys:
            hub.cast(["changed", sorted(type_keys)])
            self.broadcasts += 1

    def on_change(self, type_keys: Any) -> None:
        """Change listener of a shared store (PostgreSQL NOTIFY): tell this process's agent.

        The store reports every commit on every machine, this process's
        included, so no hub is needed: the agent wakes the waiters and type
        monitors here.
        """
        agent = self.agent
        if agent is not None and type_keys:
            agent.cast(["changed", sorted(type_keys)])


lock = threading.RLock()
_attachment: Attachment | None = None
_attachment_pid: int | None = None


def attachment() -> Attachment | None:
    """This process's attachment, if `process.use` ran here (never a parent's across fork)."""
    if _attachment_pid != os.getpid():
        return None
    return _attachment


def install(att: Attachment | None) -> None:
    """Make ``att`` this process's attachment (None clears it)."""
    global _attachment, _attachment_pid
    _attachment = att
    _attachment_pid = None if att is None else os.getpid()


def clear() -> None:
    install(None)


def local_jobs() -> CouchJobs:
    """The attached instance, for the couch_jobs actors of this process."""
    att = attachment()
    if att is None:
        raise CouchJobsError("couch_jobs is not attached in this process; call process.use() first")
    return att.jobs
