"""Ctrl-C and SIGTERM for the command line: stop the work, report, clean up, exit 130 or 143.

Python turns Ctrl-C into `KeyboardInterrupt`; `catch_sigterm` makes SIGTERM
raise `Interrupted` (a `KeyboardInterrupt` too), so one ``except
KeyboardInterrupt`` in a command's load loop handles both, and
`exit_status` says which status the shell expects.  While the command then
stops its workload and prints what it has, `deferred` holds further signals
back, so a second Ctrl-C cannot cut the cleanup in half (the command is
already on its way out with the status of the first).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["Interrupted", "catch_sigterm", "deferred", "exit_status"]

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
