"""What a node's processes hold, gathered from all of them: its actors and its statistics.

A node is several OS processes (its own and its hosts'), each with its own
actors and its own counters; `Node.actors`, `Node.stats` and
`Node.process_stats` ask every host that is up and merge the answers with
the node process's own.  A host that does not answer in time is left out
(or, in `process_stats`, listed without figures) rather than holding the
caller: a slow host must not hide the others.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

from actors._core.base import stats as _stats
from actors._core.host.pool import HostPool
from actors._core.runtime.runtime import Runtime
from actors._core.wire import system as sysop
from actors._core.wire.reasons import CallTimeout, Exit
from actors._core.wire.ref import ActorRef

__all__ = ["actors", "process_stats", "stats"]


def actors(
    rt: Runtime, pool: HostPool, registered: Callable[[], dict[str, ActorRef]], timeout: float
) -> list[dict[str, Any]]:
    """Every live actor of the node, with its process, pid and mailbox depth (and its name,
    from ``registered()`` once the hosts have answered)."""
    result = list(rt.info())
    for host in list(pool.hosts.values()):
        if host.state != "up":
            continue
        try:
            for entry in rt.sys_request(host.proc, sysop.Info(), timeout=timeout):
                entry["cpus"] = host.cpus
                entry["host"] = host.label or host.proc
                result.append(entry)
        except (Exit, CallTimeout):
            continue
    names = {ref.id: name for name, ref in registered().items()}
    for entry in result:
        entry.setdefault("host", "node")
        entry["registered"] = names.get(entry["id"])
    return result


def stats(rt: Runtime, pool: HostPool, timeout: float) -> dict[str, Any]:
    """Counters, gauges and histograms merged over every process of the node."""
    snaps = [_stats.current().snapshot()]
    for host in list(pool.hosts.values()):
        if host.state == "up":
            try:
                snaps.append(rt.sys_request(host.proc, sysop.Stats(), timeout=timeout))
            except (Exit, CallTimeout):
                continue
    return _stats.merge_snapshots(snaps)


def process_stats(rt: Runtime, pool: HostPool, timeout: float) -> list[dict[str, Any]]:
    """One entry per OS process of the node, each process's own snapshot (see `Node.process_stats`).
    The hosts are asked all at once, so one slow host costs ``timeout``, not one per host."""
    hosts = [h for h in pool.in_use() if h.state == "up"]
    answers: dict[str, Any] = {}
    arrived = threading.Condition()

    def answer(proc: str) -> Callable[[bool, Any], None]:
        def done(ok: bool, value: Any) -> None:
            with arrived:
                answers[proc] = value if ok else None
                arrived.notify_all()

        return done

    for host in hosts:
        rt.sys_request_then(host.proc, sysop.Stats(), answer(host.proc))
    out = [{"proc": rt.proc, "pid": os.getpid(), "stats": rt.stats_snapshot()}]
    with arrived:
        arrived.wait_for(lambda: len(answers) == len(hosts), timeout)
        got = dict(answers)
    out += [{"proc": h.proc, "pid": h.pid, "stats": got.get(h.proc)} for h in hosts]
    return out
