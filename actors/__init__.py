"""Erlang/OTP's process model for Python, across real OS processes.

The public surface of the kernel; everything else lives in private modules.
"""

from actors._reasons import CallTimeout, Continue, Crash, Exit, Stop, ignore, is_normal_exit, noreply
from actors._ref import ActorRef, From
from actors._runtime import Timer
from actors._spawn import AlreadyRegistered, SpawnError
from actors.config import Config
from actors.gen_server import GenServer, UnexpectedMessage
from actors.node import Monitor, Node

__all__ = [
    "ActorRef",
    "AlreadyRegistered",
    "CallTimeout",
    "Config",
    "Continue",
    "Crash",
    "Exit",
    "From",
    "GenServer",
    "Monitor",
    "Node",
    "SpawnError",
    "Stop",
    "Timer",
    "UnexpectedMessage",
    "ignore",
    "is_normal_exit",
    "noreply",
]
