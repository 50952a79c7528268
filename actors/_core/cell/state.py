"""One actor's kernel state, and its mailbox as senders see it.

A `CellState` holds what Erlang keeps in a process: the mailbox, links,
monitors, the exit-trapping flag and the calls it has not answered yet, all
under one lock, so that a call racing with the actor's death is either taken
in (and answered) or refused with ``noproc``, never lost.  Senders on any
thread put entries in through it; a bounded mailbox's policy
(`actors._core.runtime.mailbox`) is applied here, where the lock is.

What it does with them is above: signals and death in
`actors._core.cell.signals`, the generic gen_server loop in
`actors._core.cell.cell`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any, Callable

from actors._core.cell.entries import M_BATCH
from actors._core.cell.thread import ActorThread, BoundedThread, LendingThread, PooledActor
from actors._core.runtime.mailbox import ACCEPTED, DROPPED, MAILBOX_FULL, PARKED, Admit, MailboxLimit
from actors._core.runtime.meter import Meter
from actors._core.runtime.runtime import K_CALL, K_CAST, K_INFO, Runtime
from actors._core.wire.reasons import CALL_CYCLE
from actors._core.wire.ref import ActorRef, From

__all__ = ["Behaviour", "CellState"]


class Behaviour:
    """What a cell drives: the callbacks of one actor.

    `actors._core.cell.gen_server.GenServer` is the behaviour users subclass; this base
    lives here, below it, so that the cell and the spawner can name it.
    Its subclass provides ``_gen_init``, ``handle_call``, ``handle_cast``,
    ``handle_info``, ``handle_continue`` and ``terminate``.
    """

    _actor_cell: "CellState"
    # What the loop calls (declared for the type checker; `GenServer` defines them).
    _gen_init: Callable[..., Any]
    handle_call: Callable[[Any, From], Any]
    handle_cast: Callable[[Any], Any]
    handle_info: Callable[[Any], Any]
    handle_continue: Callable[[Any], Any]
    terminate: Callable[[Any], None]


class CellState(ABC):
    """The kernel side of one actor: its state and mailbox (see the module's docstring).

    Abstract: the loop its thread runs (`_boot`, `_handle`) is `actors._core.cell.cell.Cell`'s.

    Slotted: a process may hold a hundred thousand cells, and a slot costs
    a pointer where an instance dictionary costs a kilobyte and more."""

    __slots__ = (
        "runtime",
        "id",
        "name",
        "ref",
        "server",
        "parent",
        "_args",
        "_kwargs",
        "_on_started",
        "lock",
        "alive",
        "started",
        "trap_exit",
        "exit_reason",
        "links",
        "monitors_in",
        "monitors_out",
        "inflight",
        "_stop_reason",
        "_stop_requested",
        "_pending_stop_reply",
        "_naming",
        "_after_naming",
        "messages_handled",
        "meter",
        "batch_left",
        "outbox",
        "serving",
        "waiting",
        "idle_timeout",
        "limit",
        "_thread",
        "inbox",
        "sys_state",
        "__weakref__",
    )

    def __init__(
        self,
        runtime: Runtime,
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
        own_thread: bool = False,
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
        #: Suspended, statistics or trace (`actors._core.cell.sysmsg`); None while all are off.
        self.sys_state: Any = None
        #: The call being served (its `From`), whose chain the calls it makes carry (`actors.CallCycle`).
        self.serving: From | None = None
        #: ``[node_id, proc, ref, label]`` of the call this actor waits on now, if any.
        self.waiting: list[Any] | None = None
        #: Seconds the loop waits for a message before ``handle_info("timeout")``:
        #: the `Timeout` the last callback returned (None: wait for ever).
        self.idle_timeout: float | None = None
        server._actor_cell = self
        #: The mailbox's bound (None: unbounded, as in Erlang).
        self.limit = mailbox
        if mailbox is not None:
            # Senders learn from the ref that they must wait for room.
            self.ref.blocks = mailbox.overflow == "block"
        self._thread: ActorThread | PooledActor
        if read_endpoint:
            # The first actor of a host reads the host's endpoint while idle.
            self._thread = LendingThread(self)
        elif not own_thread:
            self._thread = PooledActor(self, runtime.scheduler, mailbox)
        elif mailbox is not None:
            self._thread = BoundedThread(self, mailbox)
        else:
            self._thread = ActorThread(self)
        self.inbox: Any = self._thread.actor_inbox

    @property
    def label(self) -> str:
        """How a `CallCycle` names this actor: its name, else its id."""
        return self.name or self.id

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

    # -- what the actor's thread runs: the loop's (`actors._core.cell.cell.Cell`) ---

    @abstractmethod
    def _boot(self) -> None:
        """Register, run ``init``, tell the spawner, then ``handle_continue``."""

    @abstractmethod
    def _handle(self, message: tuple[int, Any, Any]) -> None:
        """Handle one mailbox entry."""

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
        if calls and self.waiting is not None:
            cycles = [c for c in calls if c.chain is not None and self._closes_cycle(c)]
            if cycles:
                items = [item for item in items if item[2] is None or item[2] not in cycles]
                calls = [c for c in calls if c not in cycles]
                if not items:
                    return []
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
            self.inbox.put((M_BATCH, items, None))

    def _closes_cycle(self, from_: From) -> bool:
        """Whether the call ``from_`` waits, through its chain, on the call
        this actor is waiting on now: then it can never be served, and
        fails at once with `CallCycle` (answered here)."""
        waiting = self.waiting
        chain = from_.chain
        if waiting is None or not chain:
            return False
        node_id, proc, ref = waiting[0], waiting[1], waiting[2]
        for i, link in enumerate(chain):
            if type(link) is list and len(link) == 4 and link[2] == ref and link[1] == proc and link[0] == node_id:
                cycle = [str(step[3]) for step in chain[i:]] + [self.label]
                self.runtime.reply_exit(from_, (CALL_CYCLE, tuple(cycle)))
                return True
        return False

    def enqueue_call(self, kind: int, body: Any, from_: From) -> bool:
        if from_.chain is not None and self._closes_cycle(from_):
            return True
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
        admission: Any = None
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
