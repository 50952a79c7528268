"""Registered names of the smoosh actors, and finding them from anywhere.

A `supervision.ChildSpec` carries no name, so ``smoosh_server`` registers
itself in ``init`` (`GenServer.register`); the API looks names up with
`actors.whereis`, which works in the host program, a host process or an
actor's thread alike.
"""

from __future__ import annotations

from typing import Any

from actors import whereis as _whereis
from actors.gen_server import PREVIOUS_HOLDER_WAIT

__all__ = [
    "ACCESS_CLEANER",
    "DIR_WATCHER",
    "EVENT_LISTENER",
    "SERVER",
    "SUP",
    "channel_name",
    "register_self",
    "whereis",
]

SUP = "smoosh_sup"
SERVER = "smoosh_server"
ACCESS_CLEANER = "smoosh_access_cleaner"
EVENT_LISTENER = "smoosh_event_listener"
DIR_WATCHER = "smoosh_dir_watcher"


def channel_name(channel: str) -> str:
    """The registered name of a channel's actor."""
    return f"smoosh_channel_{channel}"


def whereis(name: str) -> Any:
    """The ref registered under ``name`` in the calling process's node, or None."""
    return _whereis(name)


def register_self(server: Any, name: str) -> None:
    """Register the running actor ``server`` as ``name`` (released when it dies).

    `actors.Exit` ``("already_registered", holder)`` when another actor
    holds the name.
    """
    server.register(name, wait=PREVIOUS_HOLDER_WAIT)
