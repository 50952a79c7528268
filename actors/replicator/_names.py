"""Registering a supervised actor under a name, and finding names from anywhere.

The kernel's public API lets `Node.spawn`/`spawn_link` give a name, but a
`supervision.ChildSpec` has no ``name`` and an actor cannot register itself,
so the scheduler, its job supervisor and its reader register themselves in
``init`` here (`GenServer.register`).  Lookups without a `Node` or an actor
at hand (a plain thread of a host process) use `actors.whereis`, and the
node's name comes from `actors.api.node_id`: the kernel's public API.
"""

from __future__ import annotations

from typing import Any

from actors import whereis as _whereis
from actors.api import node_id
from actors.gen_server import PREVIOUS_HOLDER_WAIT

__all__ = ["node_incarnation", "node_name", "register_self", "whereis"]


def whereis(name: str) -> Any:
    """The ref registered under ``name`` in the calling process's node, or None."""
    return _whereis(name)


def register_self(server: Any, name: str) -> None:
    """Register the running actor ``server`` as ``name`` (released when it dies).

    A no-op when it was spawned with that name; `actors.Exit`
    ``("already_registered", holder)`` when another actor holds the name.
    """
    server.register(name, wait=PREVIOUS_HOLDER_WAIT)


def node_name() -> str | None:
    """The calling process's node's name in its cluster (``"a"`` of ``"a@<incarnation>"``),
    None when the node is not distributed."""
    name, at, _ = node_id().rpartition("@")
    return name if at and name else None


def node_incarnation() -> str | None:
    """The calling process's node's incarnation (hex, new at every start of the node),
    None when the node is not distributed."""
    name, at, incarnation = node_id().rpartition("@")
    return incarnation if at and name else None
