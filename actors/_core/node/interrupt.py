"""Ctrl-C and SIGTERM for the command line: stop the work, report, clean up, exit 130 or 143.

Python turns Ctrl-C into `KeyboardInterrupt`; SIGTERM raises `Interrupted`
(a `KeyboardInterrupt` too), so one ``except KeyboardInterrupt`` in a
command's load loop handles both, and `exit_status` says which status the
shell expects.  The command line runs every command inside `stop_once`:
the first signal raises, and every later one is only noted, so a second
Ctrl-C cannot cut the cleanup in half (the command is already on its way
out with the status of the first); no instant is left between the two at
which it could raise.  `deferred` does the same for one block (`catch_sigterm`
makes SIGTERM raise outside `stop_once`).  A command that only waits for
the signal waits in `wait_for_signal`, which wakes whichever of the
process's threads the signal was given to.  `held` is for library code
that must finish a step (closing a node): the signals that arrive meanwhile
are delivered once it has.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from time import monotonic as _monotonic
from typing import Any, Protocol

__all__ = [
    "Interrupted",
    "catch_sigterm",
    "deferred",
    "exit_status",
    "held",
    "run_forever",
    "stop_once",
    "wait_for_signal",
]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

SIGINT_STATUS = 128 + signal.SIGINT  # 130
SIGTERM_STATUS = 128 + signal.SIGTERM  # 143


class Interrupted(KeyboardInterrupt):
    """SIGTERM arrived; ``status`` is the exit status to end with."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signal.Signals(signum).name)
        self.status = 128 + signum


def _raise(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


def catch_sigterm() -> None:
    """Make SIGTERM raise `Interrupted` in the main thread (a no-op elsewhere, and inside `stop_once`,
    whose handler does that already and must stay in charge)."""
    if threading.current_thread() is threading.main_thread() and _stop_once_active is None:
        signal.signal(signal.SIGTERM, _raise)


def exit_status(exc: BaseException) -> int:
    """130 for Ctrl-C, 143 for SIGTERM."""
    return exc.status if isinstance(exc, Interrupted) else SIGINT_STATUS


@contextlib.contextmanager
def deferred() -> Iterator[list[int]]:
    """Record SIGINT/SIGTERM instead of raising while the block runs (main thread only; an ignored
    signal stays ignored)."""
    with _recorded() as received:
        yield received


@contextlib.contextmanager
def _recorded() -> Iterator[list[int]]:
    """Both stop signals only noted in the list yielded while the block runs, then their handlers back;
    a signal ignored, or handled outside Python (no handler to put back), is left alone."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    taken = [s for s, handler in previous.items() if handler is not signal.SIG_IGN and handler is not None]
    for s in taken:
        signal.signal(s, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        for s in taken:
            signal.signal(s, previous[s])


#: The signals the outermost active `stop_once` has seen (None when none is active).
_stop_once_active: list[int] | None = None


@contextlib.contextmanager
def stop_once() -> Iterator[list[int]]:
    """The first SIGINT/SIGTERM raises (`KeyboardInterrupt` / `Interrupted`); every later one is only
    recorded in the list this yields, and once one came, both stay ignored after the block, until the
    process exits (main thread only).

    Why not ``except KeyboardInterrupt`` followed by `deferred`: a second
    signal landing between the two (Ctrl-C pressed twice, or the signal sent
    to several of the process's threads) raises again, out of the stop, and a
    node left half-closed keeps its zygote waiting for a close that never
    comes.  Here the handler that raises is the one that starts recording.
    Ignored after the block, not given back to the handlers before it: the
    process is on its way out, and while the interpreter finalizes, Python
    puts ``SIG_DFL`` back in place of its handlers, so a late SIGTERM would
    still end it by the signal instead of with the status of its clean stop.

    A signal ignored when the block starts (SIGINT in a command started in
    the background by a shell) stays ignored.  Nested, the inner block is the
    outer one: it yields the same list and changes nothing (the command line
    runs every command in one; `catch_sigterm` inside it keeps it in charge).
    """
    global _stop_once_active
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    if _stop_once_active is not None:
        yield _stop_once_active
        return
    received: list[int] = []

    def once(signum: int, frame: Any) -> None:
        first = not received
        received.append(signum)
        if first:
            raise KeyboardInterrupt() if signum == signal.SIGINT else Interrupted(signum)

    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    taken = [s for s, handler in previous.items() if handler is not signal.SIG_IGN]
    for s in taken:
        signal.signal(s, once)
    _stop_once_active = received
    try:
        yield received
    finally:
        _stop_once_active = None
        for s in taken:
            if received:
                signal.signal(s, signal.SIG_IGN)
            elif previous[s] is not None:  # None: set outside Python, nothing we can put back
                signal.signal(s, previous[s])


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM back while the block runs, then deliver each that came, once, to the
    handler that was there before (main thread only; an ignored signal stays ignored).

    For a step that must not stop halfway (`Node.close`): Ctrl-C during it
    still interrupts the program, but after the step, not inside it.
    """
    came: list[int] = []
    try:
        with _recorded() as came:
            yield
    finally:
        for s in dict.fromkeys(came):
            signal.raise_signal(s)


def wait_for_signal(timeout: float | None = None, wake: int | None = None) -> None:
    """Sleep in the main thread until a signal's handler raises (SIGINT, or SIGTERM after
    `catch_sigterm` or inside `stop_once`), ``timeout`` seconds pass, or the file descriptor
    ``wake`` becomes readable (another thread writes to a pipe to end the wait).

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
            ready, _, _ = select.select([read_end] if wake is None else [read_end, wake], [], [], left)
            if wake is not None and wake in ready:
                return
            if ready:
                os.read(read_end, 512)  # a handler without a raise (SIGCHLD, ...) just runs: wait again
            elif deadline is not None:
                return
    finally:
        signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)


class _Closable(Protocol):
    def close(self) -> None: ...


def run_forever(node: _Closable, *, on_ready: Callable[[], None] | None = None, timeout: float | None = None) -> int:
    """Serve until SIGINT or SIGTERM, then close ``node``; returns the exit status the shell
    expects (130 or 143), for ``sys.exit(actors.run_forever(node))``.

    The loop every embedding program that serves until it is told to stop
    would write, with the three pieces above in their places: `stop_once`
    around it all (the first signal ends the wait, and a second one, Ctrl-C
    pressed again, cannot cut the close in half), `wait_for_signal` for the
    wait (woken whichever thread the kernel gave the signal to), and the
    close after it.  Once a signal came, both stay ignored until the process
    exits.  The node is closed also when the wait ends another way.

    ``on_ready`` is called once the stop signals are handled here: where a
    program prints its ready line or tells its supervisor it is up (systemd's
    ``READY=1``), as a signal sent after it is sure to stop the program this
    way.  ``timeout`` bounds the wait, for a run of fixed length: then the
    node is closed and the status is 0.  Main thread only: Python runs signal
    handlers nowhere else.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("run_forever runs in the main thread, where Python runs signal handlers")
    status = 0
    with stop_once():
        try:
            if on_ready is not None:
                on_ready()
            wait_for_signal(timeout)
        except KeyboardInterrupt as exc:
            status = exit_status(exc)
        finally:
            try:
                node.close()
            except KeyboardInterrupt as exc:  # the first signal came during the close after a timed wait:
                status = exit_status(exc)  # `held` delivered it once the node was closed
    return status
