"""The IOQ supervisor tree (the seed's `ioq_sup`): one_for_one, intensity 5 in 10 s.

Children, in start order as in the seed:

* ``ioq_server`` -- IOQ1, in a host process named ``ioq_server``;
* ``ioq_osq`` -- the os-process queue, in the same host;
* ``ioq_server_1`` ... ``ioq_server_N`` -- IOQ2, server ``i`` in a host
  ``ioq<i>`` pinned to one core, so the servers never compete for a core
  with each other and a node has one extra process per core, not per actor.

``N`` is ``[ioq2] servers`` (default: the CPU count).  Server ``i`` is pinned
to the ``i``-th CPU this process may run on (wrapping around), which with the
usual affinity ``{0..N-1}`` is CPU ``i-1`` -- the CPU whose callers the
``server_per_scheduler`` strategy sends to it.

Each server registers its own name when it starts, so after a restart (a
crash, or its host SIGKILLed) callers find the new one by name; the facade's
cached refs refresh themselves on ``noproc``.
"""

from __future__ import annotations

import os
from typing import Any

from actors import config as _config
from actors.config import Config
from supervision import ChildSpec, Supervisor, SupFlags, start_supervisor

from .api import num_servers
from .dispatch import server_name
from .osq import OSQ_SERVER, OsqServer
from .server1 import IOQ1_SERVER, Ioq1Server
from .server2 import Ioq2Server

__all__ = ["IOQ_SUP", "IoqSup", "ioq_sup_children", "server_cpus", "start_ioq"]

#: Registered name of the supervisor.
IOQ_SUP = "ioq_sup"
SHUTDOWN = 5.0


def server_cpus(count: int, allowed: list[int] | None = None) -> list[int]:
    """The CPU each of ``count`` IOQ2 servers is pinned to (index 0 is server 1)."""
    cpus = sorted(allowed if allowed is not None else os.sched_getaffinity(0))
    return [cpus[i % len(cpus)] for i in range(count)]


def ioq_sup_children(count: int, *, pin: bool = True, with_ioq1: bool = True) -> list[ChildSpec]:
    """Child specs of the IOQ tree with ``count`` IOQ2 servers."""
    specs: list[ChildSpec] = []
    if with_ioq1:
        specs.append(ChildSpec(IOQ1_SERVER, (Ioq1Server, (IOQ1_SERVER,)), shutdown=SHUTDOWN, host=IOQ1_SERVER))
        specs.append(ChildSpec(OSQ_SERVER, (OsqServer, (OSQ_SERVER,)), shutdown=SHUTDOWN, host=IOQ1_SERVER))
    cpus = server_cpus(count) if pin else [None] * count
    for i in range(1, count + 1):
        name = server_name(i)
        cpu = cpus[i - 1]
        specs.append(
            ChildSpec(
                name,
                (Ioq2Server, (name, i)),
                shutdown=SHUTDOWN,
                host=f"ioq{i}",
                cpus=None if cpu is None else {cpu},
            )
        )
    return specs


class IoqSup(Supervisor):
    """``ioq_sup`` as a class, for embedding in a larger tree."""

    def init(self, count: int | None = None, pin: bool = True) -> tuple[SupFlags, list[ChildSpec]]:
        n = count if count is not None else num_servers(_config.current())
        return SupFlags("one_for_one", 5, 10), ioq_sup_children(n, pin=pin)


def start_ioq(node_or_actor: Any, *, config: Config | None = None, count: int | None = None, pin: bool = True) -> Any:
    """Start ``ioq_sup`` with its children; returns the supervisor's ref."""
    if count is None:
        if config is None:
            config = getattr(node_or_actor, "config", None)
        if config is None:
            config = _config.current()
        count = num_servers(config)
    return start_supervisor(
        node_or_actor, SupFlags("one_for_one", 5, 10), ioq_sup_children(count, pin=pin), name=IOQ_SUP
    )
