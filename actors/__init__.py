"""Erlang/OTP's process model for Python, across real OS processes.

The public surface of the kernel; everything else lives in private modules.
"""

from actors._reasons import CallTimeout, Continue, Crash, Exit, Stop, Timeout, ignore, is_normal_exit, noreply
from actors._mailbox import MailboxFull
from actors._ref import ActorRef, From
from actors._runtime import Timer
from actors._spawn import AlreadyRegistered, SpawnError
from actors.config import Config
from actors.gen_server import GenServer, UnexpectedMessage
from actors._monitor import Monitor
from actors._net import ConnectError, NetError
from actors.node import Node
from actors.api import call, cast, monitor, send, whereis
from actors.interrupt import run_forever

__all__ = [
    "ActorRef",
    "AlreadyRegistered",
    "CallTimeout",
    "Config",
    "ConnectError",
    "Continue",
    "Crash",
    "Exit",
    "From",
    "GenServer",
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
