"""Ctrl-C and SIGTERM for the command line: stop the work, report, clean up, exit 130 or 143.

Python turns Ctrl-C into `KeyboardInterrupt`; `catch_sigterm` makes SIGTERM
raise `Interrupted` (a `KeyboardInterrupt` too), so one ``except
KeyboardInterrupt`` in a command's load loop handles both, and
`exit_status` says which status the shell expects.  While the command then
stops its workload and prints what it has, `deferred` holds further signals
back, so a second Ctrl-C cannot cut the cleanup in half (the command is
already on its way out with the status of the first).  A command that only
waits for the signal waits in `wait_for_signal`, which wakes whichever of
the process's threads the signal was given to.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from time import monotonic as _monotonic
from typing import Any

__all__ = ["Interrupted", "catch_sigterm", "deferred", "exit_status", "wait_for_signal"]

SIGINT_STATUS = 128 + signal.SIGINT    # 130
SIGTERM_STATUS = 128 + signal.SIGTERM  # 143


class Interrupted(KeyboardInterrupt):
    """SIGTERM arrived; ``status`` is the exit status to end with."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signal.Signals(signum).name)
        self.status = 128 + signum


def _raise(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


def catch_sigterm() -> None:
    """Make SIGTERM raise `Interrupted` in the main thread (a no-op elsewhere)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise)


def exit_status(exc: BaseException) -> int:
    """130 for Ctrl-C, 143 for SIGTERM."""
    return exc.status if isinstance(exc, Interrupted) else SIGINT_STATUS


@contextlib.contextmanager
def deferred() -> Iterator[list[int]]:
    """Record SIGINT/SIGTERM instead of raising while the block runs (main thread only)."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def wait_for_signal(timeout: float | None = None) -> None:
    """Sleep in the main thread until a signal's handler raises (SIGINT, or SIGTERM after
    `catch_sigterm`), or ``timeout`` seconds pass.

    Why not `time.sleep`: the kernel hands a signal sent to the process to any
    thread that does not block it, and this process has many; CPython then
    runs the Python handler in the main thread only when it next runs
    bytecode, so a main thread asleep in a system call stays asleep (for an
    hour, with ``time.sleep(3600)``) when another thread took the signal.  The
    C handler writes to the wakeup fd whichever thread runs it, so waiting on
    that fd wakes the main thread, and returning to bytecode raises.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("wait_for_signal runs in the main thread, where Python runs signal handlers")
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    try:
        deadline = None if timeout is None else _monotonic() + timeout
        for _ in range(sys.maxsize):  # each round ends with a signal or the deadline
            left = None if deadline is None else max(0.0, deadline - _monotonic())
            ready, _, _ = select.select([read_end], [], [], left)
            if ready:
                os.read(read_end, 512)  # a handler without a raise (SIGCHLD, ...) just runs: wait again
            elif deadline is not None:
                return
    finally:
        signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)
