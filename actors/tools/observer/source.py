"""What the observer reads and acts on: a `Node` in this process, or one attached to.

Both offer the same public calls (``actors``, ``hosts``, ``stats``, ``call``,
``kill``, ``exit``); this adapter evens out the two differences, where the
node's pid and configuration come from, so the rest of the observer never
knows which it has.  Nothing here imports `actors.node`: `Node.observe`
reaches the observer, and the observer must not reach back at import time.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from actors import ActorRef
from actors.tools.observer.jobs_view import JobsView

__all__ = ["Observed", "Source", "ref_of"]


class Observed(Protocol):
    """The public calls the observer uses; `Node` and `actors.attach.Attached` both have them."""

    def actors(self, timeout: float = ...) -> list[dict[str, Any]]: ...
    def hosts(self) -> list[dict[str, Any]]: ...
    def peers(self) -> list[dict[str, Any]]: ...
    def stats(self) -> dict[str, Any]: ...
    def call(self, target: ActorRef, request: Any, timeout: float | None = ...) -> Any: ...
    def kill(self, ref: ActorRef) -> None: ...
    def exit(self, ref: ActorRef, reason: Any) -> None: ...


class Source:
    """One observed node, with its id, pid and configuration at hand."""

    def __init__(self, target: Any) -> None:
        self.target: Observed = target
        attached_pid = getattr(target, "node_pid", None)
        # A Node lives in this process; an Attached view names the node's pid.
        self.node_pid: int = attached_pid if attached_pid is not None else os.getpid()
        self.node_id: str = getattr(target, "node_id", None) or target.id
        self.embedded = attached_pid is None
        #: couch_jobs' store, read-only, for the couch_jobs panel (opened at its first read).
        self.jobs = JobsView()

    def actors(self) -> list[dict[str, Any]]:
        return self.target.actors()

    def hosts(self) -> list[dict[str, Any]]:
        return self.target.hosts()

    def stats(self) -> dict[str, Any]:
        return self.target.stats()

    def peers(self) -> list[dict[str, Any]]:
        """The other nodes connected now (name, address, incarnation, up since); none when not distributed."""
        return self.target.peers()

    def config(self) -> dict[str, dict[str, str]]:
        cfg = getattr(self.target, "config")
        return cfg() if callable(cfg) else cfg.to_dict()

    def call(self, ref: ActorRef, request: Any, timeout: float) -> Any:
        return self.target.call(ref, request, timeout=timeout)

    def kill(self, ref: ActorRef) -> None:
        self.target.kill(ref)

    def exit(self, ref: ActorRef, reason: Any) -> None:
        self.target.exit(ref, reason)

    def close(self) -> None:
        """Let go of what the observer opened for itself (the store view); the node is untouched."""
        self.jobs.close()


def ref_of(node_id: str, entry: dict[str, Any]) -> ActorRef:
    """The ref of an actor from its `Node.actors` entry."""
    return ActorRef(node_id, entry["proc"], entry["id"], entry["pid"], entry.get("registered") or entry.get("name"))
