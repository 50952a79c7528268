"""The demo's live view: hosts and their CPUs, restarts, queue depths, jobs, and the tree.

`LiveView.render` gathers cheap snapshots (``node.hosts()``,
``node.actors()``, ``node.stats()``, IOQ's queue depths, smoosh's status,
the job tables) and returns text; every query is bounded by a short
timeout and a service that is restarting shows ``?`` instead of stopping
the view.  `progress_line` is the one-line form for logs and pipes.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any, Callable

from actors import Node
from actors.ioq.api import get_queue_depths
from actors.smoosh import status
from actors.tree import render_tree

__all__ = ["LiveView", "host_cpu_seconds"]


def host_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` from /proc (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _try(fn: Callable[[], Any], default: Any = "?") -> Any:
    try:
        return fn()
    except Exception:
        return default


class LiveView:
    def __init__(self, node: Node, app: Any, drivers: dict[str, Any], duration: float) -> None:
        self.node = node
        self.app = app
        self.drivers = drivers
        self.duration = duration
        self._cpu: dict[int, tuple[float, float]] = {}

    def _cpu_percent(self, pid: int) -> str:
        now = time.monotonic()
        used = host_cpu_seconds(pid)
        if used is None:
            return "-"
        before = self._cpu.get(pid)
        self._cpu[pid] = (now, used)
        if before is None or now - before[0] <= 0:
            return "…"
        return f"{100 * (used - before[1]) / (now - before[0]):.0f}%"

    def restarts(self, counters: dict[str, Any]) -> dict[str, int]:
        return {
            k[len("supervision.restarts.") :]: v
            for k, v in counters.items()
            if k.startswith("supervision.restarts.") and v
        }

    def queues(self) -> str:
        depths = _try(lambda: get_queue_depths(timeout=0.3), {})
        if isinstance(depths, dict) and depths:
            chans = depths.get("channels") or {}
            ioq = (
                f"ioq compaction {depths.get('compaction', 0)} replication {depths.get('replication', 0)} "
                f"low {depths.get('low', 0)} channels {sum(sum(v) for v in chans.values())}"
            )
        else:
            ioq = "ioq ?"
        smoosh = _try(lambda: status(self.node, timeout=0.5), None)
        if isinstance(smoosh, dict):
            busy = [
                f"{ch} w{s['waiting']['size']}/a{s['active']}"
                for ch, s in sorted(smoosh.items())
                if s.get("active") or s.get("starting") or s["waiting"]["size"]
            ]
            sm = "smoosh " + (" ".join(busy) if busy else "idle")
        else:
            sm = "smoosh ?"
        return f"{ioq} | {sm}"

    def jobs(self) -> str:
        jobs = self.drivers.get("jobs")
        repl = self.drivers.get("replication")
        parts = []
        if jobs is not None:
            states = _try(jobs.states, {})
            parts.append(
                f"couch_jobs added {len(jobs.added)} "
                + (" ".join(f"{k} {v}" for k, v in sorted(states.items())) if isinstance(states, dict) else "?")
            )
        if repl is not None:
            running = _try(repl.running, None)
            rtext = f"{running[0]}/{running[1]} running" if running else "?"
            moved = f"{repl.moves} moved between nodes" if hasattr(repl, "moves") else f"{repl.readds} re-added"
            parts.append(f"replications {rtext}, {repl.writes} doc writes, {moved}")
        return " | ".join(parts)

    def workload(self) -> str:
        parts = []
        reads = self.drivers.get("ioq")
        if reads is not None:
            s = reads.snapshot()
            parts.append(f"reads ok {s['ok']} failed {s['failed']} wrong {s['wrong']} hung {s['hung']}")
        node_reads = self.drivers.get("node_ioq")
        if node_reads is not None:  # demo --nodes N: the readers on the nodes
            s = node_reads.snapshot()
            parts.append(f"node reads ok {s['ok']} failed {s['failed']} wrong {s['wrong']} hung {s['hung']}")
        writer = self.drivers.get("smoosh")
        if writer is not None:
            s = writer.snapshot()
            parts.append(f"db rounds {s['rounds']} compacted {s['compactions']} pending {s['pending']}")
        killer = self.drivers.get("killer")
        if killer is not None:
            s = killer.snapshot()
            parts.append(f"kills {s['kills']}" + (f" (last: {s['last']})" if s["last"] else ""))
        node_killer = self.drivers.get("node_killer")
        if node_killer is not None:
            s = node_killer.snapshot()
            parts.append(f"node kills {s['kills']} restarted {s['restarts']}")
        return " | ".join(parts)

    def render(self, elapsed: float, phase: str = "load") -> str:
        width, height = shutil.get_terminal_size((120, 40))
        actors = _try(self.node.actors, [])
        hosts = [h for h in _try(self.node.hosts, []) if h.get("state") == "up"]
        counters = _try(lambda: self.node.stats()["counters"], {})
        per_host: dict[int, int] = {}
        for a in actors:
            per_host[a.get("pid")] = per_host.get(a.get("pid"), 0) + 1
        lines = [
            f"couch demo  {phase} {elapsed:5.1f}/{self.duration:.0f} s   node {self.node.id}  "
            f"{len(actors)} actors in {len(hosts) + 1} OS processes   state {self.app.state_dir}"
        ]
        me = os.getpid()
        host_cells = [f"node pid {me} cpu {self._cpu_percent(me)} ({per_host.get(me, 0)} actors)"]
        for h in hosts:
            cpus = ",".join(map(str, h["cpus"])) if h.get("cpus") else "any"
            host_cells.append(
                f"{h['label'] or h['proc']} pid {h['pid']} cpus {cpus} cpu "
                f"{self._cpu_percent(h['pid'])} ({per_host.get(h['pid'], 0)})"
            )
        row = "hosts: "
        for cell in host_cells:  # wrapped to the terminal width, cells kept whole
            if len(row) + len(cell) + 2 > width and row.strip() != "hosts:":
                lines.append(row.rstrip("; "))
                row = "       "
            row += cell + "; "
        lines.append(row.rstrip("; "))
        restarts = self.restarts(counters)
        lines.append("restarts: " + (", ".join(f"{k} {v}" for k, v in sorted(restarts.items())) or "none"))
        nodes = self.drivers.get("nodes")
        if nodes is not None:  # demo --nodes N: each node process's state
            lines.append("nodes: " + nodes.line())
        lines.append("queues: " + self.queues())
        lines.append("jobs: " + self.jobs())
        lines.append("workload: " + self.workload())
        lines.append("tree:")
        room = max(5, height - len(lines) - 2)
        lines.extend("  " + line[: width - 3] for line in render_tree(actors, limit=room))
        return "\n".join(line[:width] if i > 0 else line for i, line in enumerate(lines))

    def progress_line(self, elapsed: float) -> str:
        counters = _try(lambda: self.node.stats()["counters"], {})
        restarts = sum(self.restarts(counters).values()) if isinstance(counters, dict) else "?"
        nodes = self.drivers.get("nodes")
        where = f"  | nodes: {nodes.line()}" if nodes is not None else ""
        return (
            f"  {elapsed:5.1f}/{self.duration:.0f} s  {self.workload()}  | {self.jobs()}  | restarts {restarts}" + where
        )
