"""Start and stop couch_jobs on a node (the seed's ``application:start(couch_jobs)``).

``start(node, store)`` records the store in the node's config (``[couch_jobs]
store``, plus ``database_path`` for a SQLite file, so every host process can
open it), attaches the host program and starts the ``couch_jobs_sup`` tree
in the node process.  Any other process then calls ``process.use(self)``
from an actor (or ``process.use(node)`` in the host program) before using
the module-level API.  ``stop(node)`` stops the tree and then detaches this
process: its agent stops, and the store `start` opened is closed and is no
longer the process default, so a later ``start`` with another store uses it.
"""

from __future__ import annotations

import os
from typing import Any

from actors import ActorRef, Exit, Node

from . import api, process
from .attachment import DATABASE_PATH_KEY, STORE_KEY
from .naming import TOP_SUP
from .settings import SECTION
from .sup import CouchJobsSup

__all__ = ["DEFAULT_FILE", "start", "stop", "whereis"]

#: The SQLite file `start` opens in the node's state directory when no store is configured
#: (the name the whole application uses under ``[couch] state_dir``).
DEFAULT_FILE = "couch_jobs.sqlite"


def start(node: Node, path: str | os.PathLike[str] | None = None, **options: Any) -> ActorRef:
    """Start the tree; returns ``couch_jobs_sup``.

    ``path``: a SQLite file, ``sqlite:///path`` or ``postgresql://...`` (else
    the node's ``[couch_jobs] store``/``database_path``, else a SQLite file
    in the node's state directory: ``[couch] state_dir`` when set, else the
    node's runtime directory, which lives as long as the node).  ``options``
    go to this process's `CouchJobs`.
    """
    if path is None and api._default is None and not _configured(node):
        path = os.path.join(node.config.get("couch", "state_dir") or node.rundir, DEFAULT_FILE)
    if path is not None:
        location = os.fspath(path)
        node.config.set(SECTION, STORE_KEY, location)
        if "://" not in location:
            node.config.set(SECTION, DATABASE_PATH_KEY, location)
    process.use(node, path, **options)
    try:
        sup = node.spawn(CouchJobsSup, name=TOP_SUP)
        if sup is None:
            raise RuntimeError("CouchJobsSup.init never returns ignore")
        att = process.attachment()
        if att is not None and att.agent is not None:
            att.agent.cast("find_hub")  # connect now rather than at the agent's next retry
            att.agent.call("hub", timeout=10.0)
    except BaseException:
        stop(node)
        raise
    return sup


def _configured(node: Node) -> bool:
    return bool(node.config.get(SECTION, STORE_KEY) or node.config.get(SECTION, DATABASE_PATH_KEY))


def stop(node: Node, timeout: float | None = 30.0) -> None:
    """Stop the tree (the seed's ``application:stop(couch_jobs)``), then detach this process.

    Every actor of the tree has stopped before the store `start` opened is
    closed.  An instance the caller installed itself stays open.
    """
    sup = node.whereis(TOP_SUP)
    try:
        if sup is not None:
            node.stop(sup, "shutdown", timeout=timeout)
    except Exit as exc:
        if exc.reason != "noproc":
            raise
    finally:
        process.detach()


def whereis(node: Node, name: str) -> ActorRef | None:
    return node.whereis(name)
