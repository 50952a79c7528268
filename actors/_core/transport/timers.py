"""Timers of the I/O thread: a heap ordered by deadline, fired by that thread.

The heap knows nothing of what a timer does: a timer with no ``target``
runs its ``message`` (a callable) on the I/O thread; any other is handed to
the layer above's ``fire`` callback (the runtime sends the message).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Timer", "TimerHeap"]

log = logging.getLogger("actors.transport")


class Timer:
    """A pending `send_after`; cancel it with `cancel_timer`.

    The transport only orders timers by deadline; ``target`` and ``message``
    are the layer above's (a ``target`` of None makes ``message`` a callable
    run on the I/O thread).
    """

    __slots__ = ("deadline", "target", "message", "cancelled", "fired")

    def __init__(self, deadline: float, target: Any, message: Any) -> None:
        self.deadline = deadline
        self.target = target
        self.message = message
        self.cancelled = False
        self.fired = False

    def __lt__(self, other: "Timer") -> bool:
        return self.deadline < other.deadline

    def __repr__(self) -> str:
        return f"<Timer to={self.target!r} in={self.deadline - time.monotonic():.3f}s>"


class TimerHeap:
    """The timers of one I/O thread.  ``wake`` makes that thread poll again
    (a new earliest deadline); ``fire`` takes a due timer that has a target."""

    def __init__(self, wake: Callable[[], None], fire: Callable[[Timer], None]) -> None:
        self._wake = wake
        self._fire = fire
        # ``(deadline, seq, timer)``: ordered by float and int in C, never by
        # calling back into Python -- a process may hold a hundred thousand
        # (every idle actor's `Timeout`), and the heap is shared by every thread.
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def pending(self) -> list[Timer]:
        """The timers not fired yet (cancelled ones included until their deadline)."""
        with self._lock:
            return [entry[2] for entry in self._timers]

    def add(self, timer: Timer) -> Timer:
        entry = (timer.deadline, next(self._seq), timer)
        with self._lock:
            heapq.heappush(self._timers, entry)
            earliest = self._timers[0] is entry
        if earliest:
            self._wake()
        return timer

    def call_later(self, seconds: float, fn: Callable[[], None]) -> Timer:
        """Run ``fn`` on the I/O thread after ``seconds``."""
        return self.add(Timer(time.monotonic() + max(0.0, seconds), None, fn))

    @staticmethod
    def cancel(timer: Timer) -> float | bool:
        """Seconds that were left, or False when it already fired or was cancelled."""
        if timer.fired or timer.cancelled:
            return False
        timer.cancelled = True
        return max(0.0, timer.deadline - time.monotonic())

    def fire_due(self) -> float | None:
        """Fire what is due (I/O thread); the next deadline, or None."""
        if not self._timers:
            return None
        now = time.monotonic()
        due: list[Timer] = []
        timers = self._timers
        pop = heapq.heappop
        with self._lock:
            while timers and timers[0][0] <= now:
                due.append(pop(timers)[2])
            next_deadline = timers[0][0] if timers else None
        for timer in due:
            if not timer.cancelled:
                timer.fired = True
                try:
                    if timer.target is None:
                        timer.message()
                    else:
                        self._fire(timer)
                except Exception:
                    log.exception("timer failed")
        return next_deadline
