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

import logging
import os
import shutil
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from actors._core.base import config as _config
from actors._core.cell.spawn import install as _install_spawn
from actors._core.cell.spawn import spawn
from actors._core.host.logs import LogListener
from actors._core.host.pool import HostPool
from actors._core.metrics.server import MetricsServer
from actors._core.node import introspect as _introspect
from actors._core.node import lifecycle as _lifecycle
from actors._core.node import rundir as _rundir
from actors._core.node.distribution import Distribution
from actors._core.node.interrupt import held
from actors._core.node.options import new_identity, read_options
from actors._core.node.other_nodes import OtherNodes
from actors._core.node.peers import Peers
from actors._core.node.remote import Remote
from actors._core.runtime.mailbox import mailbox_limit
from actors._core.runtime.monitor import Monitor
from actors._core.runtime.registry import Registry
from actors._core.runtime.runtime import EXIT_KILL, Runtime, Timer, runtime_for
from actors._core.transport.tcp import TcpSettings
from actors._core.wire import system as sysop
from actors._core.wire.reasons import CallTimeout, Exit, NotRegistered
from actors._core.wire.ref import ActorRef

__all__ = ["Node"]

log = logging.getLogger("actors.node")


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
    ) -> None:
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
        )
        self.config, cluster = options.config, options.cluster
        #: The ``/metrics`` endpoint's bound ``(host, port)``; None when the node serves no metrics.
        self.metrics_address: tuple[str, int] | None = None
        #: The running `actors.metrics.MetricsServer` (``.url``), or None.
        self.metrics_server: MetricsServer | None = None
        #: This node's name in its cluster; None for a node that is not distributed.
        self.name = cluster.name
        #: The bound ``tcp://HOST:PORT`` other nodes connect to (None when not distributed).
        self.address: str | None = None
        key = cluster.load_key()  # before anything starts: an unsafe key file refuses the node
        incarnation, self.id = new_identity(cluster.name)
        _rundir.prepare(rundir)
        _lifecycle.install_sigterm()
        self.rundir = _rundir.create(rundir)
        self._closed = False
        self._close_lock = threading.Lock()
        # Run first by close(), newest first: what was started beside its actors (`on_close`).
        self._on_close: list[Callable[[], None]] = []
        self._top: list[ActorRef] = []
        with _lifecycle.stop_signals_blocked():
            self._pool = HostPool(self.id, self.rundir, self.config)  # forks the zygote
        try:
            self._log_listener = LogListener(self.rundir)  # after the zygote: it forks single-threaded
            self._pool.probe_idle()  # a thread: after the zygote too
            self._rt = Runtime(self.id, self.rundir, "n")
            self._rt.registry = Registry()
            _install_spawn(self._rt)
            self._peers = Peers(cluster.name or "")
            self._remote = Remote(self._rt, self._peers, cluster.name)
            self._dist = Distribution(self._rt, self._pool, self._peers, self._remote, cluster, self.id)
            if cluster.name is not None and cluster.listen is not None and cluster.direct:
                # Before the first spare is forked: every host listens on tcp
                # itself, and so do the reply channels of this process's
                # threads, so frames from other nodes take one hop.
                tcp = TcpSettings.from_listen(
                    cluster.listen, key.public if key else None, key.secret if key else None, cluster.direct_ports
                )
                self._pool.tcp = tcp
                self._rt.transport.enable_tcp(tcp, endpoint=False)
            self._install_handlers()
            self._previous_config = _config.set_current(self.config)
            self._config_listener = self.config.listen(self._pool.broadcast_config)
            self._rt.start()
        except BaseException:
            self._abandon_start()
            raise
        if cluster.name is not None:
            self._dist.link(key, incarnation)
            try:
                self.address = self._dist.listen()
            except BaseException:
                self.close()
                raise
        _rundir.write_node_file(self.rundir, self.id, self._rt.proc)
        _lifecycle.track(self)
        if options.metrics_port is not None:
            try:
                self.metrics_server = MetricsServer(self, port=options.metrics_port, bind=options.metrics_bind)
            except BaseException:
                self.close()
                raise
            self.metrics_address = self.metrics_server.address
            self._on_close.append(self.metrics_server.close)
        self._dist.dial_seeds()

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
        default is unbounded, as in Erlang.
        """
        self._check_open()
        limit = mailbox_limit(mailbox, overflow)
        if node is not None and node != self.name:
            return self._remote.spawn(node, cls, args, kwargs, name, host, cpus, limit, timeout)
        ref = spawn(self._rt, cls, args, kwargs or {}, name=name, host=host, cpus=cpus, mailbox=limit)
        if ref is not None:
            self._top.append(ref)
        return ref

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

    def send(self, target: ActorRef | str, message: Any) -> None:
        """`ActorRef.send` on a ref or a registered name; a name nothing is
        registered under raises `Exit` ``noproc`` (a ``ValueError`` too:
        Erlang's ``Name ! Msg`` fails with ``badarg``).  `cast` to such a
        name is dropped, as ``gen_server:cast`` never fails."""
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

    def _abandon_start(self) -> None:
        """Undo a start that failed after the zygote: a zygote left waiting for its
        command pipe would hold the program at exit (and keep the runtime directory)."""
        self._closed = True
        self._pool.closed = True
        started: list[Callable[[], None]] = []  # what the start got to
        if hasattr(self, "_rt"):
            started.append(self._rt.shutdown)
        if hasattr(self, "_log_listener"):
            started.append(self._log_listener.close)
        for step in started:
            try:
                step()
            except Exception:
                log.exception("undoing the start of node %s: %r failed", self.id, step)
        if hasattr(self, "_config_listener"):
            self.config.unlisten(self._config_listener)
        if hasattr(self, "_previous_config"):
            _config.set_current(self._previous_config)
        self._pool.zygote.end()
        shutil.rmtree(self.rundir, ignore_errors=True)

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
            for ref in reversed(self._top):
                self._stop_quietly(ref, max(0.5, min(5.0, deadline - time.monotonic())))
            self._closed = True
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
            _lifecycle.untrack(self)

    def _stop_quietly(self, ref: ActorRef, timeout: float) -> None:
        try:
            self._rt.stop_actor(ref, "shutdown", timeout)
        except CallTimeout:
            self.kill(ref)
        except Exit:
            pass
