"""The gen_server behaviour: thin callbacks over the kernel's generic loop."""

from __future__ import annotations

import itertools
import logging
from typing import Any, Callable

from actors._core.cell.cell import Cell
from actors._core.cell.entries import M_EXIT
from actors._core.cell.spawn import spawn as _spawn
from actors._core.cell.state import Behaviour
from actors._core.cell.sysmsg import SysError
from actors._core.runtime.monitor import Monitor
from actors._core.runtime.runtime import Timer
from actors._core.wire import system as sysop
from actors._core.wire.reasons import CallTimeout, Exit
from actors._core.wire.ref import ActorRef, From

__all__ = ["PREVIOUS_HOLDER_WAIT", "GenServer", "UnexpectedMessage"]

log = logging.getLogger("actors")
_mrefs = itertools.count(1)

#: How long the services (ioq, smoosh, couch_jobs, the replicator) registering
#: themselves in ``init`` wait for a previous incarnation to give their name
#: back (`GenServer.register`'s ``wait``).
PREVIOUS_HOLDER_WAIT = 5.0
#: How long `GenServer.monitor` waits for the target's process to take a monitor (seconds).
MONITOR_ACK_WAIT = 10.0


class UnexpectedMessage(Exception):
    """A call or cast reached a server that defines no handler for it."""


class GenServer(Behaviour):
    """Subclass and override the callbacks you need.

    ``init(*args, **kwargs)`` runs in the actor's own thread before any
    message; it may return `actors.Continue`, `actors.ignore` or
    `actors.Stop`.  ``handle_call(request, from_)`` returns the reply (or
    `actors.noreply` and later ``self.reply(from_, value)``).  Raising, or
    returning `actors.Stop`, or calling ``self.stop(reason)`` ends the actor;
    ``terminate(reason)`` then runs, except on ``kill`` and on exit signals
    while not trapping exits.
    """

    _actor_cell: "Cell"

    #: Placed first in a host, the actor reads the host's endpoint itself
    #: while idle, so requests to it skip a thread hand-off (docs/kernel.md,
    #: *The endpoint loan*).  False leaves the reading to the host's I/O
    #: thread, for a server better fed by it (one that works per burst).
    reads_host_endpoint: bool = True

    # -- callbacks ---------------------------------------------------------------

    def init(self, *args: Any, **kwargs: Any) -> Any:
        return None

    def handle_call(self, request: Any, from_: From) -> Any:
        raise UnexpectedMessage(f"{type(self).__name__} got unexpected call {request!r}")

    def handle_cast(self, request: Any) -> Any:
        raise UnexpectedMessage(f"{type(self).__name__} got unexpected cast {request!r}")

    def handle_info(self, message: Any) -> Any:
        log.warning("%s (%s) dropped unexpected message %r", type(self).__name__, self.ref.id, message)
        return None

    def handle_continue(self, arg: Any) -> Any:
        raise UnexpectedMessage(f"{type(self).__name__} got handle_continue({arg!r}) but defines none")

    def terminate(self, reason: Any) -> None:
        return None

    def _gen_init(self, *args: Any, **kwargs: Any) -> Any:
        """What the kernel runs at start; behaviours built on GenServer
        (supervisors) wrap ``init`` here."""
        return self.init(*args, **kwargs)

    # -- system messages (`actors.sys`) ---------------------------------------------

    def format_status(self, status: dict[str, Any]) -> dict[str, Any]:
        """What `actors.sys.get_status` shows of this actor's state, as OTP's
        ``format_status/1``: ``status`` holds ``"state"`` (what ``get_state``
        returns; a state machine adds ``"data"``, ``"postponed"`` and
        ``"timeouts"``).  Override it to hide secrets or shorten big values:
        a status is for people and logs, and it may leave the process.  Runs
        in the actor's thread; return the dict (changed or not)."""
        return status

    def system_get_state(self) -> Any:
        """The state `actors.sys.get_state` returns: a server's state is its
        object's public attributes, so a copy of them (a dict); names with a
        leading underscore are the object's own business and not shown."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def system_replace_state(self, fun: Callable[[Any], Any]) -> Any:
        """`actors.sys.replace_state`: ``fun(state)`` with the dict of
        ``system_get_state``; the dict it returns becomes the public
        attributes (those left out are removed).  Nothing changes when
        ``fun`` raises or returns something else."""
        new = fun(self.system_get_state())
        if not isinstance(new, dict):
            raise SysError(f"replace_state: the function must return a dict of attributes, got {type(new).__name__}")
        cls = type(self)
        for key in new:
            if not isinstance(key, str) or not key.isidentifier() or key.startswith("_"):
                raise SysError(f"replace_state: {key!r} is not a public attribute name")
            if isinstance(getattr(cls, key, None), property):
                raise SysError(f"replace_state: {key!r} is a property of {cls.__name__}, not state")
        for key in [k for k in vars(self) if not k.startswith("_") and k not in new]:
            delattr(self, key)
        for key, value in new.items():
            setattr(self, key, value)
        return dict(new)

    def system_status(self) -> dict[str, Any]:
        """What `format_status` is given."""
        return {"state": self.system_get_state()}

    def system_debug(self, sink: Callable[[tuple[Any, ...]], None] | None) -> None:
        """Where this behaviour's own events go while the process is traced or
        counted (None: nowhere); a plain server has none beyond the loop's."""

    def behaviour_name(self) -> str:
        """OTP's name of the behaviour, for `actors.sys.get_status`."""
        return "gen_server"

    # -- the actor's view of itself -------------------------------------------------

    @property
    def ref(self) -> ActorRef:
        return self._actor_cell.ref

    @property
    def parent(self) -> ActorRef | None:
        return self._actor_cell.parent

    @property
    def trap_exit(self) -> bool:
        return self._actor_cell.trap_exit

    @trap_exit.setter
    def trap_exit(self, value: bool) -> None:
        self._actor_cell.trap_exit = bool(value)

    def reply(self, from_: From, value: Any) -> None:
        """Answer a call whose ``handle_call`` returned `actors.noreply`."""
        self._actor_cell.reply(from_, value)

    def mailbox_empty(self) -> bool:
        """Whether nothing waits in this actor's mailbox right now: Erlang's
        ``receive ... after 0``, for a server that acts once it has taken in
        a whole burst (IOQ submits when its mailbox is drained)."""
        return self._actor_cell.mailbox_empty()

    def colocated(self, ref: ActorRef) -> "GenServer | None":
        """The server object of actor ``ref`` when it is alive in this OS
        process; None when it lives elsewhere or is dead.

        For actors of one process that work together (an IO queue and the
        file actors it serves): calling a method of the other object directly
        saves the message round trip and its two thread hand-offs.  The other
        actor's state still belongs to its own thread, so call only methods
        its class documents as safe from another thread (and idle-checked,
        like `actors.ioq.FileServer.try_read`); the answer may go stale the
        moment it is returned, so such a method must itself cope with the
        actor stopping meanwhile.
        """
        return self._actor_cell.runtime.colocated(ref)

    def stop(self, reason: Any = "normal") -> None:
        """Stop after the current callback returns (``terminate`` runs first)."""
        self._actor_cell.request_stop(reason)

    # -- links and monitors -------------------------------------------------------

    def link(self, ref: ActorRef) -> None:
        """Link both ways.  A dead target raises ``Exit("noproc")`` (or, when
        trapping exits, delivers ``("EXIT", ref, "noproc")``); ``noconnection``
        instead of ``noproc`` when the target is on a node that is lost."""
        cell = self._actor_cell
        if ref == cell.ref:
            return
        if not cell.alive:
            raise Exit(cell.exit_reason, f"{cell.ref!r} is dead")
        if not cell.runtime.request_link(cell.ref, ref):
            reason = cell.runtime._dead_reason(ref.proc)
            if cell.trap_exit:
                cell.enqueue(M_EXIT, (ref, reason))
                return
            raise Exit(reason, f"link to {ref!r}")
        with cell.lock:
            alive = cell.alive
            if alive:
                cell.links[ref] = ref
        if not alive:  # killed while linking: the target must hear of it
            cell.runtime.send_exit(ref, cell.ref, cell.exit_reason)

    def unlink(self, ref: ActorRef) -> None:
        cell = self._actor_cell
        with cell.lock:
            cell.links.pop(ref, None)
        cell.runtime.request_unlink(cell.ref, ref)

    def monitor(self, ref: ActorRef, wait: bool = True) -> tuple[str, str, int]:
        """Watch ``ref``; one ``("DOWN", mref, ref, reason)`` arrives in
        ``handle_info`` (``noproc`` when it is already dead).

        As Erlang's ``monitor/2``, this never fails for a live target.  It
        waits (up to `MONITOR_ACK_WAIT`) for the target's process to take the
        monitor, so that a signal sent to the target afterwards cannot
        overtake it; a process that is alive but not answering (stopped,
        swapping) does not make it raise: the request stays on its way, and
        the DOWN still comes, from the target when it dies, or from the node
        when its process does.  ``wait=False`` does not wait at all, for an
        actor that must never wait on another node (the DOWN comes all the same)."""
        cell = self._actor_cell
        # Unique across the cluster, as Erlang's references are: the target's process keys
        # its monitors by it, and actor ids repeat from node to node ("n.2" on every one).
        mref = (cell.runtime.node_id, cell.id, next(_mrefs))
        with cell.lock:
            cell.monitors_out[mref] = ref
        if not wait:
            cell.runtime.request_monitor(cell.ref, ref, mref, wait=False)
            return mref
        try:
            cell.runtime.request_monitor(cell.ref, ref, mref, MONITOR_ACK_WAIT)
        except CallTimeout:
            log.warning(
                "monitor of %s: its process did not take it within %.0f s; the monitor stays on its way",
                ref,
                MONITOR_ACK_WAIT,
            )
        return mref

    def monitor_node(self, node: str) -> None:
        """Watch another node: ``("nodedown", node)`` arrives in ``handle_info``
        once, when it is lost (at once when it is not connected now)."""
        cell = self._actor_cell
        cell.runtime.sys_request(cell.runtime.node_proc, sysop.MonitorNode(node, cell.ref))

    def monitor_nodes(self, flag: bool = True) -> None:
        """``net_kernel:monitor_nodes(Flag)``: ``("nodeup", node)`` and
        ``("nodedown", node)`` arrive in ``handle_info`` for every node that
        connects or is lost from now on, in order; ``flag=False`` ends it."""
        cell = self._actor_cell
        cell.runtime.sys_request(cell.runtime.node_proc, sysop.MonitorNodes(cell.ref, bool(flag)))

    def demonitor(self, mref: Any) -> bool:
        """Stop watching; a DOWN already queued for ``mref`` is discarded.
        Returns True, as ``erlang:demonitor/1`` does, also when the monitor
        is already off (its DOWN was handled, or it was demonitored)."""
        cell = self._actor_cell
        with cell.lock:
            target = cell.monitors_out.pop(mref, None)
        if target is not None:
            cell.runtime.request_demonitor(target, mref)
        return True

    # -- spawning, timers, names ----------------------------------------------------

    def spawn(
        self,
        cls: type,
        *args: Any,
        name: str | None = None,
        host: str | None = None,
        cpus: Any = None,
        kwargs: dict[str, Any] | None = None,
        link: bool = False,
        node: str | list[str] | tuple[str, ...] | None = None,
        mailbox: int | None = None,
        overflow: str | None = None,
        thread: str | None = None,
    ) -> ActorRef | None:
        """Start an actor (see `Node.spawn`); this actor becomes its parent.
        ``node``: a node name, or candidates of which the first one up (this
        node included) is used; ``mailbox``/``overflow`` bound its mailbox;
        ``thread="own"`` gives it a thread of its own."""
        return _spawn(
            self._actor_cell.runtime,
            cls,
            args,
            kwargs or {},
            name=name,
            host=host,
            cpus=cpus,
            link=link,
            node=node,
            mailbox=mailbox,
            overflow=overflow,
            thread=thread,
        )

    def spawn_link(
        self,
        cls: type,
        *args: Any,
        name: str | None = None,
        host: str | None = None,
        cpus: Any = None,
        kwargs: dict[str, Any] | None = None,
        node: str | list[str] | tuple[str, ...] | None = None,
        mailbox: int | None = None,
        overflow: str | None = None,
        thread: str | None = None,
    ) -> ActorRef | None:
        """`spawn` and link atomically: the new actor's parent is this actor."""
        return self.spawn(
            cls,
            *args,
            name=name,
            host=host,
            cpus=cpus,
            kwargs=kwargs,
            link=True,
            node=node,
            mailbox=mailbox,
            overflow=overflow,
            thread=thread,
        )

    def send_after(self, seconds: float, message: Any, dest: ActorRef | None = None) -> Timer:
        """Deliver ``message`` to ``handle_info`` (of ``dest``, default self) later."""
        cell = self._actor_cell
        return cell.runtime.send_after(seconds, dest or cell.ref, message)

    def cancel_timer(self, timer: Timer) -> float | bool:
        """Seconds left, or False when the timer already fired or was cancelled."""
        return self._actor_cell.runtime.cancel_timer(timer)

    def monitor_wait(self, ref: ActorRef) -> "Monitor":
        """A monitor waited on by this thread (``.wait(timeout)``), not the mailbox."""
        return Monitor(self._actor_cell.runtime, ref)

    def whereis(self, name: str, node: str | None = None) -> ActorRef | None:
        """The actor registered as ``name`` on this node, or on the connected
        ``node`` (None when it is not connected or nothing has that name)."""
        runtime = self._actor_cell.runtime
        if node is None:
            return runtime.whereis(name)
        return runtime.sys_request(runtime.node_proc, sysop.WhereisOn(name, node))

    def nodes(self) -> list[str]:
        """The names of the other nodes connected now (`Node.nodes`)."""
        runtime = self._actor_cell.runtime
        return runtime.sys_request(runtime.node_proc, sysop.Nodes())

    def register(self, name: str, wait: float = 0.0) -> None:
        """Register this actor under ``name`` (``register(Name, self())``); the
        name is released when it dies.  A no-op when it already has that name;
        raises ``Exit(("already_registered", holder))`` when another actor holds
        it and ``Exit(("already_named", current))`` when it has another name.

        ``wait`` > 0: when another actor holds the name, first wait up to that
        many seconds for it to exit, then claim the name once more.  For a
        service that registers itself in ``init``: when the supervisor above
        it is killed, the supervisor's parent restarts it while the previous
        incarnation may still be running ``terminate`` (it traps exits and
        hears of its parent's death in mailbox order).  Erlang's start would
        fail at once and the retries could use up the restart intensity
        before the old one is gone; a holder's DOWN is sent only after its
        name is released, so one more claim then succeeds."""
        cell = self._actor_cell
        if cell.name == name:
            return
        if cell.name is not None:
            raise Exit(("already_named", cell.name), f"cannot register {name!r}")
        holder = cell.claim_name(name)
        if holder is not None and wait > 0:
            leaving = Monitor(cell.runtime, holder)
            try:
                leaving.wait(wait)
            except TimeoutError:
                leaving.cancel()  # still held: a live second instance, not a leaving one
            else:
                holder = cell.claim_name(name)
        if holder is not None:
            raise Exit(("already_registered", holder), f"{name!r} is taken")
        if cell.name != name:  # killed meanwhile: the name was given back
            raise Exit(cell.exit_reason, f"{cell.ref!r} died while registering {name!r}")

    def exit(self, ref: ActorRef, reason: Any) -> None:
        """Send an exit signal (``"kill"`` is untrappable)."""
        cell = self._actor_cell
        cell.runtime.send_exit_signal(ref, cell.ref, reason)
