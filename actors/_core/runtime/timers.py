"""Timers that deliver a message to an actor: ``send_after`` and ``cancel_timer``.

The transport's I/O thread keeps the heap and fires what is due
(`actors._core.transport.timers`); a fired timer of this floor sends its
message to its target as a plain message.
"""

from __future__ import annotations

import time
from typing import Any

from actors._core.runtime.kinds import K_INFO
from actors._core.runtime.names import Names
from actors._core.transport.timers import Timer, TimerHeap
from actors._core.wire.reasons import CallTimeout
from actors._core.wire.ref import ActorRef

__all__ = ["Timers"]


class Timers(Names):
    """Timers addressed to actors."""

    def send_after(self, seconds: float, target: ActorRef, message: Any) -> Timer:
        return self.add_timer(Timer(time.monotonic() + max(0.0, seconds), target, message))

    def cancel_timer(self, timer: Timer) -> float | bool:
        """Seconds that were left, or False when the timer already fired, was
        cancelled, or its target is dead: as ``erlang:cancel_timer/1``, a timer
        addressed to a process goes with that process.  (A target on another
        node is not asked: Erlang's timers only address local processes.)"""
        left = TimerHeap.cancel(timer)
        if left is False:
            return False
        target = timer.target
        if isinstance(target, ActorRef) and target.node_id == self.node_id:
            try:
                if not self.is_alive(target):
                    return False
            except CallTimeout:  # no answer: it may live, as far as we know
                pass
        return left

    def fire_timer(self, timer: Timer) -> None:
        """A timer with a target fell due (I/O thread): send its message."""
        target = timer.target
        self.route(target.proc, K_INFO, target.id, None, None, timer.message)
