"""Erlang/OTP's process model for Python, across real OS processes.

The public surface of the kernel; everything else lives in private modules.

Each name is imported on first use (PEP 562's module ``__getattr__``), not
when ``actors`` is: every host process imports this package on its way to
the kernel, and a host should carry only the kernel and what its actors
need.  ``import actors`` then costs nothing, ``from actors import Node``
imports the node, and ``dir(actors)`` and type checkers see every name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors._core.cell.spawn import AlreadyRegistered, SpawnError
    from actors._core.net.net import ConnectError, NetError
    from actors._core.runtime.mailbox import MailboxFull
    from actors._core.runtime.monitor import Monitor
    from actors._core.runtime.runtime import Timer
    from actors._core.wire.reasons import (
        INCARNATION_ENDED,
        CallCycle,
        CallTimeout,
        Continue,
        Crash,
        Exit,
        IncarnationEnded,
        Stop,
        Timeout,
        ignore,
        is_normal_exit,
        noreply,
    )
    from actors._core.wire.ref import ActorRef, From
    from actors.api import call, cast, monitor, send, whereis
    from actors.config import Config
    from actors.gen_server import GenServer, UnexpectedMessage
    from actors.gen_statem import GenStatem
    from actors.interrupt import run_forever
    from actors.node import Node

#: Each public name -> the module that defines it (imported on first use).
_WHERE: dict[str, str] = {
    "AlreadyRegistered": "actors._core.cell.spawn",
    "SpawnError": "actors._core.cell.spawn",
    "ConnectError": "actors._core.net.net",
    "NetError": "actors._core.net.net",
    "MailboxFull": "actors._core.runtime.mailbox",
    "Monitor": "actors._core.runtime.monitor",
    "Timer": "actors._core.runtime.runtime",
    "INCARNATION_ENDED": "actors._core.wire.reasons",
    "CallCycle": "actors._core.wire.reasons",
    "CallTimeout": "actors._core.wire.reasons",
    "Continue": "actors._core.wire.reasons",
    "Crash": "actors._core.wire.reasons",
    "Exit": "actors._core.wire.reasons",
    "IncarnationEnded": "actors._core.wire.reasons",
    "Stop": "actors._core.wire.reasons",
    "Timeout": "actors._core.wire.reasons",
    "ignore": "actors._core.wire.reasons",
    "is_normal_exit": "actors._core.wire.reasons",
    "noreply": "actors._core.wire.reasons",
    "ActorRef": "actors._core.wire.ref",
    "From": "actors._core.wire.ref",
    "call": "actors.api",
    "cast": "actors.api",
    "monitor": "actors.api",
    "send": "actors.api",
    "whereis": "actors.api",
    "Config": "actors.config",
    "GenServer": "actors.gen_server",
    "UnexpectedMessage": "actors.gen_server",
    "GenStatem": "actors.gen_statem",
    "run_forever": "actors.interrupt",
    "Node": "actors.node",
}

__all__ = [
    "ActorRef",
    "AlreadyRegistered",
    "CallCycle",
    "CallTimeout",
    "Config",
    "ConnectError",
    "Continue",
    "Crash",
    "Exit",
    "From",
    "GenServer",
    "GenStatem",
    "INCARNATION_ENDED",
    "IncarnationEnded",
    "MailboxFull",
    "Monitor",
    "NetError",
    "Node",
    "SpawnError",
    "Stop",
    "Timeout",
    "Timer",
    "UnexpectedMessage",
    "call",
    "cast",
    "ignore",
    "is_normal_exit",
    "monitor",
    "noreply",
    "run_forever",
    "send",
    "whereis",
]


def __getattr__(name: str) -> Any:
    """Import the module defining a public name the first time it is asked for, and keep it here."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'actors' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
