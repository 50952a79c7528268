"""One actor's kernel state and its generic gen_server loop.

A `Cell` owns what Erlang keeps in a process: mailbox, links, monitors,
the exit-trapping flag and the calls it has not answered yet.  The mailbox
and thread are a pykka `ThreadingActor`; the cell's `_handle` is the one
generic loop of OTP's `gen_server.erl`: it receives, dispatches to the thin
user callbacks through a single wrapper that turns every exception or odd
return into a stop reason, sends replies, and terminates.

Death is a one-way transition under the cell lock, so a call that races with
it is either answered by the actor or failed with the exit reason, never lost.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from bisect import bisect_left
from time import perf_counter
from typing import TYPE_CHECKING, Any, Callable

import pykka

from actors._core.transport.endpoint_loan import LENT_MAIL, LENT_REFUSED, EndpointLoan
from actors._core.runtime.mailbox import ACCEPTED, DROPPED, MAILBOX_FULL, PARKED, Admit, BoundedInbox, MailboxLimit
from actors._core.runtime.meter import CALL_BOUNDS, Meter
from actors._core.wire.reasons import Continue, Exit, Stop, Timeout, crash_from, ignore, is_normal_exit, noreply
from actors._core.wire.ref import ActorRef, From
from actors._core.runtime.runtime import EXIT_KILL, EXIT_LINKED, K_CALL, K_CAST, K_INFO, K_STOP, set_current_cell

if TYPE_CHECKING:
    from actors._core.runtime.runtime import Runtime

log = logging.getLogger("actors")

# Mailbox entry kinds beyond the wire kinds.
_M_EXIT = 100
_M_DOWN = 101
_M_WAKE = 102
_M_CONTINUE = 103
_M_BATCH = 104
#: What an actor idle past its callback's `Timeout` handles: ``handle_info("timeout")``.
_IDLE_TIMEOUT = (K_INFO, "timeout", None)

_TRUNCATE = 2000


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _TRUNCATE else text[:_TRUNCATE] + "..."


class Behaviour:
    """What a cell drives: the callbacks of one actor.

    `actors._core.cell.gen_server.GenServer` is the behaviour users subclass; this base
    lives here, below it, so that the cell and the spawner can name it.
    Its subclass provides ``_gen_init``, ``handle_call``, ``handle_cast``,
    ``handle_info``, ``handle_continue`` and ``terminate``.
    """

    _actor_cell: "Cell"


class _Gone:
    """What a dead cell holds in place of its behaviour once its thread has ended."""

    def terminate(self, reason: Any) -> None:
        pass


_GONE = _Gone()


class _ActorThread(pykka.ThreadingActor):
    """The pykka actor that gives a cell its thread and mailbox."""

    use_daemon_thread = True

    @staticmethod
    def _create_actor_inbox() -> Any:
        return queue.SimpleQueue()

    def __init__(self, cell: "Cell") -> None:
        super().__init__()
        self._cell = cell

    def _actor_loop(self) -> None:
        cell = self._cell
        set_current_cell(cell)
        try:
            super()._actor_loop()
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

    def _actor_loop_running(self) -> None:
        """pykka's loop, trimmed for the message path: the kernel puts its
        entries in the inbox as bare tuples (no envelope, no proxy checks);
        pykka's own entries (its stop) still go through pykka."""
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
                    item = _IDLE_TIMEOUT
            dispatch(item)

    def _dispatch(self, item: Any) -> None:
        """One mailbox entry: the kernel's (a bare tuple) to the cell, pykka's to pykka."""
        if type(item) is tuple:
            try:
                self._cell._handle(item)
            finally:
                self._cell.runtime.flush_casts()  # casts made by the callback leave now
            return
        try:
            self._handle_receive(item.message)
        except Exception:  # noqa: BLE001 - as pykka: a failing entry stops the actor
            self._handle_failure(*sys.exc_info())
            self._stop()

    def _actor_loop_teardown(self) -> None:
        """Drop what is left: the kernel's own entries need no answer (the
        cell's death already failed its pending calls); pykka's get pykka's."""
        inbox = self.actor_inbox
        while not inbox.empty():
            item = inbox.get()
            if type(item) is not tuple and item.reply_to is not None:
                item.reply_to.set(None)  # only pykka's stop asks for an answer here

    def on_start(self) -> None:
        cell = self._cell
        try:
            cell._boot()
        finally:
            cell.runtime.flush_casts()

    def on_receive(self, message: Any) -> None:
        cell = self._cell
        try:
            cell._handle(message)
        finally:
            cell.runtime.flush_casts()


class _BoundedThread(_ActorThread):
    """An actor thread whose mailbox is bounded (`actors._core.runtime.mailbox`)."""

    def __init__(self, cell: "Cell", limit: MailboxLimit) -> None:
        self._limit = limit
        self._admit = cell._admitted
        super().__init__(cell)

    def _create_actor_inbox(self) -> Any:  # type: ignore[override]
        return BoundedInbox(self._limit, self._admit)


class _LentInbox(queue.SimpleQueue):
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


#: Put in a borrower's mailbox when the I/O thread gives the endpoint back.
_ENDPOINT_BACK = (_M_WAKE, None, None)


class _LendingThread(_ActorThread):
    """An actor thread that reads the process's endpoint itself while idle
    (`actors._core.transport.endpoint_loan`): the first actor of a host, whose requests
    then skip the hand-off from the I/O thread."""

    @staticmethod
    def _create_actor_inbox() -> Any:
        return _LentInbox()

    def __init__(self, cell: "Cell") -> None:
        super().__init__(cell)
        inbox = self.actor_inbox
        self._loan = cell.runtime.lend_endpoint(lambda: inbox.put(_ENDPOINT_BACK))
        inbox.loan = self._loan

    def _actor_loop(self) -> None:
        if self._loan is not None:
            # Known before init runs: a registration in init is a system
            # request, and the endpoint must be handed over for its answer.
            self._loan.bind_thread()
        super()._actor_loop()

    def _actor_loop_running(self) -> None:
        loan = self._loan
        if loan is None:  # lent to another thread already
            super()._actor_loop_running()
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
                        item = _IDLE_TIMEOUT
                    if item is _ENDPOINT_BACK:
                        continue
                    idle_until = None
                    dispatch(item)
                    continue
                else:  # idle for the callback's Timeout
                    idle_until = None
                    dispatch(_IDLE_TIMEOUT)
                    continue
            item = get_nowait()
            if item is _ENDPOINT_BACK:
                continue
            idle_until = None
            dispatch(item)


class Cell:
    """The kernel side of one actor."""

    def __init__(
        self,
        runtime: "Runtime",
        actor_id: str,
        server: Behaviour,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        name: str | None,
        parent: ActorRef | None,
        link_parent: bool,
        on_started: Callable[[str, Any], None],
        read_endpoint: bool = False,
        mailbox: MailboxLimit | None = None,
    ) -> None:
        self.runtime = runtime
        self.id = actor_id
        self.name = name
        self.ref = runtime.make_ref(actor_id, name)
        self.server = server
        self.parent = parent
        self._args = args
        self._kwargs = kwargs
        self._on_started = on_started
        self.lock = threading.Lock()
        self.alive = True
        self.started = False
        self.trap_exit = False
        self.exit_reason: Any = None
        self.links: dict[ActorRef, ActorRef] = {}  # keyed by ref: ids repeat across nodes
        if parent is not None and link_parent:
            self.links[parent] = parent
        self.monitors_in: dict[Any, ActorRef] = {}
        self.monitors_out: dict[Any, ActorRef] = {}
        self.inflight: dict[tuple[str, int], From] = {}
        self._stop_reason: Any = None
        self._stop_requested = False
        self._pending_stop_reply: list[tuple[From, Any]] = []
        # A registration under way on the actor thread, and the death notice
        # that waits for it (see `claim_name`).
        self._naming: str | None = None
        self._after_naming: Callable[[], None] | None = None
        self.messages_handled = 0
        #: Calls, casts and call durations (`actors._core.runtime.meter`), written by the actor thread only.
        self.meter = Meter()
        #: Entries of the mailbox batch being handled that are still to come.
        self.batch_left = 0
        #: The actor thread's cast batches (set when its loop starts).
        self.outbox: Any = None
        #: Seconds the loop waits for a message before ``handle_info("timeout")``:
        #: the `Timeout` the last callback returned (None: wait for ever).
        self.idle_timeout: float | None = None
        server._actor_cell = self
        #: The mailbox's bound (None: unbounded, as in Erlang).
        self.limit = mailbox
        if mailbox is not None:
            # Senders learn from the ref that they must wait for room.
            self.ref.blocks = mailbox.overflow == "block"
            self._thread: _ActorThread = _BoundedThread(self, mailbox)
        elif read_endpoint:
            # The first actor of a host reads the host's endpoint while idle.
            self._thread = _LendingThread(self)
        else:
            self._thread = _ActorThread(self)
        self.inbox = self._thread.actor_inbox

    def start(self, run_on: Callable[[Callable[[], None]], None] | None = None) -> None:
        """Start the actor's loop on a new thread, or through ``run_on``
        (a thread started ahead of time, see `actors._core.cell.spawn.WarmThread`)."""
        self.runtime.cells[self.id] = self
        # pykka registers every started actor globally; ours are found through
        # the node instead, so keep pykka's registry from holding dead cells.
        pykka.ActorRegistry.register(self._thread.actor_ref)
        if run_on is None:
            self._thread._start_actor_loop()
        else:
            run_on(self._thread._actor_loop)

    def info(self) -> dict[str, Any]:
        limit = self.limit
        return {
            "id": self.id,
            "name": self.name,
            "class": type(self.server).__name__,
            "mailbox": self.inbox.qsize(),
            "links": len(self.links),
            "monitors": len(self.monitors_in),
            "trap_exit": self.trap_exit,
            "handled": self.messages_handled,
            "pid": self.runtime.pid,
            "proc": self.runtime.proc,
            "parent": self.parent.id if self.parent else None,
            "status": self.server.status() if hasattr(self.server, "status") else None,
            "mailbox_limit": None if limit is None else limit.size,
            "overflow": None if limit is None else limit.overflow,
            "dropped": 0 if limit is None else self.inbox.dropped,
        }

    # -- mailbox (any thread) ------------------------------------------------------

    def mailbox_empty(self) -> bool:
        """Whether nothing waits for this actor: in its mailbox, nor, when it
        reads its host's endpoint itself, on the endpoint (handed on first)."""
        if self.batch_left:  # the rest of the entry being handled
            return False
        inbox = self.inbox
        if not inbox.empty():
            return False
        loan = getattr(inbox, "loan", None)
        if loan is not None and loan.take_in():
            return inbox.empty()
        return True

    def enqueue(self, kind: int, body: Any) -> None:
        if self.limit is not None:
            if kind == K_CAST or kind == K_INFO:
                self._offer((kind, body, None))
                return
        if self.alive:
            self.inbox.put((kind, body, None))

    def enqueue_batch(self, items: list[tuple[int, Any, Any]], calls: list[From]) -> list[From]:
        """What one read of the endpoint brought this actor -- casts, sends
        and calls, in arrival order -- as one mailbox entry, so the actor is
        woken once for the lot; ``calls`` are the callers among ``items``.
        Returns the calls refused because the actor is dead (the caller
        answers them ``noproc``, as `enqueue_call`'s)."""
        if self.limit is not None:
            if not self.alive:
                return calls
            for item in items:
                self._offer(item)
            return []
        if not calls:
            if self.alive:
                self._put_items(items)
            return calls
        with self.lock:
            if not self.alive:
                return calls
            inflight = self.inflight
            for from_ in calls:
                inflight[(from_.proc, from_.ref)] = from_
            self._put_items(items)
        return []

    def _put_items(self, items: list[tuple[int, Any, Any]]) -> None:
        if len(items) == 1:
            self.inbox.put(items[0])
        else:
            self.inbox.put((_M_BATCH, items, None))

    def enqueue_call(self, kind: int, body: Any, from_: From) -> bool:
        if self.limit is not None and kind == K_CALL:
            if not self.alive:
                return False
            self._offer((kind, body, from_))
            return True
        with self.lock:
            if not self.alive:
                return False
            self.inflight[(from_.proc, from_.ref)] = from_
            self.inbox.put((kind, body, from_))
            return True

    # -- the bounded mailbox (`actors._core.runtime.mailbox`) -------------------------------------------

    def _offer(self, entry: tuple[int, Any, Any]) -> None:
        """A user message for a bounded mailbox: in, parked, or dropped by
        the policy (a dropped call fails with ``mailbox_full``)."""
        kind, body, from_ = entry
        admission = None
        timeout = None
        if kind == K_CALL and type(body) is Admit:
            # A sender that waits for room: a cast/send answered once it is
            # in, or a call answered as calls are.
            admission, timeout = from_, body.timeout
            entry = (body.kind, body.body, from_ if body.kind == K_CALL else None)
        refused: list[From] = []
        admitted: From | None = None
        with self.lock:
            if not self.alive:
                refused_dead = from_
            else:
                refused_dead = None
                if from_ is not None:
                    self.inflight[(from_.proc, from_.ref)] = from_
                outcome, other = self.inbox.offer(entry, admission)
                if outcome == ACCEPTED:
                    if admission is not None and entry[2] is None:
                        admitted = admission
                        self.inflight.pop((admission.proc, admission.ref), None)
                    if other is not None:
                        self._count_drop()
                        if other[2] is not None:
                            refused.append(other[2])
                elif outcome == DROPPED:
                    self._count_drop()
                    if from_ is not None:
                        refused.append(from_)
                elif outcome == PARKED and timeout is not None:
                    self.runtime.call_later(timeout, lambda: self._expire(admission))
                for gone in refused:
                    self.inflight.pop((gone.proc, gone.ref), None)
        rt = self.runtime
        if refused_dead is not None:
            rt.reply_exit(refused_dead, "noproc")
        if admitted is not None:
            rt.reply(admitted, None)
        for gone in refused:
            rt.reply_exit(gone, MAILBOX_FULL)

    def _count_drop(self) -> None:
        self.runtime.stats.increment("actors.mailbox.dropped")

    def _admitted(self, entries: list[tuple[Any, Any]]) -> None:
        """Parked messages got in (actor thread): their senders go on."""
        acks: list[From] = []
        with self.lock:
            for entry, admission in entries:
                if entry[2] is None:  # a cast or send: answered now
                    self.inflight.pop((admission.proc, admission.ref), None)
                    acks.append(admission)
        for admission in acks:
            self.runtime.reply(admission, None)

    def _expire(self, admission: From) -> None:
        """A parked message's time ran out (I/O thread): its sender hears ``mailbox_full``."""
        with self.lock:
            entry = self.inbox.unpark(admission)
            if entry is None:
                return
            self.inflight.pop((admission.proc, admission.ref), None)
        self._count_drop()
        self.runtime.reply_exit(admission, MAILBOX_FULL)

    # -- signals (any thread) --------------------------------------------------------

    def exit_signal(self, sender: ActorRef | None, reason: Any, how: int) -> None:
        """Erlang's exit-signal rules; the decision is made on arrival.

        ``how`` is `EXIT_LINKED` for a linked actor's death (which ends the
        link), else the signal of ``exit/2`` (the link, if any, stays).  An
        ``exit/2`` ``kill`` is untrappable; a linked actor that died with
        reason ``kill`` sends an ordinary signal (trappable; a non-trapping
        receiver dies with reason ``kill`` and passes it on, as in Erlang).  ``normal`` is ignored by a non-trapping
        receiver, except ``exit(self(), normal)``, which ends it."""
        linked = how == EXIT_LINKED
        if linked and sender is not None:
            with self.lock:
                self.links.pop(sender, None)
        if how == EXIT_KILL or (reason == "kill" and not linked):
            self.die("killed")
            return
        if self.trap_exit:
            self.enqueue(_M_EXIT, (sender, reason))
            return
        if reason == "normal" and sender != self.ref:
            return
        self.die(reason)

    def add_link(self, other: ActorRef) -> bool:
        with self.lock:
            if not self.alive:
                return False
            self.links[other] = other
            return True

    def remove_link(self, other: ActorRef) -> None:
        with self.lock:
            self.links.pop(other, None)

    def add_monitor(self, mref: Any, watcher: ActorRef) -> bool:
        with self.lock:
            if not self.alive:
                return False
            self.monitors_in[mref] = watcher
            return True

    def remove_monitor(self, mref: Any) -> None:
        with self.lock:
            self.monitors_in.pop(mref, None)

    def down(self, mref: Any, target: ActorRef, reason: Any) -> None:
        self.enqueue(_M_DOWN, (mref, target, reason))

    def proc_down(self, proc: str, reason: Any) -> None:
        with self.lock:
            linked = [r for r in self.links.values() if r.proc == proc]
            for r in [w for w in self.monitors_in.items() if w[1].proc == proc]:
                del self.monitors_in[r[0]]
            watched = [(m, r) for m, r in self.monitors_out.items() if r.proc == proc]
        for mref, target in watched:
            self.down(mref, target, reason)
        for ref in linked:
            self.exit_signal(ref, reason, EXIT_LINKED)

    # -- the generic loop (actor thread) ------------------------------------------------

    def _boot(self) -> None:
        """Register, run ``init``, tell the spawner, then ``handle_continue``."""
        if self.name is not None:
            try:
                holder = self.claim_name(self.name)
            except Exception as exc:  # registry unreachable
                self._fail_start(("error", crash_from(exc)))
                return
            if holder is not None:
                self._fail_start(("already_registered", holder))
                return
        try:
            result = self.server._gen_init(*self._args, **self._kwargs)
        except Exit as exc:
            self._fail_start(("error", exc.reason))
            return
        except BaseException as exc:  # noqa: BLE001 - any init failure is a start error
            self._fail_start(("error", crash_from(exc)))
            return
        if result is ignore:
            self._fail_start(("ignore", None))
            return
        if isinstance(result, Stop):
            self._fail_start(("error", result.reason))
            return
        self.started = True
        self._args = self._kwargs = None  # type: ignore[assignment]
        on_started, self._on_started = self._on_started, None  # type: ignore[assignment]
        on_started("ok", self.ref)
        if self._stop_requested:
            self._finish(self._stop_reason, run_terminate=True)
        elif isinstance(result, Continue):
            self._handle_one((_M_CONTINUE, result.arg, None))
        elif type(result) is Timeout:
            self.idle_timeout = result.seconds

    def _fail_start(self, outcome: tuple[str, Any]) -> None:
        kind, detail = outcome
        with self.lock:
            self.alive = False
            self.links.clear()
            inflight = list(self.inflight.values())
            self.inflight.clear()
        self.exit_reason = "normal" if kind == "ignore" else detail
        if self.name is not None and kind != "already_registered":
            try:
                self.runtime.unregister_name(self.name, self.ref)
            except Exception:
                log.debug("could not unregister %s", self.name)
        self.runtime.meters.retire(self.runtime.cells, self, exited=False)
        for from_ in inflight:
            self.runtime.reply_exit(from_, "noproc")
        self._thread._stop()
        on_started, self._on_started = self._on_started, None  # type: ignore[assignment]
        on_started(kind, detail)
        self._gone()

    def _handle(self, message: tuple[int, Any, Any]) -> None:
        if message[0] == _M_BATCH:
            items = message[1]
            left = len(items)
            try:
                for item in items:
                    if not self.alive:
                        return
                    left -= 1
                    self.batch_left = left
                    self._handle_one(item)
            finally:
                self.batch_left = 0
        else:
            self._handle_one(message)

    def _handle_one(self, message: tuple[int, Any, Any]) -> None:
        if not self.alive:
            return
        kind, body, from_ = message
        server = self.server
        self.messages_handled += 1
        self.idle_timeout = None  # a message came: the last callback's Timeout is off
        try:
            if kind == K_CALL:
                meter = self.meter
                meter.calls += 1
                started = perf_counter()
                result = server.handle_call(body, from_)
                took = perf_counter() - started
                meter.call_seconds += took
                meter.buckets[bisect_left(CALL_BOUNDS, took)] += 1
                then: Continue | None = None  # handle_continue after the reply
                if type(result) is Timeout:
                    self.idle_timeout = result.seconds
                    result = result.reply
                elif type(result) is Continue:
                    then, result = result, result.reply
                if isinstance(result, Stop):
                    # No reply given: the call stays in flight and fails
                    # with the exit reason, as OTP's {stop, Reason, State}.
                    reply = None if result.reply is noreply else (from_, result.reply)
                    self._finish(result.reason, run_terminate=True, reply=reply)
                    return
                if result is noreply:
                    pass
                elif self._stop_requested:
                    self._finish(self._stop_reason, run_terminate=True, reply=(from_, result))
                    return
                elif self.alive:
                    self._reply(from_, result)
                    if then is None:
                        return
                if then is not None:
                    result = then
            elif kind == K_CAST:
                self.meter.casts += 1
                result = server.handle_cast(body)
            elif kind == K_INFO:
                result = server.handle_info(body)
            elif kind == _M_CONTINUE:
                result = server.handle_continue(body)
            elif kind == _M_EXIT:
                sender, reason = body
                if sender is not None and self.parent is not None and sender == self.parent:
                    # A gen_server trapping exits terminates when its parent
                    # (its supervisor) tells it to.
                    self._finish(reason, run_terminate=True)
                    return
                result = server.handle_info(("EXIT", sender, reason))
            elif kind == _M_DOWN:
                mref, target, reason = body
                with self.lock:
                    known = self.monitors_out.pop(mref, None) is not None
                if not known:
                    return  # demonitored meanwhile: flushed
                result = server.handle_info(("DOWN", mref, target, reason))
            elif kind == K_STOP:
                self._finish(body, run_terminate=True, stop_reply=from_)
                return
            elif kind == _M_WAKE:
                return
            else:
                return
        except Exit as exc:
            self._finish(exc.reason, run_terminate=True)
            return
        except BaseException as exc:  # noqa: BLE001 - the wrapper turns every failure into a reason
            self._finish(crash_from(exc), run_terminate=True, crashed_in=(kind, body))
            return
        if self._stop_requested:
            self._finish(self._stop_reason, run_terminate=True)
        elif isinstance(result, Stop):
            self._finish(result.reason, run_terminate=True)
        elif isinstance(result, Continue) and self.alive:
            self._handle_one((_M_CONTINUE, result.arg, None))
        elif type(result) is Timeout:
            self.idle_timeout = result.seconds

    def _reply(self, from_: From, value: Any) -> None:
        with self.lock:
            self.inflight.pop((from_.proc, from_.ref), None)
        self.runtime.reply(from_, value)

    def reply(self, from_: From, value: Any) -> None:
        """Deferred reply (``gen_server:reply``)."""
        if self.alive or from_ in [p[0] for p in self._pending_stop_reply]:
            self._reply(from_, value)

    def request_stop(self, reason: Any) -> None:
        self._stop_requested = True
        self._stop_reason = reason

    def _finish(
        self,
        reason: Any,
        run_terminate: bool,
        reply: tuple[From, Any] | None = None,
        stop_reply: From | None = None,
        crashed_in: tuple[int, Any] | None = None,
    ) -> None:
        """Terminate (in the actor thread), then die and tell everyone."""
        if not self.alive:
            return
        if run_terminate:
            try:
                self.server.terminate(reason)
            except Exit as exc:
                reason = exc.reason
            except BaseException as exc:  # noqa: BLE001
                reason = crash_from(exc)
        if not is_normal_exit(reason):
            log.error(
                "actor %s (%s) terminating: reason=%s last_message=%s",
                self.name or self.id,
                type(self.server).__name__,
                _short(reason),
                _short(crashed_in[1]) if crashed_in else None,
                extra={"actor": self.id, "actor_name": self.name, "reason": reason},
            )
            tb = getattr(reason, "traceback", "")
            if tb:
                log.debug("traceback of %s:\n%s", self.id, tb)
        if reply is not None:
            with self.lock:
                self.inflight.pop((reply[0].proc, reply[0].ref), None)
        if stop_reply is not None:
            with self.lock:
                self.inflight.pop((stop_reply.proc, stop_reply.ref), None)
        self.die(reason, reply=reply, stop_reply=stop_reply)

    # -- death (any thread) ------------------------------------------------------------

    def die(
        self,
        reason: Any,
        reply: tuple[From, Any] | None = None,
        stop_reply: From | None = None,
    ) -> None:
        rt = self.runtime

        def notify(_ok: bool = True, _value: Any = None) -> None:
            outbox = self.outbox
            if outbox is not None:
                # What the actor sent before it died goes before any word of
                # its death (it may die on another thread: a kill).
                rt.flush_outbox(outbox)
            if reply is not None:
                rt.reply(reply[0], reply[1])
            for from_ in inflight:
                rt.reply_exit(from_, reason)
            for mref, target in watched:
                rt.request_demonitor(target, mref)
            for ref in links:
                rt.send_exit(ref, self.ref, reason)
            for mref, watcher in watchers:
                rt.send_down(watcher, mref, self.ref, reason)
            if stop_reply is not None:
                rt.reply(stop_reply, reason)
            self._gone()

        with self.lock:
            if not self.alive:
                return
            self.alive = False
            self.exit_reason = reason
            inflight = list(self.inflight.values())
            self.inflight.clear()
            links = list(self.links.values())
            self.links.clear()
            watchers = list(self.monitors_in.items())
            self.monitors_in.clear()
            watched = list(self.monitors_out.items())
            self.monitors_out.clear()
            name = self.name
            if self._naming is not None:
                # The (still running) callback is taking a name: whether it
                # gets it is not known yet, so the death notice waits for
                # `claim_name` to release it first.
                self._after_naming = notify
                name = notify = None  # type: ignore[assignment]
        rt.meters.retire(rt.cells, self, reason)
        self._thread.actor_stopped.set()
        self.inbox.put((_M_WAKE, None, None))
        if notify is None:
            return
        if name is not None:
            # Unregister before anyone hears of the death, so a supervisor
            # restarting the child can take the name again.
            rt.unregister_name_then(name, self.ref, notify)
        else:
            notify()

    def claim_name(self, name: str) -> ActorRef | None:
        """Register this actor as ``name`` (actor thread); the holder when
        another actor has it.

        Erlang releases a name before the exit signals of its holder go out.
        An actor killed while its callback registers a name must keep that
        order too: `die` then leaves its notice to this method, which first
        gives the name back (if the registry gave it) and only then lets the
        death be heard.  A dead actor takes no name at all.
        """
        with self.lock:
            if not self.alive:
                return None
            self._naming = name
        holder: ActorRef | None = None
        got = False
        try:
            holder = self.runtime.register_name(name, self.ref)
            got = holder is None
        finally:
            with self.lock:
                self._naming = None
                then, self._after_naming = self._after_naming, None
                if then is None and got:
                    self.name = name
                    self.ref.name = name
            if then is not None:
                if got:
                    self.runtime.unregister_name_then(name, self.ref, then)
                else:
                    then()
        return holder

    def adopt_name(self, name: str) -> Any:
        """The actor is given ``name`` from outside (`Node.register`, OTP's
        ``register(Name, Pid)``; the registry holds it already): remember it,
        so that its death releases it.  ``"ok"``; ``"dead"``; or
        ``("named", current)`` when it has another name (one name per actor)."""
        with self.lock:
            if not self.alive:
                return "dead"
            current = self.name if self.name is not None else self._naming
            if current is not None and current != name:
                return ("named", current)
            self.name = name
            self.ref.name = name
            return "ok"

    def drop_name(self, name: str) -> None:
        """``name`` was unregistered (`Node.unregister`): the actor may take another."""
        with self.lock:
            if self.name == name:
                self.name = None
                self.ref.name = None

    def _gone(self) -> None:
        hook = self.runtime.on_cell_gone
        if hook is not None:
            hook(self)
