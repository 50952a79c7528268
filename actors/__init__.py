"""Erlang/OTP's process model for Python, across real OS processes.

The public surface of the kernel; everything else lives in private modules.
"""

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
