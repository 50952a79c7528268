"""The kinds of signal one process's runtime sends another, as numbers on the wire.

Every frame carries one kind (`actors._core.wire.codec`); the runtime hands
a frame to the handler registered for its kind (`RuntimeBase.handle_kind`).
The numbers are the wire format: they never change meaning.
"""

from __future__ import annotations

__all__ = [
    "EXIT_KILL",
    "EXIT_LINKED",
    "EXIT_SENT",
    "K_BATCH",
    "K_CALL",
    "K_CAST",
    "K_DEMONITOR",
    "K_DOWN",
    "K_EXIT",
    "K_INFO",
    "K_LINK",
    "K_MONITOR",
    "K_REPLY",
    "K_REPLY_EXIT",
    "K_STOP",
    "K_SYS",
    "K_UNLINK",
]

# Frame kinds.
K_INFO = 0
K_CAST = 1
K_CALL = 2
K_REPLY = 3
K_REPLY_EXIT = 4
K_EXIT = 5
K_LINK = 6
K_UNLINK = 7
K_MONITOR = 8
K_DEMONITOR = 9
K_DOWN = 10
K_SYS = 11
K_STOP = 12
K_BATCH = 13  # consecutive casts/sends from one thread to one process: [[kind, to, body], ...]

# How a K_EXIT signal was sent (its body is ``[sender, reason, how]``); Erlang
# treats the two sources of exit signals differently.
#: ``exit(Pid, Reason)``: trappable, leaves any link with the sender in place.
EXIT_SENT = 0
#: ``exit(Pid, kill)``: untrappable, the target dies with ``killed``.
EXIT_KILL = 1
#: The death of a linked actor: removes the link; reason ``kill`` stays trappable.
EXIT_LINKED = 2
