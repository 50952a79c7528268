"""The node: the handle a host program holds on the whole actor system.

`Node` starts the node's parts, in the order they depend on each other, hands
the program its actors, and closes the parts in the reverse order.  The
parts do the work: the host processes (`actors._core.host.pool`), the
runtime directory (`actors._core.node.rundir`), the other nodes
(`actors._core.node.distribution`; `Node`'s methods about them are in
`actors._core.node.other_nodes`), what the processes hold
(`actors._core.node.introspect`), its settings (`actors._core.node.options`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from actors._core.base import config as _config
from actors._core.cell.spawn import install as _install_spawn
from actors._core.cell.spawn import own_thread_of, spawn, spawn_many
from actors._core.host.logs import LogListener
from actors._core.host.pool import HostPool
from actors._core.node import introspect as _introspect
from actors._core.node import lifecycle as _lifecycle
from actors._core.node import rundir as _rundir
from actors._core.node.distribution import Distribution
from actors._core.node.interrupt import held
from actors._core.node.options import new_identity, read_options
from actors._core.node.other_nodes import OtherNodes
from actors._core.node.peers import PeerNodes
from actors._core.node.remote import Remote
from actors._core.runtime.mailbox import mailbox_limit
from actors._core.runtime.monitor import Monitor
from actors._core.runtime.registry import Registry
from actors._core.runtime.runtime import EXIT_KILL, Runtime, Timer, runtime_for
from actors._core.transport.tcp import TcpSettings
from actors._core.wire import system as sysop
from actors._core.wire.plain import loads_plain
from actors._core.wire.reasons import INCARNATION_ENDED, CallTimeout, Exit, IncarnationEnded, NotRegistered
from actors._core.wire.ref import ActorRef

if TYPE_CHECKING:  # imported when a node serves metrics: prometheus_client and http are heavy
    from actors._core.metrics.server import MetricsServer

__all__ = ["ENDING_KILL_TIMEOUT", "ENDING_STOP_TIMEOUT", "Node"]

log = logging.getLogger("actors.node")

#: Seconds an ended incarnation gives the program's top actors to stop cleanly
#: (``terminate`` runs; a supervisor stops its children); then what is left is ended.
ENDING_STOP_TIMEOUT = 5.0
#: Seconds it waits for every host process to say its actors are ended.
ENDING_KILL_TIMEOUT = 3.0
#: The pause before a new incarnation is tried again after a failed start, doubled up to the second.
REJOIN_FIRST_PAUSE = 0.5
REJOIN_MAX_PAUSE = 10.0
#: Seconds the program's start may take on a new incarnation before that incarnation is ended and another tried.
REJOIN_START_TIMEOUT = 60.0


class Node(OtherNodes):
    """An actor system spanning this process and the host processes it starts.

    ``with Node() as node:`` needs no daemon and no configuration.  Closing it
    stops the actors it started (newest first), then every host process, and
    removes its private runtime directory.
    """

    def __init__(
        self,
        config: _config.Config | Mapping[str, Mapping[str, Any]] | str | os.PathLike[str] | None = None,
        *,
        rundir: str | None = None,
        name: str | None = None,
        listen: str | None = None,
        cluster_key: str | os.PathLike[str] | None = None,
        seeds: Iterable[str] | str = (),
        net_ticktime: float | None = None,
        connect_all: bool | None = None,
        metrics: int | None = None,
        metrics_bind: str | None = None,
        rejoin: Callable[["Node"], None] | None = None,
        trust_peers: bool | None = None,
    ) -> None:
        """``rejoin``: when an incarnation of this (distributed) node ends, start a
        new one in place -- same name, same bound address, same config -- and call
        ``rejoin(node)`` on it to start the program's tree again, as ``otpy node``
        does; without it an ended node stays ended until the program closes it.
        ``trust_peers=False`` (``[cluster] trust_peers``): what other nodes send
        is built as plain data only, and a body naming any other class or
        function is refused (docs/distribution.md, *Security model*)."""
        options = read_options(
            config,
            name=name,
            listen=listen,
            cluster_key=cluster_key,
            seeds=seeds,
            net_ticktime=net_ticktime,
            connect_all=connect_all,
            metrics=metrics,
            metrics_bind=metrics_bind,
            trust_peers=trust_peers,
        )
        self.config, self._cluster = options.config, options.cluster
        if rejoin is not None and not callable(rejoin):
            raise TypeError(f"rejoin must be a function of the node, got {rejoin!r}")
        if rejoin is not None and self._cluster.name is None:
            raise ValueError("rejoin= is for a distributed node: give name= and listen= too")
        #: The ``/metrics`` endpoint's bound ``(host, port)``; None when the node serves no metrics.
        self.metrics_address: tuple[str, int] | None = None
        #: The running `actors.metrics.MetricsServer` (``.url``), or None.
        self.metrics_server: MetricsServer | None = None
        #: This node's name in its cluster; None for a node that is not distributed.
        self.name = self._cluster.name
        #: The bound ``tcp://HOST:PORT`` other nodes connect to (None when not distributed).
        self.address: str | None = None
        self._key = self._cluster.load_key()  # before anything starts: an unsafe key file refuses the node
        self._rundir_given = rundir
        _rundir.prepare(rundir)
        _lifecycle.install_sigterm()
        self._closed = False
        # Held by close() and by the end of an incarnation (reentrant: an
        # ``on_ended`` callback may close the node).
        self._close_lock = threading.RLock()
        # Run first by close(), newest first: what was started beside its actors (`on_close`).
        self._on_close: list[Callable[[], None]] = []
        # Told of every incarnation's end, after its actors stopped (`on_ended`).
        self._on_ended: list[Callable[[str], None]] = []
        self._rejoin = rejoin
        self._rejoining = False  # a rejoin is under way (`_end`)
        #: How many incarnations this handle has run (1 for the first); see `wait_incarnation`.
        self.incarnation = 0
        self._incarnations = threading.Condition()
        self._started = 0  # the incarnation whose program's tree was started last
        try:
            self._boot()
        except BaseException:
            self._closed = True
            raise
        self._ready()
        _lifecycle.track(self)
        if options.metrics_port is not None:
            from actors._core.metrics.server import MetricsServer

            try:
                self.metrics_server = MetricsServer(self, port=options.metrics_port, bind=options.metrics_bind)
            except BaseException:
                self.close()
                raise
            self.metrics_address = self.metrics_server.address
            self._on_close.append(self.metrics_server.close)

    def _boot(self) -> None:
        """Start one incarnation: a new node id, runtime directory, zygote, runtime and link.

        A start that fails undoes what it got to and raises."""
        cluster, key = self._cluster, self._key
        incarnation, self.id = new_identity(cluster.name)
        self.rundir = _rundir.create(self._rundir_given)
        self._top: list[ActorRef] = []
        # False until it runs, and once torn down (between two incarnations, or closed).
        self._running = False
        try:
            with _lifecycle.stop_signals_blocked():
                self._pool = HostPool(self.id, self.rundir, self.config)  # forks the zygote
        except BaseException:
            shutil.rmtree(self.rundir, ignore_errors=True)
            raise
        # What the start got to, undone newest first if a later step fails: a
        # zygote left waiting for its command pipe would hold the program at
        # exit (and keep the runtime directory).
        undo: list[Callable[[], None]] = [
            lambda: shutil.rmtree(self.rundir, ignore_errors=True),
            self._pool.zygote.end,
        ]
        try:
            self._log_listener = LogListener(self.rundir)  # after the zygote: it forks single-threaded
            undo.append(self._log_listener.close)
            self._pool.probe_idle()  # a thread: after the zygote too
            self._rt = Runtime(self.id, self.rundir, "n")
            undo.append(self._rt.shutdown)
            self._rt.registry = Registry()
            _install_spawn(self._rt)
            self._peers = PeerNodes(cluster.name or "")
            self._remote = Remote(self._rt, self._peers, cluster.name)
            self._dist = Distribution(self._rt, self._pool, self._peers, self._remote, cluster, self.id)
            if not cluster.trust_peers:
                # This process and every host: frames from other nodes build plain data only.
                self._rt.peer_loads = loads_plain
                self._pool.trust_peers = False
            if cluster.name is not None and cluster.listen is not None and cluster.direct:
                # Before the first spare is forked: every host listens on tcp
                # itself, and so do this process's endpoint and the reply
                # channels of its threads, so frames from other nodes take
                # one hop to the program's actors as to a host's.
                tcp = TcpSettings.from_listen(
                    cluster.listen, key.public if key else None, key.secret if key else None, cluster.direct_ports
                )
                self._pool.tcp = tcp
                self._rt.transport.enable_tcp(tcp, endpoint=True)
            self._install_handlers()
            self._previous_config = _config.set_current(self.config)
            previous = self._previous_config

            def restore_config() -> None:
                _config.set_current(previous)

            undo.append(restore_config)
            self._config_listener = self.config.listen(self._pool.broadcast_config)
            listener = self._config_listener
            undo.append(lambda: self.config.unlisten(listener))
            self._rt.start()
        except BaseException:
            self._pool.closed = True
            for step in reversed(undo):
                try:
                    step()
                except Exception:
                    log.exception("undoing the start of node %s: %r failed", self.id, step)
            raise
        self._running = True
        if cluster.name is not None:
            self._dist.link(key, incarnation)
            try:
                self.address = self._dist.listen()
            except BaseException:
                self._teardown(time.monotonic() + 10.0)
                raise
            # The next incarnation listens where this one does (a port 0 was bound here).
            self._cluster = dataclasses.replace(cluster, listen=self.address)
        _rundir.write_node_file(self.rundir, self.id, self._rt.proc)
        self._peers.on_ended(self._incarnation_ended)
        self.incarnation += 1
        self._dist.dial_seeds()

    def _ready(self) -> None:
        """The current incarnation runs the program's tree (`wait_incarnation` returns)."""
        with self._incarnations:
            self._started = self.incarnation
            self._incarnations.notify_all()

    # -- context manager -----------------------------------------------------------

    def __enter__(self) -> "Node":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Node {self.id} rundir={self.rundir}>"

    # -- actors ----------------------------------------------------------------------

    def spawn(
        self,
        cls: type,
        *args: Any,
        name: str | None = None,
        host: str | None = None,
        cpus: Iterable[int] | int | None = None,
        kwargs: dict[str, Any] | None = None,
        node: str | None = None,
        timeout: float | None = 30.0,
        mailbox: int | None = None,
        overflow: str | None = None,
        thread: str | None = None,
    ) -> ActorRef | None:
        """Start ``cls`` (a `GenServer`) and run its ``init(*args, **kwargs)``.

        ``host=None`` runs it in this process, ``host="own"`` in a new host
        process of its own, any other string in the shared host of that name
        (created on first use); ``cpus`` pins a new host with
        ``os.sched_setaffinity``.  ``node="b"`` starts it on the connected
        node b instead, with b's placement (``host=None`` is b's node
        process); ``timeout`` bounds that remote start.  Returns the ref, or
        ``None`` when ``init`` returned `actors.ignore`; raises `SpawnError`
        when ``init`` failed, `Exit` ``noconnection`` when b is not connected.
        ``mailbox=N`` bounds the actor's mailbox to N messages and
        ``overflow`` (``"drop_newest"``, ``"drop_oldest"``, ``"reject"``,
        ``"block"``) says what a message that finds it full gets; the
        default is unbounded, as in Erlang.  ``thread="own"`` runs the actor
        on a thread of its own instead of on its process's scheduler: for an
        actor that blocks most of the time, or holds thread-affine state
        (docs/kernel.md, *Scheduling*).
        """
        self._check_open()
        limit = mailbox_limit(mailbox, overflow)
        own = own_thread_of(thread)
        if node is not None and node != self.name:
            return self._remote.spawn(node, cls, args, kwargs, name, host, cpus, limit, timeout, own)
        ref = spawn(self._rt, cls, args, kwargs or {}, name=name, host=host, cpus=cpus, mailbox=limit, thread=thread)
        if ref is not None:
            self._top.append(ref)
        return ref

    def spawn_many(
        self,
        cls: type,
        arg_lists: Iterable[Any],
        *,
        host: str | None = None,
        cpus: Iterable[int] | int | None = None,
        kwargs: dict[str, Any] | None = None,
        thread: str | None = None,
    ) -> list[ActorRef | None]:
        """Start one ``cls`` per item of ``arg_lists`` (each a tuple of
        ``init`` arguments, or a single argument) in one round trip: in this
        process, or all in one host (``host="own"`` makes a new host for
        them, a name the shared host of that name).  Returns their refs in
        order (None where ``init`` returned `actors.ignore`).  All or nothing:
        when an ``init`` fails the others are killed and `SpawnError` is
        raised with reason ``(index, why)``.  For an actor per thing --
        connection, job, document -- without a round trip each.

        Unlike `spawn`'s, these are not stopped one by one (``terminate``
        run) when the node closes: they end with their processes.  Put them
        under a supervisor for an orderly stop."""
        self._check_open()
        return spawn_many(self._rt, cls, arg_lists, kwargs or {}, host=host, cpus=cpus, thread=thread)

    def whereis(self, name: str, node: str | None = None, timeout: float | None = 5.0) -> ActorRef | None:
        """The actor registered as ``name`` here, or on the connected ``node``."""
        if node is not None:
            return self._remote.whereis(name, node, timeout)
        return self._rt.registry.whereis(name)

    def call(self, target: ActorRef | str, request: Any, timeout: float | None = 5.0) -> Any:
        """`ActorRef.call` on a ref or a registered name (unregistered: ``noproc``)."""
        ref = self.whereis(target) if isinstance(target, str) else target
        if ref is None:
            raise Exit("noproc", f"no actor is registered as {target!r}")
        return ref.call(request, timeout=timeout)

    def cast(self, target: ActorRef | str, request: Any) -> None:
        ref = self.whereis(target) if isinstance(target, str) else target
        if ref is not None:
            ref.cast(request)

    def send(self, target: ActorRef | str | tuple[str, str], message: Any) -> None:
        """`ActorRef.send` on a ref or a registered name; a name nothing is
        registered under raises `Exit` ``noproc`` (a ``ValueError`` too:
        Erlang's ``Name ! Msg`` fails with ``badarg``).  `cast` to such a
        name is dropped, as ``gen_server:cast`` never fails.  ``(name, node)``
        is the name on a connected node, sent one way (`actors.send`)."""
        if isinstance(target, tuple):
            name, node = target
            self._rt.sys_send(self._rt.proc, sysop.SendNamed(name, node, message))
            return
        ref = self.whereis(target) if isinstance(target, str) else target
        if ref is None:
            raise NotRegistered(target)
        ref.send(message)

    def register(self, name: str, ref: ActorRef) -> None:
        """OTP's ``register(Name, Pid)``: give a live actor of this node a name,
        released when it dies.  Raises `ValueError` (OTP's ``badarg``) when
        the name is taken, the actor has another name already or is of
        another node, `Exit` ``noproc`` when it is not alive."""
        self._check_open()
        if ref.node_id != self.id:
            raise ValueError(f"cannot register {name!r}: {ref!r} is an actor of another node")
        holder = self._rt.registry.register(name, ref)
        if holder is not None:
            raise ValueError(f"name {name!r} is already registered to {holder!r}")
        try:
            outcome = self._rt.sys_request(ref.proc, sysop.AdoptName(ref.id, name))
        except Exit:  # its process is gone
            outcome = "dead"
        if outcome == "ok":
            return
        self._rt.registry.unregister(name, ref)
        if outcome == "dead":
            raise Exit("noproc", f"cannot register {name!r}: {ref!r} is not alive")
        raise ValueError(f"cannot register {name!r}: {ref!r} is registered as {outcome[1]!r}")

    def unregister(self, name: str) -> None:
        """OTP's ``unregister(Name)``: the actor keeps running, without a name
        (it may take another); `KeyError` when ``name`` is not registered."""
        holder = self._rt.registry.whereis(name)
        if holder is None or not self._rt.registry.unregister(name, holder):
            raise KeyError(f"name {name!r} is not registered")
        self._rt.sys_send(holder.proc, sysop.DropName(holder.id, name))

    def registered(self) -> dict[str, ActorRef]:
        return self._rt.registry.snapshot()

    def monitor(self, ref: ActorRef) -> Monitor:
        """Watch ``ref`` from the host program; see `Monitor.wait`."""
        return Monitor(self._rt_for(ref), ref)

    def demonitor(self, monitor: Monitor) -> None:
        monitor.cancel()

    def kill(self, ref: ActorRef) -> None:
        """Untrappable exit: the actor dies with reason ``killed``; no ``terminate``."""
        self._rt_for(ref).send_exit(ref, None, "killed", EXIT_KILL)

    def exit(self, ref: ActorRef, reason: Any) -> None:
        """Send an exit signal from outside any actor (``"kill"`` is untrappable)."""
        self._rt_for(ref).send_exit_signal(ref, None, reason)

    def stop(self, ref: ActorRef, reason: Any = "normal", timeout: float | None = None) -> None:
        """Stop the actor as ``gen_server:stop`` does: ``terminate`` runs, and
        this returns once it is dead.  Raises `Exit` (``noproc``) when it is not
        alive, `CallTimeout` when it does not stop in time."""
        final = self._rt_for(ref).stop_actor(ref, reason, timeout)
        if final != reason:
            raise Exit(final, f"{ref!r} stopped with another reason")

    def _rt_for(self, ref: ActorRef) -> Runtime:
        """The runtime that reaches ``ref``: this node's, except for a ref of
        another node whose runtime lives in this same process (two nodes in
        one program), whose ``proc`` means a process of that node."""
        if ref.node_id == self.id or ref.proc is not ref.home_proc:
            return self._rt
        return runtime_for(ref.node_id)

    def send_after(self, seconds: float, ref: ActorRef, message: Any) -> Timer:
        return self._rt.send_after(seconds, ref, message)

    def cancel_timer(self, timer: Timer) -> float | bool:
        return self._rt.cancel_timer(timer)

    # -- introspection -----------------------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        return self._rt

    def hosts(self) -> list[dict[str, Any]]:
        """Host processes in use (the warm spare is not listed)."""
        return [h.to_dict() for h in self._pool.in_use()]

    def actors(self, timeout: float = 2.0) -> list[dict[str, Any]]:
        """Every live actor of the node, with its process, pid and mailbox depth."""
        return _introspect.actors(self._rt, self._pool, self.registered, timeout)

    def stats(self, timeout: float = 2.0) -> dict[str, Any]:
        """Counters, gauges and histograms merged over every process of the node."""
        return _introspect.stats(self._rt, self._pool, timeout)

    def process_stats(self, timeout: float = 2.0) -> list[dict[str, Any]]:
        """One entry per OS process of the node (its own and every host up):
        ``{"proc", "pid", "stats"}``, ``stats`` being that process's own snapshot
        (counters, gauges, histograms, labelled counters, and under ``actors`` the
        per-class call, cast and exit counts), or None when it did not answer
        within ``timeout``.  `stats` is their sum; this keeps them apart.  The
        hosts are asked all at once, so one slow host costs ``timeout``, not one per host."""
        return _introspect.process_stats(self._rt, self._pool, timeout)

    def on_close(self, callback: Callable[[], None]) -> None:
        """Run ``callback()`` when the node closes, first, before its actors
        stop (the newest callback first): for what a program started beside
        the node's actors and that reads them, such as an observer
        (`actors.tools.observer.observe`), so it never outlives the node.  A
        callback that raises is logged and the close goes on.  `RuntimeError`
        when the node is closed."""
        self._check_open()
        self._on_close.append(callback)

    # -- starting and closing ------------------------------------------------------------

    def _install_handlers(self) -> None:
        """The node process's system requests: its registry (for its hosts), placements (the
        pool), a tool attached to the runtime directory, and the other nodes."""
        rt = self._rt
        rt.register_sys(sysop.Register, lambda src, m: rt.registry.register(m.name, m.ref))
        rt.register_sys(sysop.Unregister, lambda src, m: rt.registry.unregister(m.name, m.ref))
        rt.register_sys(sysop.Whereis, lambda src, m: rt.registry.whereis(m.name))
        self._pool.serve(rt, on_up=self._dist.host_up, on_gone=self._dist.host_gone)
        _rundir.serve_requests(rt, self)
        self._dist.serve()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this node is closed")
        if self._rt.ended is not None or not self._running:  # ended; or between two incarnations
            raise IncarnationEnded(self.id, self._rt.ended or "a new incarnation is starting")

    def close(self, timeout: float = 10.0) -> None:
        """Run the `on_close` callbacks (observers), then stop every actor and host process; idempotent.

        In the main thread, SIGINT/SIGTERM are held back until it is done (`actors._core.node.interrupt.held`):
        a close cut in half leaves host processes and the zygote behind, waiting for the rest of it.
        """
        with held(), self._close_lock:
            if self._closed:
                return
            deadline = time.monotonic() + timeout
            while self._on_close:
                callback = self._on_close.pop()
                try:
                    callback()
                except Exception:
                    log.exception("closing %r with node %s failed", callback, self.id)
            if self._running:
                for ref in reversed(self._top):
                    self._stop_quietly(ref, "shutdown", max(0.5, min(5.0, deadline - time.monotonic())))
            self._closed = True
            self._teardown(deadline)
            _lifecycle.untrack(self)
        with self._incarnations:
            self._incarnations.notify_all()

    def _teardown(self, deadline: float) -> None:
        """Stop this incarnation's processes and sockets, and remove its runtime directory
        (what had to stop cleanly was stopped before); nothing when it is down already."""
        if not self._running:
            return
        self._running = False
        self._pool.closed = True
        self._dist.close()
        self.config.unlisten(self._config_listener)
        self._pool.halt(deadline)
        for cell in list(self._rt.cells.values()):
            cell.die("shutdown")
        self._pool.zygote.end()
        self._log_listener.close()  # hosts are gone: re-emit what they sent, then stop
        self._rt.shutdown()
        _config.set_current(self._previous_config)
        shutil.rmtree(self.rundir, ignore_errors=True)

    def _stop_quietly(self, ref: ActorRef, reason: Any, timeout: float) -> None:
        try:
            self._rt.stop_actor(ref, reason, timeout)
        except CallTimeout:
            self.kill(ref)
        except Exit:
            pass

    # -- the end of an incarnation -------------------------------------------------------

    def on_ended(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(reason)`` when an incarnation of this node ends, once all its
        actors are stopped (at once if the current one has ended); from a thread of
        the node.  With ``rejoin=`` it is called for every incarnation that ends,
        before the next one starts."""
        with self._close_lock:
            self._on_ended.append(fn)
            why = self._peers.ended if self._running else None
            done = why is not None and self._rt.calls_refused
        if done and why is not None:
            fn(why)

    def wait_incarnation(self, number: int, timeout: float | None = None) -> bool:
        """Block until this node runs its incarnation ``number`` (1 is the first; a node
        with ``rejoin=`` starts the next one by itself after each end, and it counts
        once ``rejoin`` returned on it); False after ``timeout`` or once the node is closed."""
        with self._incarnations:
            self._incarnations.wait_for(lambda: self._closed or self._started >= number, timeout)
            return not self._closed and self._started >= number

    def _incarnation_ended(self, why: str) -> None:
        """This incarnation ended (told on the link's thread): everything it runs stops, on a thread of its own."""
        rt = self._rt
        threading.Thread(target=self._end, args=(rt, why), name=f"actors-end-{self.id}", daemon=True).start()

    def _end(self, rt: Runtime, why: str) -> None:
        """Stop every actor of the ended incarnation, tell the `on_ended` callbacks, then
        rejoin (with ``rejoin=``; an incarnation that ends while a rejoin is under way,
        during the program's start, is replaced by that same rejoin)."""
        with self._close_lock:
            if self._closed or rt is not self._rt or not self._running:
                return
            self._stop_everything(why)
            callbacks = list(self._on_ended)
            rejoin = self._rejoin if not self._rejoining else None
            self._rejoining |= rejoin is not None
        for fn in callbacks:
            try:
                fn(why)
            except Exception:
                log.exception("an on_ended callback of node %s failed", rt.node_id)
        if rejoin is not None:
            try:
                self._rejoin_loop(rejoin)
            finally:
                with self._close_lock:
                    self._rejoining = False

    def _stop_everything(self, why: str) -> None:
        """OTP's shutdown of a node, bounded: nothing new is spawned in any process of
        the node; the program's top actors stop, newest first (a supervisor stops its
        children, in order, and ``terminate`` runs), within `ENDING_STOP_TIMEOUT`; then
        every actor left in any process dies with `INCARNATION_ENDED`, and calls fail."""
        rt, started = self._rt, time.monotonic()
        end_spawns = sysop.EndIncarnation(self.id, why, False)
        rt.end_incarnation(why, actors=False)
        for host in self._pool.up():
            rt.sys_send(host.proc, end_spawns)
        deadline = started + ENDING_STOP_TIMEOUT
        for ref in reversed(self._top):
            self._stop_quietly(ref, INCARNATION_ENDED, max(0.1, deadline - time.monotonic()))
        stopped = time.monotonic()
        ended = rt.end_incarnation(why, actors=True) + _ask_all(
            rt, [h.proc for h in self._pool.up()], sysop.EndIncarnation(self.id, why, True), ENDING_KILL_TIMEOUT
        )
        log.warning(
            "node %s stopped incarnation %s in %.2f s: its top actors in %.2f s, then %d actors left ended",
            self.name,
            self.id,
            time.monotonic() - started,
            stopped - started,
            ended,
            extra={"event": "incarnation_stopped", "reason": why, "seconds": round(time.monotonic() - started, 3)},
        )

    def _rejoin_loop(self, start: Callable[["Node"], None]) -> None:
        """A new incarnation in place of the ended one, at the same address, and the
        program's tree started on it; a start that fails is undone and tried again,
        after a pause that doubles up to `REJOIN_MAX_PAUSE`, until the node is closed."""
        pause = REJOIN_FIRST_PAUSE
        for attempt in range(1, 1_000_000):  # bounded by close() in practice
            with self._close_lock:
                if self._closed:
                    return
                self._teardown(time.monotonic() + 10.0)
                try:
                    self._boot()
                except Exception as exc:
                    log.warning("node %s: new incarnation failed to start (try %d): %s", self.name, attempt, exc)
                    booted = False
                else:
                    booted = True
            if booted and self._start_program(start, attempt):
                with self._close_lock:
                    if self._closed:
                        return
                    if self._rt.ended is None:
                        log.warning(
                            "node %s rejoined as incarnation %s", self.name, self.id, extra={"event": "rejoined"}
                        )
                        self._ready()
                        return
                # It ended already, while the program started: its actors are stopped; start another.
                log.warning("node %s: incarnation %s ended while it started", self.name, self.id)
                continue
            with self._incarnations:  # a pause, cut short by close()
                if self._incarnations.wait_for(lambda: self._closed, pause):
                    return
            pause = min(pause * 2, REJOIN_MAX_PAUSE)

    def _start_program(self, start: Callable[["Node"], None], attempt: int) -> bool:
        """``start(self)`` on the new incarnation; False when it raised.  A start that
        hangs (on a peer, a store) is bounded: after `REJOIN_START_TIMEOUT` its
        incarnation is ended, which fails what it waits on."""
        dist = self._dist
        watchdog = threading.Timer(
            REJOIN_START_TIMEOUT,
            lambda: dist.end_incarnation(f"the program's start took over {REJOIN_START_TIMEOUT:g} s"),
        )
        watchdog.daemon = True
        watchdog.start()
        try:
            start(self)
        except Exception:
            log.exception("node %s: the program's start on incarnation %s failed (try %d)", self.name, self.id, attempt)
            return False
        finally:
            watchdog.cancel()
        return True


def _ask_all(rt: Runtime, procs: list[str], op: sysop.SysOp[int], timeout: float) -> int:
    """Send ``op`` to every process of ``procs`` at once; the sum of the answers that came within ``timeout``."""
    answers: dict[str, int] = {}
    arrived = threading.Condition()

    def answer(proc: str) -> Callable[[bool, Any], None]:
        def done(ok: bool, value: Any) -> None:
            with arrived:
                answers[proc] = value if ok and type(value) is int else 0
                arrived.notify_all()

        return done

    for proc in procs:
        rt.sys_request_then(proc, op, answer(proc))
    with arrived:
        arrived.wait_for(lambda: len(answers) == len(procs), timeout)
        return sum(answers.values())
