"""The per-process runtime: signals between actors over the transport.

Every OS process of a node runs one `Runtime`.  It holds the process's
`actors._core.transport.transport.Transport` (sockets, I/O thread, timers),
which hands frames up to it, and adds what is about actors: signal kinds and
their dispatch to cells, pending calls, system requests between processes,
names and timers that deliver messages.  Cells (`actors._core.cell.cell`) sit
above it and are reached only through the small interface they share with
monitor sinks.

Signals between actors are Erlang's: messages, casts, calls and replies,
exit signals, link/unlink, monitor/demonitor and DOWN.  Delivery between two
actors of the same process never touches ZeroMQ.

The runtime is built in floors, one job each, each a class over the one
below (and each registering the handlers of the frame kinds it receives):

- `actors._core.runtime.base`: shared state, ids, the table of kinds
- `actors._core.runtime.sending`: routing, the cast outbox, answers
- `actors._core.runtime.dispatch`: frames in, gathered per actor
- `actors._core.runtime.calls`: send, cast, call and their waits
- `actors._core.runtime.signals`: exit signals, links, monitors
- `actors._core.runtime.deaths`: a process or node lost
- `actors._core.runtime.system`: system requests between runtimes
- `actors._core.runtime.names`: registered names
- `actors._core.runtime.timers`: timers that send messages

This module adds the directory of the runtimes of this process.
"""

from __future__ import annotations

import threading

from actors._core.runtime.context import current_cell, set_current_cell, thread_state
from actors._core.runtime.kinds import (
    EXIT_KILL,
    EXIT_LINKED,
    EXIT_SENT,
    K_BATCH,
    K_CALL,
    K_CAST,
    K_DEMONITOR,
    K_DOWN,
    K_EXIT,
    K_INFO,
    K_LINK,
    K_MONITOR,
    K_REPLY,
    K_REPLY_EXIT,
    K_STOP,
    K_SYS,
    K_UNLINK,
)
from actors._core.runtime.outbox import CAST_BATCH
from actors._core.runtime.system import DEFER
from actors._core.runtime.timers import Timers
from actors._core.transport.timers import Timer
from actors._core.transport.transport import Transport
from actors._core.wire import ref as _ref
from actors._core.wire.reasons import Exit

__all__ = [
    "CAST_BATCH",
    "DEFER",
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
    "Runtime",
    "Timer",
    "current_cell",
    "current_runtime",
    "runtime_for",
    "set_current_cell",
]

_runtimes: dict[str, "Runtime"] = {}
_runtimes_lock = threading.Lock()


class Runtime(Timers):
    """Process-local kernel state on top of the process's transport, which it holds."""

    def __init__(self, node_id: str, rundir: str, proc: str, node_proc: str = "n") -> None:
        super().__init__(node_id, Transport(rundir, proc, self), node_proc)

    def start(self) -> None:
        with _runtimes_lock:
            _runtimes[self.node_id] = self
        super().start()

    def shutdown(self, linger: bool = False) -> None:
        """Stop the I/O thread and close every socket.

        With ``linger`` the sockets first deliver what they hold (a host that
        halts must not lose its last exit signals); otherwise they drop it.
        """
        with _runtimes_lock:
            if _runtimes.get(self.node_id) is self:
                del _runtimes[self.node_id]
                _ref.local_node_ids.discard(self.node_id)
        super().shutdown(linger)


def runtime_for(node_id: str) -> Runtime:
    rt = _runtimes.get(node_id)
    if rt is None:
        raise Exit("noconnection", f"node {node_id} is not running in this process")
    return rt


def current_runtime() -> Runtime:
    """The runtime of this process (the only one in a host; the newest in the node process)."""
    cell = thread_state.cell
    if cell is not None:
        return cell.runtime
    with _runtimes_lock:
        if not _runtimes:
            raise RuntimeError("no actors node is running in this process")
        return next(reversed(_runtimes.values()))


_ref.set_runtime_resolver(runtime_for, current_runtime)
