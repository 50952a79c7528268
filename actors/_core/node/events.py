"""``net_kernel:monitor_nodes``: actors that hear of every node going up or down.

A subscriber gets ``("nodeup", name)`` and ``("nodedown", name)`` in its
``handle_info`` for every connection and loss of another node, in the order
the node saw them.  As in Erlang the subscription is not told about nodes
already connected (read `Node.nodes` after subscribing), subscribing twice
is the same as once, and a subscriber that dies is forgotten: each one is
watched with a `Monitor`, whose DOWN drops it before the next event.

The node publishes from its runtime's I/O thread only, so the order of the
messages is the order of the link's up/down callbacks.
"""

from __future__ import annotations

import threading

from actors._core.runtime.monitor import Monitor
from actors._core.runtime.runtime import Runtime
from actors._core.wire.ref import ActorRef

__all__ = ["NodeEvents"]


class NodeEvents:
    """The node's list of ``monitor_nodes`` subscribers."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._lock = threading.Lock()
        self._subs: dict[ActorRef, Monitor] = {}

    def subscribe(self, ref: ActorRef, flag: bool = True) -> None:
        """``flag=True`` subscribes ``ref``; ``False`` ends its subscription.

        Blocks until the watch on the subscriber is in place (not on the
        runtime's I/O thread: the monitor request needs it to answer)."""
        if not isinstance(ref, ActorRef):
            raise TypeError(f"monitor_nodes needs an ActorRef, got {type(ref).__name__}")
        if not flag:
            with self._lock:
                watch = self._subs.pop(ref, None)
            if watch is not None:
                watch.cancel()
            return
        with self._lock:
            if ref in self._subs:
                return
        watch = Monitor(self._rt, ref)
        with self._lock:
            if ref in self._subs or watch.fired:
                duplicate = True
            else:
                self._subs[ref] = watch
                duplicate = False
        if duplicate:
            watch.cancel()

    def publish(self, event: str, name: str) -> None:
        """Send ``(event, name)`` to every live subscriber (runtime I/O thread)."""
        with self._lock:
            for ref, watch in list(self._subs.items()):
                if watch.fired:
                    del self._subs[ref]
            subs = list(self._subs)
        message: tuple[str, str] = (event, name)
        for ref in subs:
            self._rt.send(ref, message)

    def subscribers(self) -> list[ActorRef]:
        with self._lock:
            return [ref for ref, watch in self._subs.items() if not watch.fired]

    def clear(self) -> None:
        with self._lock:
            watches = list(self._subs.values())
            self._subs.clear()
        for watch in watches:
            watch.cancel()
