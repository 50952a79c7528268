"""The IOQ1 server actor (`ioq_server`), kept for comparison: a GenServer over `Ioq1State`.

A single server for the whole node, registered as ``ioq_server``.  Callers
call it with ``(IOQ1_REQUEST, fd, msg, dimensions, t0)`` (``fd`` an `ActorRef`
or its wire form, which is much cheaper to encode); like IOQ2 it
answers later, queues a whole burst before choosing (its own *submit*
message), submits with ``("$io", ref, self, msg)`` and fails waiters with the
exit reason of a file that dies (see `QueueServer`).  The difference is the
policy: channels and a lottery (`sort_queues`) instead of one heap, and dedupe
by scanning queues.
"""

from __future__ import annotations

import random
from typing import Any

from actors import noreply
from actors import stats as _stats

from ._queue_server import QueueServer
from .server1_state import Ioq1State

__all__ = ["IOQ1_REQUEST", "IOQ1_SERVER", "Ioq1Server"]

#: Registered name of the IOQ1 server.
IOQ1_SERVER = "ioq_server"
#: First element of a request tuple ``(IOQ1_REQUEST, fd, msg, dimensions, t0)``.
IOQ1_REQUEST = "$ioq1"


class Ioq1Server(QueueServer):
    """``ioq_server``: channels, lottery and dedupe over the node's IO."""

    def init(self, name: str | None = None, seed: int | None = None) -> None:
        cfg = self._setup(name)
        self.state = Ioq1State.from_config(cfg, stats=_stats.current())
        rng = random.Random(seed)
        self._due = lambda now: self.state.maybe_submit(now, rng)

    def handle_call(self, request: Any, from_: Any) -> Any:
        if type(request) is tuple and len(request) == 5 and request[0] == IOQ1_REQUEST:
            _tag, fd, msg, dimensions, t0 = request
            if type(fd) is list:
                fd = self._fd_from_wire(fd)
            state = self.state
            state.enqueue(state.make_request(fd, msg, dimensions, t0), from_)
            self._schedule_submit()
            return noreply
        return self._control(request)

    def _control_extra(self, request: Any) -> Any:
        state = self.state
        if request == "get_counters":
            return state.get_counters()
        if request == "reset_histos":
            state.reset_histos()
            return "ok"
        if type(request) is tuple and len(request) == 4 and request[0] == "add_channel":
            state.add_channel(request[1], request[2], request[3])
            return "ok"
        if type(request) is tuple and len(request) == 3 and request[0] == "rem_channel":
            state.rem_channel(request[1], request[2])
            return "ok"
        if request == "list_custom_channels":
            return state.list_custom_channels()
        raise LookupError(request)
