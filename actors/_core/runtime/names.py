"""Registered names, as a process's runtime sees them.

The node process holds the registry (`actors._core.runtime.registry`); any
other process asks it with a system request.  The registry in turn tells the
holder's process when a name is adopted or dropped, so the holder's cell
knows its own names (they go with it when it dies).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors._core.runtime.system import System
from actors._core.transport.transport import Transport
from actors._core.wire import system as sysop
from actors._core.wire.ref import ActorRef

__all__ = ["Names"]


class Names(System):
    """register, unregister and whereis, from any process."""

    def __init__(self, node_id: str, transport: Transport, node_proc: str = "n") -> None:
        super().__init__(node_id, transport, node_proc)
        self.register_sys(sysop.AdoptName, self._adopt_name)
        self.register_sys(sysop.DropName, self._drop_name)

    def register_name(self, name: str, ref: ActorRef) -> ActorRef | None:
        """Take ``name``; returns the holder when it is taken by another actor."""
        if self.registry is not None:
            return self.registry.register(name, ref)
        return self.sys_request(self.node_proc, sysop.Register(name, ref))

    def unregister_name(self, name: str, ref: ActorRef | None = None) -> bool:
        if self.registry is not None:
            return self.registry.unregister(name, ref)
        return bool(self.sys_request(self.node_proc, sysop.Unregister(name, ref)))

    def unregister_name_then(self, name: str, ref: ActorRef, then: Callable[..., None]) -> None:
        """Unregister without blocking this thread, then run ``then``."""
        if self.registry is not None:
            self.registry.unregister(name, ref)
            then()
            return
        self.sys_request_then(self.node_proc, sysop.Unregister(name, ref), lambda ok, v: then())

    def _adopt_name(self, src: str, msg: sysop.AdoptName) -> Any:
        cell = self.cells.get(msg.actor_id)
        return "dead" if cell is None else cell.adopt_name(msg.name)

    def _drop_name(self, src: str, msg: sysop.DropName) -> None:
        cell = self.cells.get(msg.actor_id)
        if cell is not None:
            cell.drop_name(msg.name)

    def whereis(self, name: str) -> ActorRef | None:
        if self.registry is not None:
            return self.registry.whereis(name)
        return self.sys_request(self.node_proc, sysop.Whereis(name))
