"""How one actor runs: on the process's scheduler, or on a thread of its own.

A cell (`actors._core.cell.cell.Cell`) is the kernel's side of an actor;
this module gives it a mailbox and something that feeds the mailbox to it,
and owns that loop outright: the kernel puts its entries in the mailbox as
bare tuples (`actors._core.cell.entries`), and the loop hands them to the
cell with no envelope, no proxy checks and no registry.

Most actors are a `PooledActor`: an object on the process's run queue
(`actors._core.runtime.scheduler`), handled a batch of entries at a time
by whichever worker takes it.  An actor that asked for a thread of its own
(``thread="own"``: thread-affine state, or blocking most of the time) gets an
`ActorThread`, one with a bounded mailbox a `BoundedThread`, and the first
actor of a host a `LendingThread`, which reads the host's endpoint itself
while idle (`actors._core.transport.endpoint_loan`).

Either knows the cell only as a `ThreadOwner`: what it calls on it.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import deque
from typing import Any, Protocol

from actors._core.cell.entries import ENDPOINT_BACK, IDLE_TIMEOUT, M_IDLE
from actors._core.runtime.context import thread_state
from actors._core.runtime.mailbox import BoundedInbox, MailboxLimit
from actors._core.runtime.outbox import Outbox
from actors._core.runtime.runtime import Runtime, Timer, set_current_cell
from actors._core.runtime.scheduler import Scheduler
from actors._core.transport.endpoint_loan import LENT_MAIL, LENT_REFUSED, EndpointLoan

__all__ = ["ActorThread", "BoundedThread", "LendingThread", "PooledActor", "ThreadOwner"]


log = logging.getLogger("actors")
_thread_numbers = itertools.count(1)


class ThreadOwner(Protocol):
    """What an actor thread needs of its cell."""

    runtime: Runtime
    alive: bool
    #: The cell's cast batches (`actors._core.runtime.outbox`): made on its first turn on the pool.
    outbox: Any
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


def _boot(cell: "ThreadOwner") -> bool:
    """Boot ``cell`` on the calling thread and send what its ``init`` cast;
    False when booting raised, which is a kernel bug (the cell reports its
    own failures): the actor stops."""
    try:
        try:
            cell._boot()
        finally:
            cell.runtime.flush_casts()
    except Exception:  # noqa: BLE001 - see above
        log.exception("actor %s: unhandled exception while starting; the actor stops", type(cell.server).__name__)
        return False
    return True


#: Taken to make an actor's mailbox on its first message (rarely contended:
#: two first messages to one actor at once).
_first_mail = threading.Lock()


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

    def first(self, entry: Any) -> None:
        """``handle_continue`` after ``init``: handled at once, on this thread."""
        self._cell._handle(entry)

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
        if not _boot(self._cell):
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


class PooledActor:
    """An actor on the process's scheduler: its mailbox, and its turns.

    It is on the run queue from the moment mail comes to it idle until a
    turn finds its mailbox empty, and a worker runs one turn at a time
    (`turn`): up to the scheduler's ``throughput`` entries, then back to the
    tail of the queue if more waits.  ``_queued`` is held for that whole
    while: whoever takes it (a lock taken without waiting, so an atomic
    test-and-set) submits the actor, and a turn gives it back *before* its
    last look at the mailbox, so mail put meanwhile is never left without a
    turn.  The mailbox is made on the first message, so an actor that was
    never sent anything costs no queue.

    A callback's `Timeout` is a timer on the process's one timer heap (the
    transport's); a message that comes first makes it stale, and a stale
    timer's entry is skipped.
    """

    __slots__ = ("_cell", "_sched", "_q", "_bounded", "_queued", "stopped", "_booting", "idle_timer")

    def __init__(self, cell: "ThreadOwner", scheduler: Scheduler, limit: MailboxLimit | None = None) -> None:
        self._cell = cell
        self._sched = scheduler
        self._q: deque[Any] | None = None
        #: A bounded mailbox (`actors._core.runtime.mailbox`), which wakes this actor on the way in.
        self._bounded: BoundedInbox | None = None
        if limit is not None:
            self._bounded = BoundedInbox(limit, cell._admitted, on_put=self._arrived)
        #: Held while the actor is on the run queue or in a turn.
        self._queued = threading.Lock()
        #: The actor is done: its next turn drops what is left and ends it.
        self.stopped = False
        self._booting = False
        #: The timer of the last callback's `Timeout`, while it is the live one.
        self.idle_timer: Timer | None = None

    # -- the mailbox, as `CellState` sees it (any thread) ----------------------------

    @property
    def actor_inbox(self) -> Any:
        return self._bounded if self._bounded is not None else self

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        # The message path: `_append` written out, one call fewer per message.
        timer = self.idle_timer
        if timer is not None:  # any message ends the wait for the callback's Timeout
            self.idle_timer = None
            timer.cancelled = True
        q = self._q
        if q is None:
            q = self._new_queue()
        q.append(item)
        if self._queued.acquire(False):
            self._sched.submit(self)

    put_nowait = put

    def _append(self, item: Any, first: bool = False) -> None:
        """Into the mailbox (at its head when ``first``), waking the actor;
        the idle timer is left as it is."""
        q = self._q
        if q is None:
            q = self._new_queue()
        if first:
            q.appendleft(item)
        else:
            q.append(item)
        self._wake()

    def _wake(self) -> None:
        """On the run queue, unless it is there or in a turn already."""
        if self._queued.acquire(False):
            self._sched.submit(self)

    def _new_queue(self) -> deque[Any]:
        with _first_mail:  # two first messages at once make one queue
            q = self._q
            if q is None:
                q = self._q = deque()
        return q

    def _arrived(self, item: Any) -> None:
        """An entry got into the bounded mailbox: as `put` does after appending."""
        if item[0] != M_IDLE:
            timer = self.idle_timer
            if timer is not None:
                self.idle_timer = None
                timer.cancelled = True
        self._wake()

    def first(self, entry: Any) -> None:
        """``handle_continue`` after ``init``: the next entry, before any mail
        that came while ``init`` ran."""
        if self._bounded is not None:
            self._bounded.put_first(entry)  # wakes it (`_arrived`)
        else:
            self._append(entry, first=True)

    def empty(self) -> bool:
        if self._bounded is not None:
            return self._bounded.empty()
        return not self._q

    def qsize(self) -> int:
        if self._bounded is not None:
            return self._bounded.qsize()
        q = self._q
        return len(q) if q is not None else 0

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        """Boot on a worker (a spawn answered by the I/O thread)."""
        self._booting = True
        self._queued.acquire()
        self._sched.submit(self)

    def boot_here(self) -> None:
        """Boot on the calling thread: the spawner waits for ``init`` anyway,
        so it runs it itself (as the child) instead of handing it to a worker
        and waiting for the hand-back.  ``handle_continue`` and the mail
        that came meanwhile are left to the pool."""
        self._queued.acquire()
        state = thread_state
        saved = state.cell, state.outbox
        cell = self._cell
        try:
            self._enter()
            self._setup()
        finally:
            cell.outbox = None
            state.cell, state.outbox = saved
        self._turn_done()

    def stop(self) -> None:
        """End the actor after the entry in hand (any thread)."""
        self.stopped = True
        self._wake()

    def label(self) -> str:
        cell = self._cell
        return type(cell.server).__name__ if cell is not None else "PooledActor"

    # -- a turn (a worker) ------------------------------------------------------

    def _enter(self) -> None:
        """Make this thread the actor's for a turn.  Its casts are batched in
        the thread's outbox, which the cell names meanwhile (a kill on
        another thread flushes it before the death is heard)."""
        cell = self._cell
        state = thread_state
        outbox = state.pool_outbox
        if outbox is None:
            outbox = state.pool_outbox = Outbox()
        cell.outbox = outbox
        state.cell = cell  # type: ignore[assignment]  # the runtime names the whole Cell, built above
        state.outbox = outbox

    def _setup(self) -> None:
        if not _boot(self._cell):
            self.stopped = True

    def turn(self) -> None:
        cell = self._cell
        if cell is None:  # ended already
            return
        state = thread_state
        self._enter()
        try:
            if self._booting:
                self._booting = False
                self._setup()
            left = self._sched.throughput
            handle = cell._handle
            flush = cell.runtime.flush_casts
            bounded = self._bounded
            q = self._q
            while left and not self.stopped:
                if bounded is not None:
                    try:
                        item = bounded.get_nowait()
                    except queue.Empty:
                        break
                else:
                    if not q:
                        q = self._q
                        if not q:
                            break
                    item = q.popleft()
                left -= 1
                if item[0] == M_IDLE:
                    if item[1] is not self.idle_timer:
                        continue  # a message came after it was set: stale
                    self.idle_timer = None
                    item = IDLE_TIMEOUT
                try:
                    handle(item)
                finally:
                    flush()
        finally:
            cell.outbox = None
            state.cell = None
            state.outbox = None
        self._turn_done()

    def _turn_done(self) -> None:
        """After a turn: end the actor, queue it again, or leave it idle
        (with its callback's `Timeout` armed)."""
        if self.stopped:
            self._end()
            return
        queued = self._queued
        if not self.empty():
            self._sched.submit(self)  # still ours: straight back to the tail
            return
        queued.release()
        if not self.empty() and queued.acquire(False):
            self._sched.submit(self)  # mail came as it went idle
            return
        cell = self._cell
        wait = cell.idle_timeout if cell is not None else None
        if wait is not None and self.idle_timer is None:
            timer = Timer(time.monotonic() + max(0.0, wait), None, None)
            timer.message = lambda: self._idle_due(timer)
            self.idle_timer = timer
            cell.runtime.add_timer(timer)

    def _idle_due(self, timer: Timer) -> None:
        """The callback's `Timeout` passed (I/O thread): the actor handles
        ``timeout`` unless a message came first."""
        if self.idle_timer is not timer or self.stopped:
            return
        if self._bounded is not None:
            self._bounded.put((M_IDLE, timer, None))  # wakes it (`_arrived`)
        else:
            self._append((M_IDLE, timer, None))

    def _end(self) -> None:
        """Drop what is left (no entry needs an answer: the cell's death
        already failed its pending calls), send what it batched, let go.
        The actor keeps ``_queued``: nothing submits it again."""
        cell = self._cell
        if cell is None:
            return
        self._cell = None  # type: ignore[assignment]  # break the cycle
        self._q = None
        timer = self.idle_timer
        if timer is not None:
            timer.cancelled = True
            self.idle_timer = None
        if not cell.alive:
            cell.server = _GONE
