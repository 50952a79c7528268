"""CPU% and resident memory of the node's OS processes, sampled with psutil.

psutil measures CPU% between two calls on the same `psutil.Process`, so one
is kept per pid; a pid that is gone is dropped.  On the node's machine
only: an attached observer runs where the node runs (it needs the node's
runtime directory).
"""

from __future__ import annotations

from typing import Iterable

import psutil

__all__ = ["ProcSampler"]


class ProcSampler:
    """``sample(pids)`` -> ``{pid: {"cpu": percent, "rss": bytes}}``; missing pids are left out."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}

    def sample(self, pids: Iterable[int]) -> dict[int, dict[str, float]]:
        wanted = {p for p in pids if p}
        for pid in list(self._procs):
            if pid not in wanted:
                del self._procs[pid]
        out: dict[int, dict[str, float]] = {}
        for pid in wanted:
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = self._procs[pid] = psutil.Process(pid)
                    proc.cpu_percent(None)  # the first call only starts the interval
                    cpu = 0.0
                else:
                    cpu = proc.cpu_percent(None)
                out[pid] = {"cpu": cpu, "rss": float(proc.memory_info().rss)}
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                self._procs.pop(pid, None)
        return out
