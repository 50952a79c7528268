"""What every workload driver has: a stop flag, its threads, and an end-of-run check."""

from __future__ import annotations

import abc
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Check", "Driver"]


@dataclass
class Check:
    """One subsystem's verdict: summary lines and how many items were lost."""

    name: str
    lines: list[str] = field(default_factory=list)
    lost: int = 0
    #: what the verdict covers, e.g. "40 jobs" (the RESULT line lists these)
    counted: str = ""
    #: calls that failed with an exit reason: expected under kills, not lost
    failed: int = 0

    @property
    def ok(self) -> bool:
        return self.lost == 0


class Driver(abc.ABC):
    """Threads that run ``tick()`` every ``period`` seconds until stopped.

    Abstract: each subsystem's driver says what one unit of load is by
    implementing `tick`.

    Each thread's loop is bounded by the stop flag and, as a backstop, by
    ``max_ticks``; a tick that raises is counted and logged in ``errors``
    rather than ending the thread, so one failed call never stops the load.
    """

    name = "driver"

    def __init__(self, period: float, threads: int = 1, max_ticks: int = 10_000_000) -> None:
        self.period = period
        self.n_threads = threads
        self.max_ticks = max_ticks
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.errors: dict[str, int] = {}
        self._threads: list[threading.Thread] = []

    @abc.abstractmethod
    def tick(self, index: int) -> None:
        """Issue one unit of load from thread ``index``; an exception is counted, not fatal."""

    def start(self) -> None:
        for i in range(self.n_threads):
            t = threading.Thread(target=self._run, args=(i,), name=f"{self.name}-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def _run(self, index: int) -> None:
        for _ in range(self.max_ticks):
            if self.stop_flag.is_set():
                return
            try:
                self.tick(index)
            except Exception as exc:  # counted, shown in the summary
                self.error(type(exc).__name__)
            if self.stop_flag.wait(self.period):
                return

    def error(self, what: str) -> None:
        with self.lock:
            self.errors[what] = self.errors.get(what, 0) + 1

    def stop(self, timeout: float = 15.0) -> None:
        self.stop_flag.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def snapshot(self) -> dict[str, Any]:
        return {}


def wait_until(pred: Callable[[], bool], deadline: float, step: float = 0.2) -> bool:
    """Poll ``pred`` until it holds or ``deadline`` (monotonic) passes; bounded."""
    while True:
        try:
            if pred():
                return True
        except Exception:  # a service restarting; try again next step
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(step, left))  # polling an external condition with a deadline, not synchronising actors
