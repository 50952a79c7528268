"""Name registration and lookup from anywhere in a node's processes.

An actor started by a supervisor registers itself under a name
(``ChildSpec`` has no ``name``), and code that is not an actor looks names
up (the facade `actors.ioq.call` runs in client threads and actors alike).
Both go through the kernel's public API (`GenServer.register`,
`actors.whereis`, `actors.api.node_id`), here in one place.
"""

from __future__ import annotations

from typing import Any

from actors import whereis as _whereis
from actors.api import node_id
from actors.gen_server import PREVIOUS_HOLDER_WAIT

__all__ = ["current_node_id", "register_self", "whereis"]


def current_node_id() -> str:
    """The id of the node the calling process belongs to."""
    return node_id()


def whereis(name: str) -> Any:
    """The ref registered under ``name`` in the calling process's node, or None."""
    return _whereis(name)


def register_self(server: Any, name: str) -> None:
    """Register the running actor ``server`` under ``name`` (released when it dies).

    A no-op when the actor was spawned with that name already; raises
    `actors.Exit` ``("already_registered", holder)`` when another actor holds it.
    """
    server.register(name, wait=PREVIOUS_HOLDER_WAIT)
