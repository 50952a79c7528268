"""Which IOQ2 server a request goes to (the dispatch part of `ioq_server2:call`).

IOQ2 runs one server per CPU core so no single server is the bottleneck.  The
strategy decides how callers spread over them:

* ``server_per_scheduler`` (default): the server of the caller's current CPU,
  so the number of busy servers follows how much work the system has and
  each server still sees a backlog to prioritise;
* ``fd_hash``: every request to one IO target goes through one server, which
  gives that target global prioritisation and more dedupe;
* ``random``: even spread, but with few concurrent callers nothing queues and
  nothing is prioritised;
* ``single_server``: everything through ``ioq_server_1`` (IOQ1's shape).

The choice is pure: the caller's CPU, the target and the random source come
in as arguments.  `current_cpu` is the one adapter, reading the CPU the
calling thread runs on.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import zlib
from collections.abc import Mapping
from typing import Any, Protocol

from actors.config import Config, ConfigError

from .ioq_config import (
    BYPASS_SECTION,
    DISPATCH_FD_HASH,
    DISPATCH_RANDOM,
    DISPATCH_SERVER_PER_SCHEDULER,
    DISPATCH_SINGLE_SERVER,
    ioq2_enabled,
)
from .server1_state import analyze_priority, ioq1_bypassed

__all__ = [
    "ROUTE_BYPASS",
    "ROUTE_IOQ1",
    "ROUTE_IOQ2",
    "ROUTE_OSQ",
    "choose_server",
    "current_cpu",
    "fd_hash",
    "route",
    "server_name",
    "server_names",
    "server_per_scheduler",
]

SERVER_PREFIX = "ioq_server_"


class _Rng(Protocol):
    def randrange(self, stop: int, /) -> int: ...


def server_name(server_id: int) -> str:
    """``ioq_server_<N>``, N from 1, the registered name of an IOQ2 server."""
    return f"{SERVER_PREFIX}{server_id}"


def server_names(count: int) -> list[str]:
    return [server_name(i) for i in range(1, count + 1)]


def _check_count(num_servers: int) -> None:
    if isinstance(num_servers, bool) or not isinstance(num_servers, int) or num_servers < 1:
        raise ValueError(f"num_servers must be an integer >= 1, got {num_servers!r}")


def server_per_scheduler(cpu: int, num_servers: int, cpu_to_server: Mapping[int, int] | None = None) -> int:
    """The server id (from 1) for a caller running on ``cpu``.

    ``cpu_to_server`` maps the cores the servers are pinned to onto their ids;
    a CPU outside it (or no map) falls back to ``cpu mod num_servers``.
    """
    if cpu_to_server is not None:
        sid = cpu_to_server.get(cpu)
        if sid is not None:
            return sid
    return (cpu % num_servers) + 1


def _stable_bytes(fd: Any) -> bytes:
    if isinstance(fd, bytes):
        return fd
    if isinstance(fd, str):
        return fd.encode("utf-8")
    if isinstance(fd, int) and not isinstance(fd, bool):
        return fd.to_bytes(16, "little", signed=True)
    return str(fd).encode("utf-8")


def fd_hash(fd: Any, num_servers: int) -> int:
    """The server id (from 1) owning IO target ``fd``.

    Uses CRC-32, not `hash`, because string hashes differ between processes
    and every caller process must agree.  ``fd`` should be the target's name
    or id (its ``str`` must be stable across processes).
    """
    return 1 + zlib.crc32(_stable_bytes(fd)) % num_servers


def choose_server(
    strategy: str,
    num_servers: int,
    *,
    cpu: int | None = None,
    fd: Any = None,
    rng: _Rng | None = None,
    cpu_to_server: Mapping[int, int] | None = None,
) -> int:
    """The server id (1..num_servers) for one request under ``strategy``.

    Unknown strategies behave as ``server_per_scheduler``, as in the seed.
    """
    _check_count(num_servers)
    if strategy == DISPATCH_RANDOM:
        if rng is None:
            raise ValueError("the random dispatch strategy needs an rng")
        return rng.randrange(num_servers) + 1
    if strategy == DISPATCH_FD_HASH:
        return fd_hash(fd, num_servers)
    if strategy == DISPATCH_SINGLE_SERVER:
        return 1
    if cpu is None:
        raise ValueError(f"the {DISPATCH_SERVER_PER_SCHEDULER} dispatch strategy needs the caller's cpu")
    return server_per_scheduler(cpu, num_servers, cpu_to_server)


def _load_sched_getcpu():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True) if name else ctypes.CDLL(None, use_errno=True)
        fn = libc.sched_getcpu
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = []
    return fn


_sched_getcpu = _load_sched_getcpu()


def current_cpu() -> int:
    """The CPU the calling thread is running on (glibc ``sched_getcpu``); 0 if unknown."""
    if _sched_getcpu is None:
        return 0
    cpu = _sched_getcpu()
    return cpu if cpu >= 0 else 0


#: Where `route` sends a request.
ROUTE_OSQ = "osq"
ROUTE_IOQ1 = "ioq1"
ROUTE_IOQ2 = "ioq2"
ROUTE_BYPASS = "bypass"


def route(config: Config, msg: Any, dimensions: Any) -> str:
    """Which path one request takes (the seed's `ioq:call` and the bypass checks).

    OS-process messages (``("prompt", _)``, ``("data", _)``) go to the os
    queue; other IO goes through IOQ2 when ``[ioq2] enabled`` is true, else
    IOQ1 -- unless its class is bypassed in that queue's bypass section.
    """
    if type(msg) in (tuple, list) and len(msg) == 2 and msg[0] in ("prompt", "data"):
        return ROUTE_OSQ
    if ioq2_enabled(config):
        if dimensions is None:
            class_ = "other"
        elif type(dimensions) in (tuple, list) and dimensions:
            class_ = dimensions[0]
        else:
            raise ValueError(f"IO dimensions must be (class, shard[, group_id]) or None, got {dimensions!r}")
        if config.get(BYPASS_SECTION, str(class_)) is not None and _bypass_on(config, str(class_)):
            return ROUTE_BYPASS
        return ROUTE_IOQ2
    class_, _channel = analyze_priority(dimensions)
    return ROUTE_BYPASS if ioq1_bypassed(config, class_) else ROUTE_IOQ1


def _bypass_on(config: Config, class_: str) -> bool:
    try:
        return config.get_boolean(BYPASS_SECTION, class_, False)
    except ConfigError:
        return False
