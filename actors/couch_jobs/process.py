"""Attach this OS process's couch_jobs instance to the actor layer.

``use(spawner)`` is what a host program (``spawner`` = the `Node`) or an
actor in a host process (``spawner`` = the actor, ``self``) calls before
using the module-level couch_jobs functions.  It makes sure the process has
a default `CouchJobs` (opening the database named by ``[couch_jobs]
database_path`` in the node's config when none is configured) and attaches
it once per process:

- a `ProcessAgent` actor in this process receives wake-ups and notifications;
- the store's commit listener casts every commit's touched job types to the
  ``couch_jobs_wakeups`` hub, which wakes every other attached process;
- subscriptions go through the notifier actors (`ActorSubscriptions`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

from actors import ActorRef
from actors.config import current as current_config

from . import api
from .actor_subscriptions import ActorSubscriptions
from .api import CouchJobs
from .errors import CouchJobsError
from .settings import SECTION

__all__ = ["DATABASE_PATH_KEY", "Attachment", "attachment", "local_jobs", "use"]

#: ``[couch_jobs] database_path``: the database every process of the node opens.
DATABASE_PATH_KEY = "database_path"


@dataclass(eq=False)
class Attachment:
    """What `use` set up in this process."""

    jobs: CouchJobs
    agent: ActorRef = field(init=False)
    subscriptions: ActorSubscriptions = field(init=False)
    hub: ActorRef | None = None
    broadcasts: int = 0

    def on_commit(self, type_keys: Any) -> None:
        """Store commit listener: tell the hub which types changed (never blocks)."""
        hub = self.hub
        if hub is not None and type_keys:
            hub.cast(["changed", sorted(type_keys)])
            self.broadcasts += 1


_lock = threading.Lock()
_attachment: Attachment | None = None
_attachment_pid: int | None = None


def attachment() -> Attachment | None:
    """This process's attachment, if `use` ran here."""
    if _attachment_pid != os.getpid():
        return None
    return _attachment


def use(spawner: Any, path: str | os.PathLike[str] | None = None, **options: Any) -> CouchJobs:
    """The process's default `CouchJobs`, attached to the actor layer.

    ``spawner`` is the `Node` (in the host program) or the calling actor; it
    starts this process's `ProcessAgent`.  ``path`` (else ``[couch_jobs]
    database_path``) opens a default instance if the process has none;
    ``options`` go to `CouchJobs`.  Idempotent per process.
    """
    global _attachment, _attachment_pid
    from .agent import ProcessAgent

    with _lock:
        att = attachment()
        if att is not None and api._default is att.jobs:
            return att.jobs
        jobs = api._default
        if jobs is None:
            if path is None:
                path = current_config().get(SECTION, DATABASE_PATH_KEY)
            if not path:
                raise CouchJobsError(
                    "couch_jobs has no database in this process: pass path= or set "
                    f"[{SECTION}] {DATABASE_PATH_KEY} in the node config"
                )
            jobs = api.configure(path, **options)
        if att is not None:
            _detach(att)
        att = Attachment(jobs)
        att.subscriptions = ActorSubscriptions(att)
        # The agent must exist before the subscriptions backend is swapped.
        att.agent = spawner.spawn(ProcessAgent, att)
        jobs.subscriptions = att.subscriptions  # type: ignore[assignment]
        jobs.store.add_commit_listener(att.on_commit)
        _attachment, _attachment_pid = att, os.getpid()
        return jobs


def _detach(att: Attachment) -> None:
    att.jobs.store.remove_commit_listener(att.on_commit)
    att.hub = None


def detach() -> None:
    """Undo `use` in this process (the agent actor is left to the node's shutdown)."""
    global _attachment, _attachment_pid
    with _lock:
        att = attachment()
        if att is not None:
            _detach(att)
        _attachment = _attachment_pid = None


def local_jobs() -> CouchJobs:
    """The attached instance, for the couch_jobs actors of this process."""
    att = attachment()
    if att is None:
        raise CouchJobsError("couch_jobs is not attached in this process; call process.use() first")
    return att.jobs
