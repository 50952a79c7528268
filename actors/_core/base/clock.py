"""Injected time, so policy and actors can be driven by a fake clock in tests.

Policy code takes ``now`` as an argument; actors read the clock they were
given.  `MonotonicClock` is for durations and timers, `WallClock` for
timestamps that are persisted or compared with calendar windows.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "MonotonicClock", "WallClock"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds, as a float."""
        ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()


class WallClock:
    def now(self) -> float:
        return time.time()


class FakeClock:
    """A clock that moves only when told to (Trio's `MockClock` in spirit)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError(f"cannot move a clock backwards by {seconds}")
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, value: float) -> None:
        with self._lock:
            self._now = value
