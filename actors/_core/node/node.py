"""The node: the handle a host program holds on the whole actor system."""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from typing import Any, Callable, Iterable, Mapping

import cloudpickle

from actors._core.node import lifecycle as _lifecycle
from actors._core.wire.codec import FrameError, decode_frame, frame_kind, requalify
from actors._core.base import config as _config
from actors._core.base import stats as _stats
from actors._core.host.pool import HostPool
from actors._core.host.logs import LogListener
from actors._core.runtime.mailbox import mailbox_limit
from actors._core.node.membership import SILENCE, Membership, PeerInfo, RateLimit, yields
from actors._core.runtime.monitor import Monitor
from actors._core.node.events import NodeEvents
from actors._core.wire.reasons import CallTimeout, Exit, NotRegistered
from actors._core.net.net import NetError, NetLink
from actors._core.net.tick import DEFAULT_NET_TICKTIME
from actors._core.wire.ref import ActorRef, qualify
from actors._core.runtime.registry import Registry
from actors._core.net.seeds import ATTEMPT_TIMEOUT, SeedDialer
from actors._core.runtime.runtime import EXIT_KILL, K_REPLY, K_REPLY_EXIT, K_SYS, Runtime, Timer, runtime_for
from actors._core.transport.transport import owner_of
from actors._core.cell.spawn import AlreadyRegistered, SpawnError
from actors._core.cell.spawn import install as _install_spawn
from actors._core.cell.spawn import spawn
from actors._core.net.settings import ClusterSettings, parse_seeds
from actors._core.node.interrupt import held
from actors._core.metrics.server import DEFAULT_BIND as _METRICS_BIND
from actors._core.metrics.server import MetricsServer

__all__ = ["Monitor", "Node", "NodeMonitor"]

log = logging.getLogger("actors.node")
#: How long `Node()` waits for its seeds' first connection attempts.
SEED_WAIT = ATTEMPT_TIMEOUT + 0.5
_node_counter = itertools.count(1)
#: ``connect_all``: how many nodes one peer's list may name (the rest are ignored), and
#: how long a connection to one of them may take to be welcomed.
_MAX_SHARED_NODES = 1000
_SHARED_CONNECT_TIMEOUT = 10.0
#: The share of ``net_ticktime`` the link's thread waits, at most, for room
#: in a full pipe to one of this node's hosts before it drops and counts:
#: that thread also sends the ticks, which must leave in time.
LINK_SEND_WAIT_SHARE = 0.25


class NodeMonitor:
    """A watch on another node from the host program: `wait` returns
    ``("nodedown", name)`` once the node is lost (at once when it is not
    connected when the watch is set)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._event = threading.Event()

    def fire(self) -> None:
        self._event.set()

    def wait(self, timeout: float | None = None) -> tuple[str, str]:
        """Block until the node is down; raises `TimeoutError` after ``timeout``."""
        if not self._event.wait(timeout):
            raise TimeoutError(f"node {self.name} still up after {timeout} s")
        return ("nodedown", self.name)

    def is_down(self) -> bool:
        return self._event.is_set()


class Node:
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
        self.config = _as_config(config)
        # ``metrics=`` / ``metrics_bind=`` override ``[metrics] port`` / ``bind`` (docs/metrics.md).
        metrics_port = metrics if metrics is not None else _metrics_port(self.config)
        metrics_bind = metrics_bind or self.config.get("metrics", "bind") or _METRICS_BIND
        #: The ``/metrics`` endpoint's bound ``(host, port)``; None when the node serves no metrics.
        self.metrics_address: tuple[str, int] | None = None
        #: The running `actors.metrics.MetricsServer` (``.url``), or None.
        self.metrics_server: MetricsServer | None = None
        # Each keyword given overrides its own ``[cluster]`` key, whichever
        # of them came from the config (``net_ticktime=`` on an ini node too).
        given: dict[str, Any] = {
            "name": name, "listen": listen,
            "cluster_key": os.fspath(cluster_key) if cluster_key is not None else None,
            "seeds": parse_seeds(seeds) or None, "net_ticktime": net_ticktime, "connect_all": connect_all,
        }
        cluster = ClusterSettings.from_config(
            self.config, **{key: value for key, value in given.items() if value is not None})
        #: This node's name in its cluster; None for a node that is not distributed.
        self.name = cluster.name
        #: The bound ``tcp://HOST:PORT`` other nodes connect to (None when not distributed).
        self.address: str | None = None
        key = cluster.load_key()  # before anything starts: an unsafe key file refuses the node
        incarnation = int.from_bytes(os.urandom(8), "big") >> 1
        if cluster.name is not None:
            # A distributed node's id names it and its incarnation: refs to the
            # actors of a previous incarnation never reach the next one.
            self.id = f"{cluster.name}@{incarnation:x}"
        else:
            self.id = f"{os.getpid()}-{next(_node_counter)}-{os.urandom(3).hex()}"
        if rundir is None:
            _lifecycle.sweep_stale()
        else:
            _check_rundir(rundir)
        _lifecycle.install_sigterm()
        self.rundir = rundir or tempfile.mkdtemp(prefix=_lifecycle.RUNDIR_PREFIX)
        if rundir is None:
            try:
                _check_rundir(self.rundir)
            except ValueError:
                os.rmdir(self.rundir)
                raise
        os.makedirs(self.rundir, mode=0o700, exist_ok=True)
        os.chmod(self.rundir, 0o700)
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
            self._install_handlers()
            self._previous_config = _config.set_current(self.config)
            self._config_listener = self.config.listen(self._pool.broadcast_config)
            self._rt.start()
        except BaseException:
            self._abandon_start()
            raise
        # Incarnations of other nodes this node declared down (node id -> why):
        # they never connect again, so no ref of theirs comes back to life.
        self._lost: dict[str, str] = {}
        self._seeds: SeedDialer | None = None  # started once the node is up
        self._net: NetLink | None = None
        self._peer_ids: dict[str, str] = {}  # connected node name -> its node id
        self._here_lock = threading.Lock()
        self._here_queued = 0  # frames from other nodes waiting for the I/O thread (`_deliver_here`)
        self._node_watchers: dict[str, list[Callable[[], None]]] = {}
        self._watch_lock = threading.Condition()  # also notified when a node comes up or goes
        self._node_events = NodeEvents(self._rt)  # monitor_nodes subscribers
        self._connect_all = cluster.connect_all
        self._link_send_wait = (cluster.net_ticktime or DEFAULT_NET_TICKTIME) * LINK_SEND_WAIT_SHARE
        # Who this incarnation counts as its cluster (`actors._core.node.membership`), and
        # why it ended, once it has: then `otpy node` starts a new one.
        self._members = Membership(cluster.name or "")
        self._ended: str | None = None
        self._on_ended: list[Callable[[str], None]] = []
        self._log_limit = RateLimit(60.0)  # refused handshakes: a line per peer per minute
        if cluster.name is not None:
            assert cluster.listen is not None
            self._net = NetLink(cluster.name, cluster.listen, key, on_frame=self._net_frame,
                                on_up=self._net_up, on_down=self._net_down, refuse=self._net_refuse,
                                on_rejected=self._net_rejected, net_ticktime=cluster.net_ticktime, incarnation=incarnation)
            try:
                self.address = self._net.start()
            except BaseException:
                self._net = None
                self.close()
                raise
            self._rt.relay = self._relay
        self._write_node_file()
        _lifecycle.track(self)
        if metrics_port is not None:
            try:
                self.metrics_server = MetricsServer(self, port=metrics_port, bind=metrics_bind)
            except BaseException:
                self.close()
                raise
            self.metrics_address = self.metrics_server.address
            self._on_close.append(self.metrics_server.close)
        if cluster.seeds and self._net is not None:
            # Seeds up now are connected before the node is handed out; the
            # others are dialed in the background until they come (and again
            # whenever they are lost).
            self._seeds = SeedDialer(cluster.seeds, self._net.connect, lambda peer: peer in self._peer_ids)
            self._seeds.start()
            self._seeds.wait_first_round(SEED_WAIT)

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
            payload = cloudpickle.dumps((cls, tuple(args), dict(kwargs or {}), name, None, False, limit))
            kind, detail = self._spawn_on([node], host, cpus, payload, timeout)
            if kind == "ok":
                return detail
            if kind == "ignore":
                return None
            if kind == "already_registered":
                raise AlreadyRegistered(("already_started", detail), f"name {name!r} is taken on {node}")
            raise SpawnError(detail, f"{getattr(cls, '__name__', cls)} failed to start on {node}")
        ref = spawn(self._rt, cls, args, kwargs or {}, name=name, host=host, cpus=cpus, mailbox=limit)
        if ref is not None:
            self._top.append(ref)
        return ref

    def whereis(self, name: str, node: str | None = None, timeout: float | None = 5.0) -> ActorRef | None:
        """The actor registered as ``name`` here, or on the connected ``node``."""
        if node is not None and node != self.name:
            return self._rt.sys_request(self._node_proc_of(node), "whereis", (name,), timeout=timeout)
        return self._rt.registry.whereis(name)

    # -- other nodes -----------------------------------------------------------------

    def connect(self, address: str, timeout: float = 10.0) -> str:
        """Join the node listening at ``address`` (``tcp://HOST:PORT``); returns its name.

        Connecting to a node already connected returns its name at once.
        Raises `ConnectError` when it cannot be reached in ``timeout``, does
        not hold this cluster's key (the CurveZMQ handshake fails), or is an
        incarnation one of the two nodes declared down before (it must
        restart to rejoin)."""
        self._check_open()
        if self._net is None:
            raise NetError("this node is not distributed: give Node(name=..., listen=...)")
        return self._net.connect(address, timeout)

    def nodes(self, node: str | None = None, timeout: float | None = 5.0) -> list[str]:
        """The names of the nodes connected now; with ``node``, those the connected node ``node``
        is connected to, asked over the cluster (`Exit` ``noconnection`` when it is not connected)."""
        if node is not None and node != self.name:
            return sorted(self._rt.sys_request(self._node_proc_of(node), "nodes", (), timeout=timeout))
        return sorted(self._peer_ids)

    def peers(self) -> list[dict[str, Any]]:
        """The nodes connected now, by name: ``name``, ``address``, ``incarnation`` (hex) and
        ``up_since`` (wall-clock seconds of their nodeup), as ``otpy status`` lists them."""
        with self._watch_lock:
            return self._members.peers()

    @property
    def ended(self) -> str | None:
        """Why this incarnation has ended (None while it has not).

        A node ends its incarnation when it finds itself on the minority side
        of a network cut, or learns that a peer declared it down (see
        docs/distribution.md, "When the network fails"): it disconnects from
        every node, stops dialing its seeds and refuses every handshake.  The
        program then closes it and starts a new `Node` (a new incarnation, which
        the others admit); ``otpy node`` does so by itself."""
        return self._ended

    def on_ended(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(reason)`` once this incarnation ends (at once if it has; from a
        thread of the node: it must be quick)."""
        with self._watch_lock:
            if self._ended is None:
                self._on_ended.append(fn)
                return
        fn(self._ended)

    def _end_incarnation(self, reason: str) -> None:
        with self._watch_lock:
            if self._ended is not None or self._closed:
                return
            self._ended = reason
            callbacks, self._on_ended = self._on_ended, []
            peers = list(self._peer_ids)
            self._watch_lock.notify_all()
        log.warning("node %s ends incarnation %s: %s", self.name, self.id, reason)
        if self._seeds is not None:
            self._seeds.stop()
        net = self._net
        for peer in peers if net is not None else []:
            net.disconnect(peer)
        for fn in callbacks:
            try:
                fn(reason)
            except Exception:
                log.exception("an on_ended callback of node %s failed", self.id)

    def wait_for_node(self, name: str, timeout: float = 10.0) -> bool:
        """Block until node ``name`` is connected (it connected to this one,
        say); False after ``timeout``."""
        with self._watch_lock:
            return self._watch_lock.wait_for(lambda: name in self._peer_ids, timeout)

    def monitor_node(self, name: str) -> NodeMonitor:
        """Watch node ``name``: the returned `NodeMonitor` waits for
        ``("nodedown", name)``, given once; at once when it is not connected."""
        watch = NodeMonitor(name)
        self._watch_node(name, watch.fire)
        return watch

    def monitor_nodes(self, ref: ActorRef, flag: bool = True) -> None:
        """``net_kernel:monitor_nodes(Flag)`` for the actor ``ref``: it gets
        ``("nodeup", name)`` and ``("nodedown", name)`` in ``handle_info`` for
        every node that connects or is lost from now on, in order (nodes
        connected already are not announced: read `nodes` after this).
        ``flag=False`` ends it; a subscriber that dies is forgotten."""
        self._check_open()
        self._node_events.subscribe(ref, flag)

    def _watch_node(self, name: str, fire: Callable[[], None]) -> None:
        with self._watch_lock:
            if name in self._peer_ids:
                self._node_watchers.setdefault(name, []).append(fire)
                return
        fire()

    def _node_proc_of(self, node: str) -> str:
        node_id = self._peer_ids.get(node)
        if node_id is None:
            raise Exit("noconnection", f"node {node!r} is not connected")
        return qualify(node_id, self._rt.node_proc)

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
            outcome = self._rt.sys_request(ref.proc, "adopt_name", (ref.id, name))
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
        self._rt.sys_send(holder.proc, "drop_name", (holder.id, name))

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
        result = list(self._rt.info())
        for host in list(self._pool.hosts.values()):
            if host.state != "up":
                continue
            try:
                for entry in self._rt.sys_request(host.proc, "info", (), timeout=timeout):
                    entry["cpus"] = host.cpus
                    entry["host"] = host.label or host.proc
                    result.append(entry)
            except (Exit, CallTimeout):
                continue
        names = {ref.id: name for name, ref in self.registered().items()}
        for entry in result:
            entry.setdefault("host", "node")
            entry["registered"] = names.get(entry["id"])
        return result

    def stats(self, timeout: float = 2.0) -> dict[str, Any]:
        """Counters, gauges and histograms merged over every process of the node."""
        snaps = [_stats.current().snapshot()]
        for host in list(self._pool.hosts.values()):
            if host.state == "up":
                try:
                    snaps.append(self._rt.sys_request(host.proc, "stats", (), timeout=timeout))
                except (Exit, CallTimeout):
                    continue
        return _stats.merge_snapshots(snaps)

    def process_stats(self, timeout: float = 2.0) -> list[dict[str, Any]]:
        """One entry per OS process of the node (its own and every host up):
        ``{"proc", "pid", "stats"}``, ``stats`` being that process's own snapshot
        (counters, gauges, histograms, labelled counters, and under ``actors`` the
        per-class call, cast and exit counts), or None when it did not answer
        within ``timeout``.  `stats` is their sum; this keeps them apart.  The
        hosts are asked all at once, so one slow host costs ``timeout``, not one per host."""
        hosts = [h for h in self._pool.in_use() if h.state == "up"]
        answers: dict[str, Any] = {}
        arrived = threading.Condition()

        def answer(proc: str) -> Callable[[bool, Any], None]:
            def done(ok: bool, value: Any) -> None:
                with arrived:
                    answers[proc] = value if ok else None
                    arrived.notify_all()
            return done

        for host in hosts:
            self._rt.sys_request(host.proc, "stats", (), callback=answer(host.proc))
        out = [{"proc": self._rt.proc, "pid": os.getpid(), "stats": self._rt.stats_snapshot()}]
        with arrived:
            arrived.wait_for(lambda: len(answers) == len(hosts), timeout)
            got = dict(answers)
        out += [{"proc": h.proc, "pid": h.pid, "stats": got.get(h.proc)} for h in hosts]
        return out

    def net_stats(self) -> dict[str, int]:
        """The node-to-node link's counters (frames and heartbeat ticks in and out,
        connections up and down, ...); empty for a node that is not distributed."""
        return self._net.stats() if self._net is not None else {}

    def on_close(self, callback: Callable[[], None]) -> None:
        """Run ``callback()`` when the node closes, first, before its actors
        stop (the newest callback first): for what a program started beside
        the node's actors and that reads them, such as an observer
        (`actors.tools.observer.observe`), so it never outlives the node.  A
        callback that raises is logged and the close goes on.  `RuntimeError`
        when the node is closed."""
        self._check_open()
        self._on_close.append(callback)

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
        rt = self._rt
        rt.register_sys("register", lambda src, name, ref: rt.registry.register(name, ref))
        rt.register_sys("unregister", lambda src, name, ref: rt.registry.unregister(name, ref))
        rt.register_sys("whereis", lambda src, name: rt.registry.whereis(name))
        rt.register_sys("config_set", lambda src, s, k, v: self._config_set(s, k, v))
        rt.register_sys("hosts", lambda src: self.hosts())
        rt.register_sys("actors", lambda src: self.actors(), threaded=True)
        rt.register_sys("node_stats", lambda src: self.stats(), threaded=True)
        rt.register_sys("registered", lambda src: self.registered())
        rt.register_sys("config", lambda src: self.config.to_dict())
        rt.register_sys("kill", lambda src, ref: self.kill(ref))
        rt.register_sys("exit", lambda src, ref, reason: self.exit(ref, reason))
        rt.register_sys("rspawn", self._on_rspawn, threaded=True)
        rt.register_sys("spawn_on", self._on_spawn_on, threaded=True)
        rt.register_sys("monitor_node", self._on_monitor_node)
        rt.register_sys("nodes", lambda src: self.nodes())
        rt.register_sys("peers", lambda src: self.peers())
        rt.register_sys("known_nodes", self._on_known_nodes)
        rt.register_sys("whereis_on", self._on_whereis_on, threaded=True)
        rt.register_sys("monitor_nodes", lambda src, ref, flag: self._node_events.subscribe(ref, flag),
                        threaded=True)
        rt.register_sys("peer_proc_down", self._on_peer_proc_down)
        self._pool.serve(rt, on_up=self._host_up, on_gone=self._host_gone)

    # -- distribution (link callbacks run on the link's I/O thread) -------------------

    def _spawn_on(self, candidates: list[str], host: str | None, cpus: Any, payload: bytes,
                  timeout: float | None) -> tuple[str, Any]:
        """Spawn on the first of ``candidates`` that is up (this node included)."""
        for candidate in candidates:
            if candidate == self.name:
                return self._on_rspawn(self._rt.proc, host, cpus, payload)
            node_id = self._peer_ids.get(candidate)
            if node_id is not None:
                cpu_list = sorted(cpus) if isinstance(cpus, (set, frozenset, list, tuple)) else cpus
                try:
                    return self._rt.sys_request(qualify(node_id, self._rt.node_proc), "rspawn",
                                                (host, cpu_list, payload), timeout=timeout)
                except Exit as exc:
                    if exc.reason != "noconnection":
                        raise
                    # lost meanwhile: the next candidate
        raise Exit("noconnection", f"none of the nodes {candidates} is connected")

    def _on_spawn_on(self, src: str, candidates: list[str], host: str | None, cpus: Any,
                     payload: bytes) -> tuple[str, Any]:
        """An actor's ``spawn(..., node=...)``, from this node's processes."""
        try:
            return self._spawn_on(candidates, host, cpus, payload, None)
        except Exit as exc:
            return ("error", exc.reason)

    def _on_rspawn(self, src: str, host: str | None, cpus: Any, payload: bytes) -> tuple[str, Any]:
        """Another node's ``spawn(..., node=<this one>)``: placed here as a local spawn is."""
        cls, args, kwargs, name, parent, link, *more = cloudpickle.loads(payload)
        try:
            ref = spawn(self._rt, cls, args, kwargs, name=name, host=host, cpus=cpus, link=link, parent=parent,
                        mailbox=more[0] if more else None)
        except AlreadyRegistered as exc:
            return ("already_registered", exc.holder)
        except SpawnError as exc:
            return ("error", exc.reason)
        except (TypeError, ValueError) as exc:
            return ("error", ("badarg", str(exc)))
        return ("ignore", None) if ref is None else ("ok", ref)

    def _on_monitor_node(self, src: str, name: str, watcher: ActorRef) -> None:
        """An actor's ``monitor_node``: ``("nodedown", name)`` goes to its ``handle_info``."""
        self._watch_node(name, lambda: self._rt.send(watcher, ("nodedown", name)))

    def _on_whereis_on(self, src: str, name: str, node: str) -> ActorRef | None:
        """An actor's ``whereis(name, node=...)``: None when that node is not connected."""
        try:
            return self.whereis(name, node=node)
        except Exit as exc:
            if exc.reason == "noconnection":
                return None
            raise

    def _relay(self, dest: str, frame: bytes) -> None:
        """A frame for a process of another node (from any thread of this process, or a host's)."""
        node_id, _, proc = dest.partition("|")
        peer = node_id.rpartition("@")[0]
        net = self._net
        if net is None or self._peer_ids.get(peer) != node_id:
            # That node (or that incarnation of it) is gone: dropped, and
            # whatever waits on that process fails with noconnection.
            self._rt.call_soon(lambda: self._remote_proc_gone(owner_of(dest), "noconnection"))
            return
        try:
            net.send(peer, [proc.encode(), frame])
        except NetError:
            pass  # lost meanwhile: on_down reports it

    def _remote_proc_gone(self, proc: str, reason: Any) -> None:
        """A process of another node is gone: fail what points at it, here and in every host (I/O thread).

        Told again for a process already known gone here: a frame dropped in
        `_relay` may come from a host that started after the loss and so
        does not know yet (its proc_down is idempotent)."""
        for host in list(self._pool.hosts.values()):
            if host.state == "up":
                self._rt.sys_send(host.proc, "proc_down", (proc, reason))
        self._rt.proc_down(proc, reason)

    def _on_peer_proc_down(self, src: str, proc: str, reason: Any) -> None:
        """Another node says one of its host processes died (its report of what local ones get)."""
        node_id, bar, _ = src.partition("|")
        if bar and isinstance(proc, str) and "|" not in proc:
            gone = qualify(node_id, proc)
            net = self._net
            if net is None:
                self._remote_proc_gone(gone, reason)
                return
            # That host may have sent on a connection of its own: what it sent
            # before it died is delivered before its death is acted on.
            try:
                net.after_drain(lambda: self._rt.call_soon(lambda: self._remote_proc_gone(gone, reason)))
            except NetError:  # the link is closing: so is this node
                pass

    def _net_frame(self, peer: str, frames: list[bytes]) -> None:
        """A frame from another node: delivered to its process here as a local frame."""
        inc = self._net.incarnation_of(peer) if self._net is not None else None
        if inc is None or len(frames) != 2:
            self._rt.stats.increment("actors.net.dropped_frames")
            return
        try:
            dest = frames[0].decode()
            frame = requalify(frames[1], f"{peer}@{inc:x}")
        except (UnicodeDecodeError, FrameError):
            self._rt.stats.increment("actors.net.dropped_frames")
            return
        if not dest or "|" in dest:
            self._rt.stats.increment("actors.net.dropped_frames")
            return
        owner = owner_of(dest)
        if owner == self._rt.proc:
            if dest == owner:
                self._deliver_here(frame)
            else:
                self._rt.send_frame(dest, frame, self._link_send_wait)
            return
        host = self._pool.hosts.get(owner)
        if host is not None and host.state != "dead":
            self._rt.send_frame(dest, frame, self._link_send_wait)
            return
        # A process of this node that is gone (or never was): a signal to one
        # of its actors is answered as one to a dead actor is (a call fails
        # with noproc, a monitor gets DOWN noproc, a link an EXIT noproc);
        # anything else is dropped.
        if dest == owner:
            try:
                kind = decode_frame(frame)[0]
            except FrameError:
                return
            if kind not in (K_REPLY, K_REPLY_EXIT, K_SYS):
                self._rt.call_soon(lambda: self._rt.handle_frames([frame]))

    def _deliver_here(self, frame: bytes) -> None:
        """A frame from another node for this process (link thread): delivered
        in place, as a thread of this process delivers to its actors, with no
        hand-off to the I/O thread.  A system request runs on the I/O thread,
        as every system handler here does; while one waits there, later
        frames queue behind it, so none overtakes it."""
        with self._here_lock:
            queue = self._here_queued > 0 or frame_kind(frame) == K_SYS
            if queue:
                self._here_queued += 1
        if not queue:
            self._rt.handle_frames([frame])
            return

        def run() -> None:
            try:
                self._rt.handle_frames([frame])
            finally:
                with self._here_lock:
                    self._here_queued -= 1

        self._rt.call_soon(run)

    def _tell_net_peers(self, proc: str, peers: Mapping[str, str]) -> None:
        """Let host ``proc`` send to these nodes (name -> node id) on
        connections of its own (`actors._core.net.direct`), not through this process."""
        net = self._net
        if net is None:
            return
        key = net.key
        for peer, node_id in peers.items():
            address = net.address_of(peer)
            if address is not None:
                self._rt.sys_send(proc, "net_peer", (node_id, address, key.public.decode() if key else None,
                                                     key.secret.decode() if key else None))

    def _host_up(self, proc: str) -> None:
        """A host of this node is up: it may reach every connected node on a connection of its own."""
        self._tell_net_peers(proc, dict(self._peer_ids))

    def _host_gone(self, proc: str, reason: Any) -> None:
        """A host of this node died: other nodes may point into it too."""
        for node_id in list(self._peer_ids.values()):
            self._rt.sys_send(qualify(node_id, self._rt.node_proc), "peer_proc_down", (proc, reason))

    def _net_up(self, peer: str, incarnation: int) -> None:
        for host in [h for h in list(self._pool.hosts.values()) if h.state == "up"]:
            self._tell_net_peers(host.proc, {peer: f"{peer}@{incarnation:x}"})
        address = self._net.address_of(peer) if self._net is not None else None
        with self._watch_lock:
            self._peer_ids[peer] = f"{peer}@{incarnation:x}"
            self._members.node_up(PeerInfo(peer, address, incarnation, time.time()))
            self._watch_lock.notify_all()
        log.info("nodeup: node %s (incarnation %x) at %s", peer, incarnation, address)
        self._rt.call_soon(lambda: self._node_events.publish("nodeup", peer))
        if self._connect_all:
            # Here, on the link's thread, not later: what this node sends the
            # peer from now on goes after the list, so an answer to the peer's
            # first request tells it the list has been handled.
            self._share_nodes(peer)

    def _share_nodes(self, peer: str) -> None:
        """Tell node ``peer``, just connected, which other nodes this one is
        connected to and where they listen, so it connects to them too: with
        ``connect_all`` (Erlang's default) the nodes of a cluster form a full
        mesh, whichever node each was told to join."""
        net = self._net
        if net is None:
            return
        with self._watch_lock:
            names = [name for name in self._peer_ids if name != peer]
        known = [[name, address] for name in names if (address := net.address_of(name)) is not None]
        if not known:
            return
        try:
            self._rt.sys_send(self._node_proc_of(peer), "known_nodes", (known,))
        except Exit:  # lost meanwhile
            pass

    def _on_known_nodes(self, src: str, known: Any) -> None:
        """A connected node's list of its own peers (`_share_nodes`): connect
        to those this node is not connected to yet, in the background.  A
        node this one declared down answers with a refusal; that is all."""
        net = self._net
        if net is None or not self._connect_all or type(known) is not list:
            return
        for entry in known[:_MAX_SHARED_NODES]:
            if type(entry) is not list or len(entry) != 2 or not all(type(x) is str for x in entry):
                continue
            name, address = entry
            if name == self.name or name in self._peer_ids:
                continue
            try:
                net.connect_soon(address, expect=name, timeout=_SHARED_CONNECT_TIMEOUT)
            except NetError as exc:  # an address this node must not dial (no key for it)
                log.warning("not connecting to node %s at %s, known from %s: %s", name, address, src, exc)

    def _net_refuse(self, peer: str, incarnation: int) -> str | None:
        """An incarnation declared down here stays down (Akka calls it
        quarantine): a node that was stopped (SIGSTOP) or cut off past
        ``net_ticktime`` and comes back must restart to rejoin, so the refs
        that failed with ``noconnection`` never start answering again."""
        if self._ended is not None:
            return f"node {self.name} is ending incarnation {self.id} ({self._ended})"
        why = self._lost.get(f"{peer}@{incarnation:x}")
        if why is None:
            return None
        reason = (f"node {peer} (incarnation {incarnation:x}) was declared down by {self.name} ({why}); "
                  f"an incarnation that was lost never reconnects: it starts a new one to rejoin")
        if self._log_limit.allow(f"refused {peer}", time.monotonic()):
            log.warning("refused a handshake from node %s: %s", peer, reason)
        assert self._net is not None
        # What the refused node needs to decide whether it is the one to end (`_net_rejected`).
        return {"reason": reason, "quarantined": True, "node": peer, "inc": incarnation, "by": self.name,
                "by_inc": self._net.incarnation, "by_up": len(self._peer_ids)}

    def _net_rejected(self, name: str | None, address: str, body: dict[str, Any]) -> None:
        """A node turned this one's handshake away: logged (a line per peer per minute); if it
        declared this incarnation down, this node may have to end it (`actors._core.node.membership.yields`)."""
        net = self._net
        if net is None:
            return
        if self._log_limit.allow(f"rejected {address}", time.monotonic()):
            log.warning("node %s at %s refused this node's handshake: %s", name or "?", address,
                        body.get("reason"))
        other, other_inc, other_up = body.get("by"), body.get("by_inc"), body.get("by_up")
        if (body.get("quarantined") is not True or body.get("node") != self.name
                or body.get("inc") != net.incarnation or not isinstance(other, str)
                or type(other_inc) is not int or type(other_up) is not int):
            return
        with self._watch_lock:
            mutual = f"{other}@{other_inc:x}" in self._lost
            my_up = len(self._peer_ids)
        if yields(self.name or "", my_up, other, other_up, mutual):
            self._end_incarnation(f"node {other} declared this incarnation down"
                                  + (f" and wins the tie ({other_up} nodes connected there, {my_up} here)"
                                     if mutual else ""))

    def _net_down(self, peer: str, incarnation: int, reason: str) -> None:
        node_id = f"{peer}@{incarnation:x}"
        with self._watch_lock:
            self._lost[node_id] = reason
            if self._peer_ids.get(peer) == node_id:
                del self._peer_ids[peer]
                self._members.node_down(peer, reason)
            watchers = self._node_watchers.pop(peer, [])
            minority = reason == SILENCE and self._members.in_minority()
            reachable, members = len(self._members.up) + 1, len(self._members.members())
            self._watch_lock.notify_all()
        if self._seeds is not None:
            self._seeds.node_changed()
        # A node that closed (said goodbye) is no news; a lost one is.
        log.log(logging.INFO if reason == "peer_closed" else logging.WARNING,
                "nodedown: node %s (incarnation %x) is down (%s): what pointed at it exits with noconnection",
                peer, incarnation, reason)
        if minority:
            self._end_incarnation(f"on the minority side of a network cut ({reachable} of {members} nodes "
                                  f"reachable)")

        def down() -> None:
            for host in list(self._pool.hosts.values()):
                if host.state == "up":
                    self._rt.sys_send(host.proc, "node_down", (node_id, "noconnection"))
            self._rt.node_down(node_id, "noconnection")
            for fire in watchers:
                fire()
            self._node_events.publish("nodedown", peer)

        self._rt.call_soon(down)

    def _config_set(self, section: str, key: str, value: str | None) -> None:
        if value is None:
            self.config.delete(section, key)
        else:
            self.config.set(section, key, value)

    def _write_node_file(self) -> None:
        info = {"node_id": self.id, "pid": os.getpid(), "proc": self._rt.proc, "rundir": self.rundir}
        path = os.path.join(self.rundir, "node.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(info, fh)

    # -- shutdown ------------------------------------------------------------------------

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
            if self._net is not None:
                self._rt.relay = None
                self._net.close()
            if self._seeds is not None:
                self._seeds.close()  # the link is closed: an attempt under way has failed
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


# The longest socket file name a node's processes put in its runtime directory:
# an attached view's reply channel, ``cli<pid>v<view>~r<n>.sock``, with the
# largest pid Linux gives (4194304), ten thousand views and a thousand reply
# channels.  Hosts (``h<n>.sock``) and the log socket (``log.sock``) are shorter.
_SOCKET_NAME_ROOM = len("cli4194304v9999~r999.sock")
# A Unix socket's path holds at most this many bytes (``sun_path`` less its NUL).
_SOCKET_PATH_MAX = 107


def _metrics_port(cfg: _config.Config) -> int | None:
    """``[metrics] port`` (None when unset): a bad value refuses the node before anything starts."""
    if cfg.get("metrics", "port") is None:
        return None
    port = cfg.get_integer("metrics", "port", 0)
    if not 0 <= port <= 65535:
        raise _config.ConfigError(f"[metrics] port = {port!r} must be 0..65535")
    return port


def _check_rundir(rundir: str) -> None:
    """Refuse a runtime directory whose socket paths would not fit in ``sun_path``: the
    node would otherwise fail halfway through starting, on whichever socket came first."""
    size, limit = len(os.fsencode(rundir)), _SOCKET_PATH_MAX - len("/") - _SOCKET_NAME_ROOM
    if size > limit:
        raise ValueError(f"the runtime directory {rundir!r} is {size} bytes long; "
                         f"the node's socket files need it at most {limit} bytes "
                         "(pass a shorter rundir=, or set TMPDIR to a shorter directory)")


def _as_config(config: Any) -> _config.Config:
    if config is None:
        return _config.Config()
    if isinstance(config, _config.Config):
        return config
    if isinstance(config, Mapping):
        return _config.Config(config)
    return _config.Config.from_ini(config)

