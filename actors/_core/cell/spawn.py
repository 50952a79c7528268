"""Starting actors: in this process, or in a host process placed by the node."""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterable

import cloudpickle

from actors._core.cell.cell import Cell
from actors._core.cell.state import Behaviour
from actors._core.runtime.mailbox import MailboxLimit, mailbox_limit
from actors._core.runtime.runtime import Runtime, current_cell
from actors._core.wire import system as sysop
from actors._core.wire.reasons import Exit, crash_from
from actors._core.wire.ref import ActorRef

__all__ = [
    "AlreadyRegistered",
    "SpawnError",
    "WarmThread",
    "install",
    "normalise_cpus",
    "own_thread_of",
    "spawn_many",
    "record_child_link",
    "spawn",
    "start_here",
]


class SpawnError(Exit):
    """``init`` failed (or the actor could not be placed); ``reason`` says why."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reason, self.detail))


class AlreadyRegistered(SpawnError):
    """The name is taken; ``reason`` is ``("already_started", holder_ref)``."""

    @property
    def holder(self) -> ActorRef:
        return self.reason[1]


def normalise_cpus(cpus: Iterable[int] | int | None) -> list[int] | None:
    if cpus is None:
        return None
    if isinstance(cpus, int):
        cpus = [cpus]
    result = sorted({int(c) for c in cpus})
    if not result or any(c < 0 for c in result):
        raise ValueError(f"cpus must be a non-empty set of CPU numbers, got {cpus!r}")
    return result


#: What ``spawn(..., thread=)`` takes: None (the process's scheduler) or ``"own"``.
THREAD_CHOICES = (None, "pool", "own")


def own_thread_of(thread: str | None) -> bool:
    """Whether ``spawn(..., thread=thread)`` asks for a thread of its own."""
    if thread not in THREAD_CHOICES:
        raise ValueError(f"thread must be None, 'pool' or 'own', got {thread!r}")
    return thread == "own"


def record_child_link(rt: Runtime, cell: Cell, child: ActorRef) -> None:
    """The parent's half of a ``spawn_link``, recorded once the spawn replied.

    The child's process may have died between the child's ``init`` and this
    moment; the node's report of that death found no link to act on then, so
    the exit signal is delivered here instead of being lost.
    """
    with cell.lock:
        parent_alive = cell.alive
        if parent_alive:
            cell.links[child] = child
        dead = rt.dead_procs.get(child.proc)
    if not parent_alive:
        # The parent was killed while this spawn ran: its death found no link
        # to the child, so the child gets the parent's exit signal now.
        rt.send_exit(child, cell.ref, cell.exit_reason)
    elif dead is not None:
        cell.proc_down(child.proc, dead)


class WarmThread:
    """A thread started before the actor it will run exists.

    A host starts one as it boots, so the first actor placed there (the
    replacement of a SIGKILLed child, on a warm spare) runs at once instead
    of waiting for a new thread to be created and scheduled.  It runs one
    actor loop, as a thread made for it would, and ends with it.
    """

    def __init__(self, name: str) -> None:
        self._work: "queue.SimpleQueue[Callable[[], None]]" = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def run(self, loop: Callable[[], None]) -> None:
        """Hand ``loop`` (an actor's whole loop) to the thread."""
        self._work.put(loop)

    def _run(self) -> None:
        self._work.get()()


def start_here(
    rt: Runtime,
    actor_id: str,
    cls: type,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str | None,
    parent: ActorRef | None,
    link: bool,
    on_started: Any,
    warm: list[WarmThread] | None = None,
    mailbox: MailboxLimit | None = None,
    own_thread: bool = False,
    here: bool = False,
) -> None:
    """Create the cell and start it; ``on_started(kind, detail)`` reports init.

    An actor runs on the process's scheduler unless ``own_thread`` (or it is
    a host's first, on one of ``warm``).  ``here``: the caller waits for
    ``init`` and may run it itself (it is no I/O thread).  Nothing starts
    in a process of an incarnation that ended."""
    if rt.ended is not None:
        on_started("error", rt.refused().reason)
        return
    try:
        server = cls()
    except BaseException as exc:  # noqa: BLE001 - a constructor failure is a start error
        on_started("error", crash_from(exc))
        return
    # The actor a warm thread was kept for is the host's first: it reads the
    # host's endpoint itself while idle (actors._core.transport.endpoint_loan).
    # (A bounded mailbox is read by the actor's thread only: it keeps its
    # policy on the way in, which a frame read off the endpoint would skip.)
    lend = bool(warm) and mailbox is None and getattr(server, "reads_host_endpoint", True)
    cell = Cell(
        rt,
        actor_id,
        server,
        tuple(args),
        dict(kwargs),
        name,
        parent,
        link,
        on_started,
        read_endpoint=lend,
        mailbox=mailbox,
        own_thread=own_thread,
    )
    cell.start(warm.pop().run if lend and warm else None, here=here)


def spawn(
    rt: Runtime,
    cls: type,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    name: str | None = None,
    host: str | None = None,
    cpus: Any = None,
    link: bool = False,
    parent: ActorRef | None = None,
    node: str | tuple[str, ...] | list[str] | None = None,
    mailbox: int | MailboxLimit | None = None,
    overflow: str | None = None,
    thread: str | None = None,
) -> ActorRef | None:
    """Start an actor.  ``node`` (a name, or candidates of which the first
    one up is used) starts it on another node: the request goes to this
    node's process, which alone talks to other nodes.  ``mailbox``/
    ``overflow`` bound its mailbox (`actors._core.runtime.mailbox`);
    ``thread="own"`` gives it a thread of its own instead of a turn on the
    process's scheduler (`actors._core.runtime.scheduler`)."""
    if not (isinstance(cls, type) and issubclass(cls, Behaviour)):
        raise TypeError(f"spawn needs a GenServer subclass, got {cls!r}")
    own_thread = own_thread_of(thread)
    if rt.ended is not None:
        raise rt.refused()
    if name is not None and not isinstance(name, str):
        raise TypeError(f"actor names are strings, got {name!r}")
    cpu_list = normalise_cpus(cpus)
    if isinstance(mailbox, MailboxLimit):  # checked already (a spawn forwarded from another node)
        if overflow is not None:
            raise ValueError("overflow= goes with mailbox=N, not with a MailboxLimit")
        limit: MailboxLimit | None = mailbox
    else:
        limit = mailbox_limit(mailbox, overflow)
    cell = current_cell()
    if cell is not None and cell.runtime is rt:
        if not cell.alive:
            # A callback still running in a killed actor: the dead spawn nothing.
            raise Exit(cell.exit_reason, f"{cell.ref!r} is dead")
        parent = cell.ref
    if link and parent is None:
        raise ValueError("spawn_link needs a calling actor to link to")
    if node is not None:
        candidates = [node] if isinstance(node, str) else list(node)
        if not candidates or not all(isinstance(n, str) and n for n in candidates):
            raise ValueError(f"node must be a node name or a list of them, got {node!r}")
        payload = cloudpickle.dumps((cls, tuple(args), dict(kwargs), name, parent, link, limit, own_thread))
        kind, detail = rt.sys_request(rt.node_proc, sysop.SpawnOn(candidates, host, cpu_list, payload), timeout=None)
    elif host is None:
        actor_id = rt.new_actor_id()
        if cpu_list is not None:
            raise ValueError("cpus= pins a host process: give host='own' or a host name")
        # ``init`` runs on this thread (most often) or on the actor's own:
        # an event to wait on only for the second.
        done = threading.Event() if own_thread else None
        outcome: list[Any] = []

        def on_started(kind: str, detail: Any) -> None:
            outcome.append((kind, detail))
            if done is not None:
                done.set()

        start_here(
            rt,
            actor_id,
            cls,
            args,
            kwargs,
            name,
            parent,
            link,
            on_started,
            mailbox=limit,
            own_thread=own_thread,
            here=True,
        )
        if not outcome:  # init runs on a thread of the actor's own
            assert done is not None, "an actor on the scheduler starts on the spawner's thread"
            rt.flush_casts()
            with rt.scheduler.blocking():
                done.wait()
        kind, detail = outcome[0]
    else:
        if not isinstance(host, str) or not host:
            raise ValueError(f"host must be None, 'own' or a host name, got {host!r}")
        actor_id = rt.new_actor_id()
        payload = cloudpickle.dumps((actor_id, cls, tuple(args), dict(kwargs), name, parent, link, limit, own_thread))
        kind, detail = rt.sys_request(rt.node_proc, sysop.Spawn(host, cpu_list, payload), timeout=None)
    if kind == "ok":
        ref: ActorRef = detail
        if link and cell is not None:
            record_child_link(rt, cell, ref)
        return ref
    if kind == "ignore":
        return None
    if kind == "already_registered":
        raise AlreadyRegistered(("already_started", detail), f"name {name!r} is taken")
    raise SpawnError(detail, f"{cls.__name__} failed to start")


def install(rt: Runtime, warm_thread: bool = False) -> None:
    """Serve the node's ``spawn_here`` requests in ``rt``'s process.

    The node places an actor in a host and forwards the spawn there; the host
    starts it and answers the original requester directly.  With
    ``warm_thread`` (a host) the first actor runs on a `WarmThread` started now.
    """
    warm = [WarmThread(f"actors-warm-{rt.proc}")] if warm_thread else []

    def spawn_here(src: str, msg: sysop.SpawnHere) -> None:
        orig_src, orig_ref, payload = msg.orig_src, msg.orig_ref, msg.payload
        spec = cloudpickle.loads(payload)
        if spec[0] == _MANY:
            _start_many_here(rt, orig_src, orig_ref, *spec[1:])
            return
        actor_id, cls, args, kwargs, name, parent, link, *more = spec
        limit = more[0] if more else None
        own_thread = bool(more[1]) if len(more) > 1 else False

        def on_started(kind: str, detail: Any) -> None:
            rt.reply_sys(orig_src, orig_ref, True, (kind, detail))
            if not rt.is_node:
                rt.sys_send(rt.node_proc, sysop.SpawnDone(orig_src, orig_ref))

        start_here(rt, actor_id, cls, args, kwargs, name, parent, link, on_started, warm, limit, own_thread)

    rt.register_sys(sysop.SpawnHere, spawn_here)


#: The first item of a `spawn_many` payload (a single spawn's is an actor id).
_MANY = "many"


def spawn_many(
    rt: Runtime,
    cls: type,
    arg_lists: Iterable[Any],
    kwargs: dict[str, Any],
    *,
    host: str | None = None,
    cpus: Any = None,
    thread: str | None = None,
) -> list[ActorRef | None]:
    """Start one actor of ``cls`` per item of ``arg_lists`` (a tuple of
    arguments each, or one argument), in one round trip to the host.

    All or nothing: when one ``init`` fails, the ones started are killed and
    `SpawnError` is raised, its reason ``(index, why)``.  An ``init`` that
    returned `actors.ignore` leaves None in its place."""
    if not (isinstance(cls, type) and issubclass(cls, Behaviour)):
        raise TypeError(f"spawn_many needs a GenServer subclass, got {cls!r}")
    if rt.ended is not None:
        raise rt.refused()
    own_thread = own_thread_of(thread)
    args_of = [tuple(a) if isinstance(a, tuple) else (a,) for a in arg_lists]
    cpu_list = normalise_cpus(cpus)
    if host is None:
        if cpu_list is not None:
            raise ValueError("cpus= pins a host process: give host='own' or a host name")
        refs: list[ActorRef | None] = []
        try:
            for args in args_of:
                refs.append(spawn(rt, cls, args, kwargs, thread=thread))
        except SpawnError as exc:
            for ref in refs:
                if ref is not None:
                    rt.send_exit_signal(ref, None, "kill")
            raise SpawnError((len(refs), exc.reason), f"{cls.__name__} #{len(refs)} failed to start") from None
        return refs
    if not isinstance(host, str) or not host:
        raise ValueError(f"host must be None, 'own' or a host name, got {host!r}")
    payload = cloudpickle.dumps((_MANY, cls, args_of, dict(kwargs), own_thread))
    kind, detail = rt.sys_request(rt.node_proc, sysop.Spawn(host, cpu_list, payload), timeout=None)
    if kind == "ok":
        return list(detail)
    raise SpawnError(detail, f"{cls.__name__} failed to start")


def _start_many_here(
    rt: Runtime,
    orig_src: str,
    orig_ref: Any,
    cls: type,
    args_of: list[tuple[Any, ...]],
    kwargs: dict[str, Any],
    own_thread: bool,
) -> None:
    """A host's side of `spawn_many`: start them all, answer once."""
    total = len(args_of)
    refs: list[Any] = [None] * total
    failures: list[tuple[int, Any]] = []
    left = [total]
    lock = threading.Lock()

    def finish() -> None:
        if failures:
            for ref in refs:
                if ref is not None:
                    rt.send_exit_signal(ref, None, "kill")
            answer: tuple[str, Any] = ("error", min(failures, key=lambda f: f[0]))
        else:
            answer = ("ok", refs)
        rt.reply_sys(orig_src, orig_ref, True, answer)
        if not rt.is_node:
            rt.sys_send(rt.node_proc, sysop.SpawnDone(orig_src, orig_ref))

    def started(index: int) -> Any:
        def on_started(kind: str, detail: Any) -> None:
            with lock:
                if kind == "ok":
                    refs[index] = detail
                elif kind != "ignore":
                    failures.append((index, detail))
                left[0] -= 1
                done = left[0] == 0
            if done:
                finish()

        return on_started

    if not total:
        finish()
        return
    for index, args in enumerate(args_of):
        start_here(
            rt, rt.new_actor_id(), cls, args, dict(kwargs), None, None, False, started(index), None, None, own_thread
        )
