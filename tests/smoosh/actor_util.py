"""Helpers for the smoosh actor tests: an observer probe and bounded waits."""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

from actors import GenServer
from tests.polling import take_first


class Observer(GenServer):
    """Lives in the test process; queues every ``("smoosh", ...)`` event it gets."""

    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q

    def handle_info(self, message: Any) -> None:
        self.q.put(message)


class Events:
    """The events an `Observer` received, waited on with a deadline."""

    def __init__(self, q: "queue.Queue[Any]") -> None:
        self.q = q
        self.seen: list[tuple] = []
        #: Events a wait passed over but promised to keep (``keep``): the next
        #: wait looks at them first, in order, and drops those it passes over.
        self.kept: list[tuple] = []

    def wait(
        self, pred: Callable[[tuple], bool], timeout: float = 20.0, keep: Callable[[tuple], bool] | None = None
    ) -> tuple:
        """The first event (from now on) matching ``pred``; TimeoutError after ``timeout``.

        The events passed over are dropped, except those ``keep`` is true of:
        those stay for the next wait (a compaction may end while the test
        still waits for the channels to start)."""
        if keep is None:  # look at what earlier waits kept first
            kept, self.kept = self.kept, []
            for i, event in enumerate(kept):
                if pred(event):
                    self.kept = kept[i + 1 :]
                    return event

        def matches(event: tuple) -> bool:
            self.seen.append(event)
            if pred(event):
                return True
            if keep is not None and keep(event):
                self.kept.append(event)
            return False

        event = take_first(self.q, matches, timeout)
        if event is None:
            raise TimeoutError(f"no matching smoosh event within {timeout} s; seen {self.seen[-20:]!r}")
        return event

    def wait_for(
        self, kind: str, *args: Any, timeout: float = 20.0, keep: Callable[[tuple], bool] | None = None
    ) -> tuple:
        """The next ``("smoosh", kind, *args, ...)`` event."""
        n = len(args)
        return self.wait(lambda e: e[1] == kind and tuple(e[2 : 2 + n]) == args, timeout, keep)

    def drain(self) -> list[tuple]:
        """Everything already queued, without waiting."""
        out, self.kept = self.kept, []
        while True:
            try:
                event = self.q.get_nowait()
            except queue.Empty:
                break
            self.seen.append(event)
            out.append(event)
        return out


def proc_state(pid: int) -> str | None:
    """The state letter of a process (``T`` when stopped), None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    return data[data.rindex(")") + 2]


def wait_proc_state(pid: int, wanted: set[str], timeout: float = 10.0) -> str | None:
    """Poll ``/proc`` until the process is in one of ``wanted`` states.

    A signal's effect on another process has no event to wait on; this is a
    bounded observation of kernel state, not a sleep to let something happen.
    """
    tick = threading.Event()
    deadline = time.monotonic() + timeout
    state = proc_state(pid)
    while state not in wanted and time.monotonic() < deadline:
        tick.wait(0.005)
        state = proc_state(pid)
    return state


@contextmanager
def exclusive_lock(path: str) -> Iterator[None]:
    """SQLite's exclusive lock on ``path`` for the block, so a VACUUM of it waits."""
    con = sqlite3.connect(path, isolation_level=None, timeout=10.0)
    try:
        con.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            con.execute("ROLLBACK")
    finally:
        con.close()


def utc_hhmm(minutes: int) -> str:
    minutes %= 1440
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def now_minutes() -> int:
    return int(time.time() // 60) % 1440


def file_size(path: str) -> int:
    return os.path.getsize(path)
