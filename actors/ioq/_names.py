"""Name registration and lookup from anywhere in a node's processes.

IOQ needs two things the kernel's public API does not offer yet: an actor
started by a supervisor registering itself under a name (``ChildSpec`` has no
``name``), and a name lookup from code that is not an actor (the facade
`actors.ioq.call` runs in client threads and actors alike).  Both are done
here, in one place, through the runtime of the calling process, preferring a
public API when the kernel grows one.
"""

from __future__ import annotations

from typing import Any

from actors import whereis as _whereis
from actors._runtime import current_runtime
from actors.gen_server import PREVIOUS_HOLDER_WAIT

__all__ = ["current_node_id", "register_self", "whereis"]


def current_node_id() -> str:
    """The id of the node the calling process belongs to."""
    return current_runtime().node_id


def whereis(name: str) -> Any:
    """The ref registered under ``name`` in the calling process's node, or None."""
    return _whereis(name)


def register_self(server: Any, name: str) -> None:
    """Register the running actor ``server`` under ``name`` (released when it dies).

    A no-op when the actor was spawned with that name already; raises
    `actors.Exit` ``("already_registered", holder)`` when another actor holds it.
    """
    server.register(name, wait=PREVIOUS_HOLDER_WAIT)
