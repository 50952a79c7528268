"""The thread and mailbox of one actor, and the loop that feeds its cell.

A cell (`actors._core.cell.cell.Cell`) is the kernel's side of an actor; this
module gives it a thread, a mailbox and the loop between them, and owns that
loop outright: the kernel puts its entries in the mailbox as bare tuples
(`actors._core.cell.entries`), and the loop hands them to the cell with no
envelope, no proxy checks and no registry.  Three variants: the plain
thread, one with a bounded mailbox (`actors._core.runtime.mailbox`), and one
that reads the host's endpoint itself while idle
(`actors._core.transport.endpoint_loan`).

The thread knows the cell only as a `ThreadOwner`: what it calls on it.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from typing import Any, Protocol

from actors._core.cell.entries import ENDPOINT_BACK, IDLE_TIMEOUT
from actors._core.runtime.mailbox import BoundedInbox, MailboxLimit
from actors._core.runtime.runtime import Runtime, set_current_cell
from actors._core.transport.endpoint_loan import LENT_MAIL, LENT_REFUSED, EndpointLoan

__all__ = ["ActorThread", "BoundedThread", "LendingThread", "ThreadOwner"]


log = logging.getLogger("actors")
_thread_numbers = itertools.count(1)


class ThreadOwner(Protocol):
    """What an actor thread needs of its cell."""

    runtime: Runtime
    alive: bool
    #: Seconds to wait for a message before ``handle_info("timeout")`` (None: for ever).
    idle_timeout: float | None
    server: Any

    def _boot(self) -> None:
        """Register, run ``init``, then ``handle_continue`` (first thing on the thread)."""

    def _handle(self, message: tuple[int, Any, Any]) -> None:
        """Handle one mailbox entry of the kernel's."""

    def _admitted(self, entries: list[tuple[Any, Any]]) -> None:
        """Parked messages of a bounded mailbox got in."""


class _Gone:
    """What a dead cell holds in place of its behaviour once its thread has ended.

    Nothing calls into it: a dead cell's loop is over (`Cell._finish` returns at
    once for a cell that is not alive), and `CellState.info` only names its class.
    """


_GONE = _Gone()


class ActorThread:
    """The thread and mailbox of one actor, and the loop that feeds the cell.

    The kernel owns this loop outright: entries are the kernel's bare tuples
    (no envelope, no proxy checks), the wait honours the callback's
    `Timeout`, and nothing is registered anywhere (cells are found through
    their runtime).
    """

    def __init__(self, cell: "ThreadOwner") -> None:
        self._cell = cell
        #: The mailbox: ``(kind, body, from_)`` tuples (`actors._core.cell.entries`).
        self.actor_inbox: Any = self._new_inbox()
        #: Set when the actor is done: the loop ends after the entry in hand.
        self.actor_stopped = threading.Event()

    @staticmethod
    def _new_inbox() -> Any:
        return queue.SimpleQueue()

    def start(self) -> None:
        """Run the loop on a new daemon thread."""
        thread = threading.Thread(target=self.run, name=f"{type(self).__name__}-{next(_thread_numbers)}", daemon=True)
        thread.start()

    def stop(self) -> None:
        """End the loop once the entry in hand is handled (any thread)."""
        self.actor_stopped.set()

    def run(self) -> None:
        """The actor's thread: boot the cell, feed it its mailbox, then let it go."""
        cell = self._cell
        set_current_cell(cell)  # type: ignore[arg-type]  # the runtime names the whole Cell, built above
        try:
            self._setup()
            self._running()
            self._teardown()
        finally:
            cell.runtime.end_actor_thread()
            set_current_cell(None)
            self._cell = None  # type: ignore[assignment]  # break the cycle
            if not cell.alive:
                # The behaviour and its cell point at each other: left so, a
                # dead actor's state (an open file, a big table) waits for the
                # cyclic collector, which in a long-lived heap runs rarely.
                # Its thread is done with it, so let it go now.
                cell.server = _GONE

    def _setup(self) -> None:
        cell = self._cell
        try:
            try:
                cell._boot()
            finally:
                cell.runtime.flush_casts()
        except Exception:  # noqa: BLE001 - the cell's boot reports its own failures; this is a kernel bug
            log.exception("actor thread %s: unhandled exception while starting; the actor stops", self)
            self.actor_stopped.set()

    def _running(self) -> None:
        cell = self._cell
        get = self.actor_inbox.get
        stopped = self.actor_stopped
        dispatch = self._dispatch
        while not stopped.is_set():
            wait = cell.idle_timeout
            if wait is None:
                item = get()
            else:
                try:
                    item = get(timeout=wait)
                except queue.Empty:  # idle for the callback's Timeout
                    item = IDLE_TIMEOUT
            dispatch(item)

    def _dispatch(self, item: tuple[int, Any, Any]) -> None:
        """One mailbox entry to the cell; the casts its callback made leave now."""
        try:
            self._cell._handle(item)
        finally:
            self._cell.runtime.flush_casts()

    def _teardown(self) -> None:
        """Drop what is left: no entry needs an answer (the cell's death
        already failed its pending calls)."""
        inbox = self.actor_inbox
        while not inbox.empty():
            inbox.get()


class BoundedThread(ActorThread):
    """An actor thread whose mailbox is bounded (`actors._core.runtime.mailbox`)."""

    def __init__(self, cell: "ThreadOwner", limit: MailboxLimit) -> None:
        self._limit = limit
        self._admit = cell._admitted
        super().__init__(cell)

    def _new_inbox(self) -> Any:  # type: ignore[override]
        return BoundedInbox(self._limit, self._admit)


class LentInbox(queue.SimpleQueue[Any]):
    """A mailbox whose reader may be blocked in a poll of the process's
    endpoint rather than in the queue: a put then signals the poll."""

    def __init__(self) -> None:
        self.loan: EndpointLoan | None = None

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        queue.SimpleQueue.put(self, item)
        loan = self.loan
        if loan is not None and loan.waiting:
            loan.signal()

    put_nowait = put


class LendingThread(ActorThread):
    """An actor thread that reads the process's endpoint itself while idle
    (`actors._core.transport.endpoint_loan`): the first actor of a host, whose requests
    then skip the hand-off from the I/O thread."""

    @staticmethod
    def _new_inbox() -> Any:
        return LentInbox()

    def __init__(self, cell: "ThreadOwner") -> None:
        super().__init__(cell)
        inbox = self.actor_inbox
        self._loan = cell.runtime.lend_endpoint(lambda: inbox.put(ENDPOINT_BACK))
        inbox.loan = self._loan

    def run(self) -> None:
        if self._loan is not None:
            # Known before init runs: a registration in init is a system
            # request, and the endpoint must be handed over for its answer.
            self._loan.bind_thread()
        super().run()

    def _running(self) -> None:
        loan = self._loan
        if loan is None:  # lent to another thread already
            super()._running()
            return
        try:
            self._lending_loop(loan)
        finally:
            self.actor_inbox.loan = None
            loan.end()

    def _lending_loop(self, loan: EndpointLoan) -> None:
        cell = self._cell
        inbox = self.actor_inbox
        get = inbox.get
        get_nowait = inbox.get_nowait
        has_mail = lambda: not inbox.empty()  # noqa: E731
        stopped = self.actor_stopped
        dispatch = self._dispatch
        serve = loan.serve
        idle_until: float | None = None  # when handle_info("timeout") is due
        while not stopped.is_set():
            if inbox.empty():
                wait = cell.idle_timeout
                if wait is not None and idle_until is None:
                    idle_until = time.monotonic() + wait
                left = None if idle_until is None else max(0.0, idle_until - time.monotonic())
                got = serve(left, has_mail)
                if got == LENT_MAIL:
                    pass
                elif got == LENT_REFUSED:
                    try:
                        item = get(timeout=left)
                    except queue.Empty:
                        item = IDLE_TIMEOUT
                    if item is ENDPOINT_BACK:
                        continue
                    idle_until = None
                    dispatch(item)
                    continue
                else:  # idle for the callback's Timeout
                    idle_until = None
                    dispatch(IDLE_TIMEOUT)
                    continue
            item = get_nowait()
            if item is ENDPOINT_BACK:
                continue
            idle_until = None
            dispatch(item)
