"""The gen_statem behaviour: OTP's state machine on the GenServer loop.

The public face of `actors._core.cell.gen_statem` and its transition engine
(`actors._core.cell.statem_engine`): programs import this module; the kernel
imports those.  docs/statem.md is the guide.
"""

from actors._core.cell.gen_statem import GenStatem
from actors._core.cell.statem_engine import (
    EventTimeout,
    GenericTimeout,
    KeepState,
    NextEvent,
    NextState,
    Postpone,
    RepeatState,
    Reply,
    StatemError,
    StateTimeout,
    StopAndReply,
    postpone,
)
from actors._core.wire.reasons import Stop

__all__ = [
    "EventTimeout",
    "GenStatem",
    "GenericTimeout",
    "KeepState",
    "NextEvent",
    "NextState",
    "Postpone",
    "RepeatState",
    "Reply",
    "StateTimeout",
    "StatemError",
    "Stop",
    "StopAndReply",
    "postpone",
]
