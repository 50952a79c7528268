"""Helpers shared by every benchmark in bench/.

Benchmarks are scripts, not tests: they print a table, write their figures
to ``bench/results/<name>.json`` and, when matplotlib happens to be
installed, a PNG next to it.  What they share lives here: percentiles and
medians (so every bench reports the same statistics), result files, a
progress bar on stderr (stdout stays clean for the table), a bounded wait
for an event on a queue, and CPU placement, because on these machines where two processes run changes a
round trip by 2x and a figure without its placement means nothing.
"""

from __future__ import annotations

import json
import math
import os
import platform
import queue
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "Placement",
    "Progress",
    "available_cpus",
    "environment",
    "median",
    "percentile",
    "pin_process",
    "pin_thread",
    "placements",
    "plot_bars",
    "results_dir",
    "summarize",
    "take_first",
    "write_json",
]

T = TypeVar("T")

#: Where a harness writes ``<name>.json``: ``bench/results``, or the folder
#: ``otpy bench`` names in ``OTPY_BENCH_RESULTS`` (its ``--out``; a ``--quick``
#: run goes to ``bench/results/quick``, so it never overwrites a full run's figures).
RESULTS_DIR = os.environ.get("OTPY_BENCH_RESULTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "results"
)


# -- statistics ------------------------------------------------------------------


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation between ranks.

    Raises `ValueError` on an empty sample or a ``q`` outside [0, 100]:
    a benchmark that measured nothing must say so, not report zero.
    """
    if not samples:
        raise ValueError("percentile of an empty sample")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within [0, 100], got {q!r}")
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return float(ordered[lo])
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


def median(values: Iterable[float]) -> float:
    """Median of repeated measurements (robust to one noisy repetition)."""
    vals = list(values)
    if not vals:
        raise ValueError("median of no values")
    return float(statistics.median(vals))


def summarize(samples_us: Sequence[float]) -> dict[str, float]:
    """p50/p99/mean/count of one repetition's latency samples (microseconds)."""
    return {
        "p50_us": round(percentile(samples_us, 50), 2),
        "p99_us": round(percentile(samples_us, 99), 2),
        "mean_us": round(statistics.fmean(samples_us), 2),
        "n": len(samples_us),
    }


# -- results ----------------------------------------------------------------------


def results_dir() -> str:
    os.makedirs(RESULTS_DIR, exist_ok=True)
    return RESULTS_DIR


def environment() -> dict[str, Any]:
    """What a reader needs to compare two result files: machine and versions."""
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus_online": os.cpu_count(),
        "cpus_allowed": sorted(_ALL_CPUS),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import zmq

        info["pyzmq"] = zmq.__version__
        info["libzmq"] = zmq.zmq_version()
    except ImportError:
        pass
    return info


def write_json(name: str, data: dict[str, Any]) -> str:
    """Write ``bench/results/<name>.json`` and return its path."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"result name must be a plain file stem, got {name!r}")
    path = os.path.join(results_dir(), f"{name}.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)
    return path


def plot_bars(name: str, title: str, groups: dict[str, dict[str, float]], ylabel: str) -> str | None:
    """A grouped bar chart ``bench/results/<name>.png`` if matplotlib is importable.

    ``groups`` maps a group label (a placement) to {series label: value}.
    Returns the path, or None when matplotlib is not installed: plots are a
    convenience, never a dependency of the project.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    series = sorted({s for vals in groups.values() for s in vals})
    labels = list(groups)
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6, 2 + 1.5 * len(labels)), 4))
    for i, s in enumerate(series):
        xs = [j + i * width for j in range(len(labels))]
        ax.bar(xs, [groups[g].get(s, 0.0) for g in labels], width, label=s)
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(labels))])
    ax.set_xticklabels(labels)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    path = os.path.join(results_dir(), f"{name}.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# -- progress ----------------------------------------------------------------------


class Progress:
    """A one-line text progress bar on stderr (stdout is kept for results)."""

    def __init__(self, total: int, label: str = "", width: int = 30, stream: Any = None) -> None:
        if total <= 0:
            raise ValueError(f"progress total must be positive, got {total!r}")
        self.total = total
        self.done = 0
        self.label = label
        self.width = width
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.monotonic()
        self._tty = getattr(self.stream, "isatty", lambda: False)()

    def step(self, what: str = "") -> None:
        self.done = min(self.total, self.done + 1)
        filled = int(self.width * self.done / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.monotonic() - self.started
        line = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s {what}"
        if self._tty:
            self.stream.write("\r" + line[:120].ljust(120))
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        """A message on its own line that does not break the bar."""
        self.stream.write(("\n" if self._tty else "") + text + "\n")
        self.stream.flush()


# -- waiting ----------------------------------------------------------------------


def take_first(q: "queue.Queue[T]", match: Callable[[T], bool], timeout: float) -> T | None:
    """The first item taken off ``q`` within ``timeout`` s for which ``match``
    is true, or None when none came (so ``q`` must never carry None).

    The items before it are taken and dropped: a bench waits for one kind of
    event among others it does not care about.  Bounded in time: every turn
    either returns or takes an item, and the deadline is looked at each turn.
    """
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            item = q.get(timeout=left)
        except queue.Empty:
            return None
        if match(item):
            return item


# -- CPU placement ------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """Where the two sides of a measurement run: None means unpinned."""

    label: str
    a: frozenset[int] | None
    b: frozenset[int] | None

    @property
    def both(self) -> frozenset[int] | None:
        """CPUs for a single process holding both sides (in-process pairs)."""
        if self.a is None or self.b is None:
            return None
        return self.a | self.b


def available_cpus() -> set[int]:
    return set(os.sched_getaffinity(0))


def placements(selected: Sequence[str] | None = None) -> list[Placement]:
    """Unpinned, both on one core, on two cores (the first two allowed CPUs).

    With a single allowed CPU the two-core placement cannot exist and is
    left out rather than silently measured on one core.
    """
    cpus = sorted(available_cpus())
    result = [Placement("unpinned", None, None)]
    result.append(Placement("one-core", frozenset({cpus[0]}), frozenset({cpus[0]})))
    if len(cpus) >= 2:
        result.append(Placement("two-cores", frozenset({cpus[0]}), frozenset({cpus[1]})))
    if selected:
        known = {p.label for p in result}
        bad = [s for s in selected if s not in known]
        if bad:
            raise ValueError(f"unknown placement(s) {bad}; choose from {sorted(known)}")
        result = [p for p in result if p.label in selected]
    return result


def pin_thread(cpus: Iterable[int] | None) -> None:
    """Pin the calling thread (Linux affinity is per thread); None = every CPU."""
    os.sched_setaffinity(0, set(cpus) if cpus is not None else _all_cpus())


def pin_process(cpus: Iterable[int] | None) -> None:
    """Pin every thread of this process, including ones already running.

    ``os.sched_setaffinity(0, ...)`` only moves the calling thread; a host
    program that already runs an I/O thread must move each of its tasks.
    """
    target = set(cpus) if cpus is not None else _all_cpus()
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, target)
        except OSError:  # the thread ended meanwhile
            pass


# Taken at import, before any helper pins anything: "unpinned" restores this.
_ALL_CPUS: frozenset[int] = frozenset(os.sched_getaffinity(0))


def _all_cpus() -> set[int]:
    return set(_ALL_CPUS)
