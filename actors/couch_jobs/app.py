"""Start and stop couch_jobs on a node (the seed's ``application:start(couch_jobs)``).

``start(node, path)`` records the database in the node's config (``[couch_jobs]
database_path``, so every host process can open it), attaches the host
program and starts the ``couch_jobs_sup`` tree in the node process.  Any
other process then calls ``process.use(self)`` from an actor (or
``process.use(node)`` in the host program) before using the module-level API.
"""

from __future__ import annotations

import os
from typing import Any

from actors import ActorRef, Exit, Node

from . import process
from .process import DATABASE_PATH_KEY
from .settings import SECTION
from .sup import TOP_SUP, CouchJobsSup

__all__ = ["start", "stop", "whereis"]


def start(node: Node, path: str | os.PathLike[str] | None = None, **options: Any) -> ActorRef:
    """Start the tree; returns ``couch_jobs_sup``.  ``options`` go to this process's `CouchJobs`."""
    if path is not None:
        node.config.set(SECTION, DATABASE_PATH_KEY, os.fspath(path))
    process.use(node, path, **options)
    sup = node.spawn(CouchJobsSup, name=TOP_SUP)
    assert sup is not None, "CouchJobsSup.init never returns ignore"
    att = process.attachment()
    if att is not None:
        att.agent.cast("find_hub")  # connect now rather than at the agent's next retry
        att.agent.call("hub", timeout=10.0)
    return sup


def stop(node: Node, timeout: float | None = 30.0) -> None:
    """Stop the tree (the seed's ``application:stop(couch_jobs)``); the store stays open."""
    sup = node.whereis(TOP_SUP)
    if sup is None:
        return
    try:
        node.stop(sup, "shutdown", timeout=timeout)
    except Exit as exc:
        if exc.reason != "noproc":
            raise


def whereis(node: Node, name: str) -> ActorRef | None:
    return node.whereis(name)
