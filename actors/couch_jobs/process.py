"""Attach this OS process's couch_jobs instance to the actor layer, and detach it.

``use(spawner)`` is what a host program (``spawner`` = the `Node`) or an
actor in a host process (``spawner`` = the actor, ``self``) calls before
using the module-level couch_jobs functions.  It makes sure the process has
a default `CouchJobs` (opening the store named by ``[couch_jobs] store`` or
``database_path`` in the node's config when none is configured) and
attaches it once per process:

- an `AgentSup` in this process runs the `ProcessAgent`, which receives
  wake-ups and notifications (and is restarted if it crashes);
- the store's commit listener casts every commit's touched job types to the
  ``couch_jobs_wakeups`` hub, which wakes every other attached process;
- subscriptions go through the notifier actors (`ActorSubscriptions`).

``detach()`` undoes all of it: the agent and its supervisor stop, the
listener goes, and an instance that `use` opened itself is closed and
stops being the process default -- so a later ``use``/``start`` with
another store really uses that store.
"""

from __future__ import annotations

import os
from typing import Any

from actors import CallTimeout, Exit
from actors.config import current as current_config

from . import api
from .actor_subscriptions import ActorSubscriptions
from .agent import AgentSup
from .api import CouchJobs
from .attachment import (
    DATABASE_PATH_KEY,
    STORE_KEY,
    Attachment,
    attachment,
    clear,
    install,
    local_jobs,
    lock,
)
from .errors import CouchJobsError
from .settings import SECTION

__all__ = ["DATABASE_PATH_KEY", "STORE_KEY", "Attachment", "attachment", "detach", "local_jobs", "use"]


def _store_of(jobs: CouchJobs) -> str | None:
    return getattr(jobs.store, "location", None) or getattr(jobs.store, "path", None)


def _configured_store() -> str | None:
    config = current_config()
    return config.get(SECTION, STORE_KEY) or config.get(SECTION, DATABASE_PATH_KEY) or None


def use(spawner: Any, path: str | os.PathLike[str] | None = None, **options: Any) -> CouchJobs:
    """The process's default `CouchJobs`, attached to the actor layer.

    ``spawner`` is the `Node` (in the host program) or the calling actor; it
    starts this process's `AgentSup`.  ``path`` (a SQLite path or a store
    URL; else ``[couch_jobs] store`` / ``database_path``) opens a default
    instance if the process has none; ``options`` go to `CouchJobs`.
    Idempotent per process.  Raises `CouchJobsError` when the process
    already uses another store than ``path`` (detach first).
    """
    with lock:
        att = attachment()
        if att is not None and api._default is att.jobs and _alive(att):
            _check_same(att.jobs, path)
            return att.jobs
        if att is not None:
            _detach(att)
        jobs = api._default
        owns = False
        if jobs is None:
            if path is None:
                path = _configured_store()
            if not path:
                raise CouchJobsError(
                    "couch_jobs has no store in this process: pass path= or set "
                    f"[{SECTION}] {STORE_KEY} in the node config"
                )
            jobs = api.configure(path, **options)
            owns = True
        else:
            _check_same(jobs, path)
        att = Attachment(jobs, owns_jobs=owns)
        att.subscriptions = ActorSubscriptions(att)
        install(att)
        try:
            # AgentSup's init starts the agent, which records itself in att.
            att.agent_sup = spawner.spawn(AgentSup)
        except BaseException:
            clear()
            if owns:
                api.set_default(None)
                jobs.close()
            raise
        jobs.subscriptions = att.subscriptions  # type: ignore[assignment]
        add_change = getattr(jobs.store, "add_change_listener", None)
        if add_change is not None:
            add_change(att.on_change)  # the store itself reaches every process
        else:
            jobs.store.add_commit_listener(att.on_commit)  # through the hub
        return jobs


def _alive(att: Attachment) -> bool:
    return att.agent_sup is not None and att.agent is not None


def _check_same(jobs: CouchJobs, path: str | os.PathLike[str] | None) -> None:
    if path is None:
        return
    wanted = os.fspath(path)
    current = _store_of(jobs)
    if current is not None and not _same_store(current, wanted):
        raise CouchJobsError(
            f"couch_jobs in this process already uses store {current!r}, not {wanted!r}; "
            "stop it (actors.couch_jobs.stop) or detach first"
        )


def _same_store(a: str, b: str) -> bool:
    def norm(x: str) -> str:
        if x.startswith("sqlite://"):
            x = x[len("sqlite://") :]
        return os.path.abspath(x) if "://" not in x else x

    return norm(a) == norm(b)


def _detach(att: Attachment) -> None:
    att.jobs.store.remove_commit_listener(att.on_commit)
    remove_change = getattr(att.jobs.store, "remove_change_listener", None)
    if remove_change is not None:
        remove_change(att.on_change)
    att.hub = None
    agent = att.agent
    if agent is not None:
        try:
            agent.call("detach", timeout=10.0)
        except (Exit, CallTimeout):
            pass  # already gone (its process or node is shutting down)
    att.agent = None
    att.agent_sup = None
    if att.jobs.subscriptions is att.subscriptions:
        att.jobs.subscriptions = att.jobs.local_subscriptions()
    if att.owns_jobs:
        if api._default is att.jobs:
            api.set_default(None)
        att.jobs.close()


def detach() -> None:
    """Undo `use` in this process: stop its agent; close the instance `use` opened.

    An instance the caller installed itself (`api.configure`/`set_default`)
    stays open and stays the default.  Idempotent.
    """
    with lock:
        att = attachment()
        clear()
        if att is not None:
            _detach(att)
