"""The IOQ facade (the seed's `ioq` module): `call` and the node-wide queries.

`call(fd, msg, dimensions)` is what a host program uses for every IO
request.  It routes like `ioq:call`:

* ``("prompt", _)`` / ``("data", _)`` messages go through the os-process
  queue (a permit from ``ioq_osq``, then a direct call);
* with ``[ioq2] enabled`` the request goes to one of ``ioq_server_1..N``,
  chosen by ``[ioq2] dispatch_strategy``, unless its class is in
  ``[ioq2.bypass]``;
* otherwise to IOQ1's ``ioq_server``, unless its class is in ``[ioq.bypass]``;
* a bypassed request is a direct call to the file actor ``fd``.

With ``fd_hash`` a file actor that lives in the same OS process as an IOQ2
server (placed in its host, ``ioq<i>``) is always served by that server, so
submitting to it and hearing back never leaves the process; other files are
spread by a CRC-32 of their id.  Either way all requests for one file go
through one server, which is what ``fd_hash`` promises.

The per-request path is kept lean: routing settings are read from config
once and re-read only after a config change (a listener marks them stale),
and server refs are looked up once per process and refreshed only when a
call finds the server gone (``Exit("noproc")``, e.g. after a restart).

Errors: an IO error reported by the file is raised as itself; a file actor
that is dead or dies before answering raises `IoTargetDown` with its exit
reason; a queue server that is not running raises `actors.Exit`.
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

from actors import Exit
from actors import config as _config
from actors import stats as _stats
from actors.config import Config

from . import ioq_stats
from ._names import current_node_id, whereis
from .dispatch import current_cpu, fd_hash, server_name
from .file_server import IoFailure, file_call
from .ioq_config import (
    BYPASS_SECTION,
    DISPATCH_FD_HASH,
    DISPATCH_RANDOM,
    DISPATCH_SINGLE_SERVER,
    IOQ2_SECTION,
    bypassed_classes,
    check_concurrency,
    dispatch_strategy,
    ioq2_enabled,
)
from .osq import OSQ_SERVER, RELEASE
from .request import BAD_MAGIC_NUM, QueueDepths, error_queue_depths, request_dimensions, rw
from .server1 import IOQ1_REQUEST, IOQ1_SERVER
from .server1_state import IOQ1_BYPASS_SECTION, analyze_priority
from .server2 import flat_dimensions, payload_with

__all__ = [
    "DEFAULT_TIMEOUT",
    "call",
    "get_concurrency",
    "get_disk_concurrency",
    "get_disk_counters",
    "get_disk_queues",
    "get_osproc_queues",
    "get_osproc_requests",
    "get_queue_depths",
    "get_state",
    "ioq2_servers",
    "num_servers",
    "set_concurrency",
    "set_disk_concurrency",
    "update_config",
]

#: Seconds a caller waits for its IO (the seed waits forever; we never do).
DEFAULT_TIMEOUT = 60.0
#: Seconds the node-wide queries wait for all servers (the seed's ``pcall`` 500 ms).
QUERY_TIMEOUT = 0.5
SERVERS_KEY = "servers"


def num_servers(config: Config) -> int:
    """``[ioq2] servers``, default the machine's CPU count: how many IOQ2 servers run."""
    default = os.cpu_count() or 1
    try:
        n = config.get_integer(IOQ2_SECTION, SERVERS_KEY, default)
    except Exception:  # an unparseable value: the default, like every IOQ setting
        return default
    return n if n >= 1 else default


def ioq2_servers(config: Config | None = None) -> list[str]:
    """The registered names of the IOQ2 servers (the seed's ``get_ioq2_servers``)."""
    n = num_servers(config or _config.current())
    return [server_name(i) for i in range(1, n + 1)]


# -- cached routing settings ------------------------------------------------------


class _Routing:
    __slots__ = ("enabled", "bypass2", "bypass1", "strategy", "n")

    def __init__(self, config: Config) -> None:
        self.enabled = ioq2_enabled(config)
        self.bypass2 = bypassed_classes(config)
        self.bypass1 = frozenset(k for k, v in config.section(IOQ1_BYPASS_SECTION).items() if v == "true")
        self.strategy = dispatch_strategy(config)
        self.n = num_servers(config)


class _Cache:
    """Per process: routing settings of the current config, refs of the current node."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.config: Config | None = None
        self.routing: _Routing | None = None
        self.listening: dict[int, Config] = {}
        self.node_id: str | None = None
        self.refs: dict[str, Any] = {}
        #: (file actor id, dimensions) -> (server name, server ref, the file's
        #: wire form, `flat_dimensions`), for the strategies that always send
        #: one file to one server, and dimensions whose class is not bypassed;
        #: valid for `routing` in `node_id`.
        self.routes: dict[tuple[str, Any], tuple[str, Any, list[Any], Any]] = {}

    def settings(self) -> _Routing:
        cfg = _config.current()
        routing = self.routing
        if routing is not None and self.config is cfg:
            return routing
        with self.lock:
            if id(cfg) not in self.listening:
                self.listening[id(cfg)] = cfg
                cfg.listen(self._on_change)
            self.config = cfg
            self.routing = routing = _Routing(cfg)
            self.routes = {}
        return routing

    def _on_change(self, section: str, key: str, value: Any, persist: bool) -> None:
        if section in (IOQ2_SECTION, BYPASS_SECTION, IOQ1_BYPASS_SECTION):
            self.routing = None

    def ref(self, name: str, node: str | None = None) -> Any:
        """The ref registered as ``name`` in the current node (``node``: its id,
        when the caller has it already)."""
        if node is None:
            node = current_node_id()
        if node != self.node_id:
            self.refs = {}
            self.routes = {}
            self.node_id = node
        ref = self.refs.get(name)
        if ref is None:
            ref = whereis(name)
            if ref is None:
                raise Exit("noproc", f"{name} is not running")
            self.refs[name] = ref
        return ref

    def forget(self, name: str, ref: Any) -> None:
        if self.refs.get(name) == ref:
            del self.refs[name]
        self.by_proc = None
        self.routes = {}

    by_proc: dict[str, int] | None = None
    by_proc_n = 0

    def colocated(self, proc: str, n: int, node: str) -> int | None:
        """The id of the IOQ2 server living in OS process ``proc`` of node ``node``, if any."""
        by_proc = self.by_proc
        if by_proc is None or self.by_proc_n != n or self.node_id != node:
            by_proc = {}
            for sid in range(1, n + 1):
                try:
                    by_proc[self.ref(server_name(sid), node).proc] = sid
                except Exit:
                    pass
            self.by_proc, self.by_proc_n = by_proc, n
        return by_proc.get(proc)


_cache = _Cache()
#: Bound on `_Cache.routes` ((file actor, dimensions) pairs remembered per process).
_MAX_ROUTES = 10_000
#: ``ioq_server_<N>`` for the first N, built once (index = N).
_server_names = [server_name(i) for i in range(256)]


def _call_server(name: str, payload: Any, timeout: float | None, node: str | None = None, ref: Any = None) -> Any:
    """Call a queue server by name through the cached ref (``ref``, when the
    caller has it already); one refresh on ``noproc``."""
    if ref is None:
        ref = _cache.ref(name, node)
    try:
        reply = ref.call(payload, timeout)
    except Exit as exc:
        if exc.reason != "noproc":
            raise
        _cache.forget(name, ref)
        fresh = _cache.ref(name)
        if fresh == ref:
            raise
        reply = fresh.call(payload, timeout)
    if type(reply) is IoFailure:
        raise reply.exception()
    return reply


# -- the request path ----------------------------------------------------------------


def call(fd: Any, msg: Any, dimensions: Any = None, *, timeout: float | None = DEFAULT_TIMEOUT) -> Any:
    """Do IO ``msg`` on the file actor ``fd`` through IOQ (the seed's `ioq:call/3`).

    ``dimensions`` is ``(class, shard)``, ``(class, shard, group_id)`` or None.
    Returns what the file answered.
    """
    if type(msg) is tuple and len(msg) == 2 and msg[0] in ("prompt", "data"):
        return _osq_call(fd, msg, dimensions, timeout)
    routing = _cache.settings()
    t0 = time.monotonic()
    if routing.enabled:
        node = current_node_id()
        if node == _cache.node_id:
            try:
                route = _cache.routes.get((fd.id, dimensions))
            except TypeError:  # unhashable dimensions: no route kept for them
                route = None
            if route is not None:  # a known file with these dimensions: not bypassed, parsed, flattened
                name, ref, wire, flat = route
                return _call_server(name, payload_with(wire, msg, dimensions, flat, t0), timeout, node, ref)
        class_ = request_dimensions(dimensions)[0]
        if class_ in routing.bypass2:
            ioq_stats.record_bypassed(_stats.current(), rw(msg))
            return file_call(fd, msg, timeout)
        wire = fd.to_wire()
        flat = flat_dimensions(dimensions)
        payload = payload_with(wire, msg, dimensions, flat, t0)
        n = routing.n
        strategy = routing.strategy
        fixed = n == 1 or strategy == DISPATCH_SINGLE_SERVER or strategy == DISPATCH_FD_HASH
        if n == 1 or strategy == DISPATCH_SINGLE_SERVER:
            sid = 1
        elif strategy == DISPATCH_FD_HASH:
            sid = _cache.colocated(fd.proc, n, node) or fd_hash(fd.id, n)
        elif strategy == DISPATCH_RANDOM:
            sid = random.randrange(n) + 1
        else:
            sid = current_cpu() % n + 1
        name = _server_names[sid] if sid < len(_server_names) else server_name(sid)
        if fixed:
            routes = _cache.routes
            if len(routes) >= _MAX_ROUTES:
                routes.clear()
            try:
                routes[(fd.id, dimensions)] = (name, _cache.ref(name, node), wire, flat)
            except TypeError:  # unhashable dimensions: routed every time
                pass
        return _call_server(name, payload, timeout, node)
    class_, _channel = analyze_priority(dimensions)
    if class_ in routing.bypass1:
        ioq_stats.record_ioq1_bypassed(_stats.current(), class_, rw(msg))
        return file_call(fd, msg, timeout)
    return _call_server(IOQ1_SERVER, (IOQ1_REQUEST, fd.to_wire(), msg, dimensions, t0), timeout)


def _osq_call(fd: Any, msg: Any, dimensions: Any, timeout: float | None) -> Any:
    """The seed's `ioq_osq:call`: a permit, a direct call, the permit back."""
    permit = _call_server(OSQ_SERVER, ("rlimit", dimensions, time.monotonic()), timeout)
    try:
        return file_call(fd, msg, timeout)
    finally:
        try:
            _cache.ref(OSQ_SERVER).send((RELEASE, permit))
        except Exit:
            pass


# -- node-wide queries -----------------------------------------------------------------


def _each_server(request: Any, timeout: float) -> list[Any]:
    """Ask every IOQ2 server; raises when one does not answer within the budget."""
    deadline = time.monotonic() + timeout
    out = []
    for name in ioq2_servers():
        left = max(0.001, deadline - time.monotonic())
        out.append(_call_server(name, request, left))
    return out


def get_queue_depths(timeout: float = QUERY_TIMEOUT) -> QueueDepths:
    """Queued requests summed over the IOQ2 servers (``BAD_MAGIC_NUM`` counts on failure)."""
    try:
        parts = _each_server("get_queue_depths", timeout)
    except Exception:
        return error_queue_depths()
    total: QueueDepths = {"compaction": 0, "replication": 0, "low": 0, "channels": {}}
    for part in parts:
        for key in ("compaction", "replication", "low"):
            total[key] += part[key]
        for user, counts in part["channels"].items():
            acc = total["channels"].setdefault(user, [0, 0, 0])
            for i in range(3):
                acc[i] += counts[i]
    return total


def get_concurrency(timeout: float = QUERY_TIMEOUT) -> int:
    """The node's IOQ2 concurrency: the sum over servers (``BAD_MAGIC_NUM`` on failure)."""
    try:
        return sum(_each_server("get_concurrency", timeout))
    except Exception:
        return BAD_MAGIC_NUM


def set_concurrency(value: int, timeout: float = 1.0) -> int:
    """Set every IOQ2 server's concurrency to ``value``; returns the old total.

    Rejects anything but an integer >= 1 with `ValueError` before touching a server.
    """
    check_concurrency(value)
    return sum(_each_server(("set_concurrency", value), timeout * max(1, num_servers(_config.current()))))


def get_state(name: str | None = None, timeout: float = 5.0) -> dict[str, Any]:
    """A plain-data picture of one IOQ2 server (default ``ioq_server_1``)."""
    return _call_server(name or server_name(1), "get_state", timeout)


def update_config(timeout: float = 5.0) -> None:
    """Make every IOQ2 server re-read its config now (changes also arrive by themselves)."""
    _each_server("update_config", timeout)


def _ioq1_or_2(ioq1_request: Any, ioq2: Any) -> Any:
    if _cache.settings().enabled:
        return ioq2()
    return _call_server(IOQ1_SERVER, ioq1_request, 5.0)


def set_disk_concurrency(value: int) -> int:
    """The seed's `ioq:set_disk_concurrency`: IOQ1 or IOQ2 by config; returns the old value."""
    check_concurrency(value)
    return _ioq1_or_2(("set_concurrency", value), lambda: set_concurrency(value))


def get_disk_concurrency() -> int:
    return _ioq1_or_2("get_concurrency", get_concurrency)


def get_disk_queues() -> QueueDepths:
    return _ioq1_or_2("get_queue_depths", get_queue_depths)


def get_disk_counters() -> Any:
    """The seed's `ioq:get_disk_counters`: IOQ1's ``{(channel, class, rw): n}``
    submission counts since its last periodic dump; None under IOQ2, whose
    counters live in the stats registry (the seed's ``undefined``)."""
    return _ioq1_or_2("get_counters", lambda: None)


def get_osproc_queues(timeout: float = 5.0) -> list[Any]:
    return _call_server(OSQ_SERVER, "get_queue_depths", timeout)


def get_osproc_requests(timeout: float = 5.0) -> list[Any]:
    return _call_server(OSQ_SERVER, "get_requests", timeout)
