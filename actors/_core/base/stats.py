"""Counters, gauges and histograms named as in the seeds.

Each OS process keeps its own `Stats`; recording is a dict update under a
lock, cheap enough for the message path.  The node merges the snapshots of
all its processes when the host program asks (`Node.stats()`), so services
record locally and never send a message to count something.

A path too hot even for that lock records into a write-behind buffer of its
own (`Stats.add_source`, e.g. `actors.ioq.ioq_stats.StatsBuffer`): every
read here first folds in what the registered buffers hold, so a reader sees
everything recorded before it asked, and the hot path pays no lock at all.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Histogram", "Source", "Stats", "current", "merge_snapshots"]

_MAX_SAMPLES = 4096


@dataclass
class Histogram:
    """A bounded reservoir of recent samples with count, sum, min and max."""

    count: int = 0
    total: float = 0.0
    minimum: float = float("inf")
    maximum: float = float("-inf")
    samples: list[float] = field(default_factory=list)

    def update(self, value: float) -> None:
        self.count += 1
        self.total += value
        if value < self.minimum:
            self.minimum = value
        if value > self.maximum:
            self.maximum = value
        if len(self.samples) < _MAX_SAMPLES:
            self.samples.append(value)
        else:
            self.samples[self.count % _MAX_SAMPLES] = value

    def update_many(self, values: list[float]) -> None:
        """`update` with each of ``values`` in turn, at C speed: the same
        count, sum, extremes and reservoir as one `update` per value."""
        n = len(values)
        if n < 3:  # the general path's set-up costs more than it saves
            for value in values:
                self.update(value)
            return
        start = self.count
        self.count = start + n
        self.total += sum(values)
        low = min(values)
        high = max(values)
        if low < self.minimum:
            self.minimum = low
        if high > self.maximum:
            self.maximum = high
        samples = self.samples
        room = _MAX_SAMPLES - len(samples)
        if room > 0:
            samples.extend(values[:room])
            if n <= room:
                return
            start += room
            values = values[room:]
            n -= room
        if n > _MAX_SAMPLES:  # only the last _MAX_SAMPLES survive
            start += n - _MAX_SAMPLES
            values = values[n - _MAX_SAMPLES :]
            n = _MAX_SAMPLES
        # value i goes to samples[(start + 1 + i) % _MAX_SAMPLES], as `update` puts it
        first = (start + 1) % _MAX_SAMPLES
        head = min(n, _MAX_SAMPLES - first)
        samples[first : first + head] = values[:head]
        if head < n:
            samples[0 : n - head] = values[head:]

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.samples)
        return {
            "n": self.count,
            "sum": self.total,
            "min": self.minimum if self.count else 0.0,
            "max": self.maximum if self.count else 0.0,
            "mean": self.total / self.count if self.count else 0.0,
            "p50": percentile(ordered, 50),
            "p99": percentile(ordered, 99),
        }


def percentile(ordered: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (0.0 when empty)."""
    if not ordered:
        return 0.0
    rank = max(0, min(len(ordered) - 1, int(round(pct / 100.0 * len(ordered) + 0.5)) - 1))
    return float(ordered[rank])


class Source(Protocol):
    """A write-behind buffer in front of a `Stats`: ``flush`` hands over what
    it holds, and is safe to call from any thread."""

    def flush(self) -> None: ...


class Stats:
    """One process's metrics; names are dotted strings like the seeds'."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._gauges: dict[str, float] = {}
        self._histograms: dict[str, Histogram] = {}
        self._labelled: dict[str, dict[tuple[str, ...], int]] = {}
        self._labelled_gauges: dict[str, dict[tuple[str, ...], float]] = {}
        #: The names of a labelled metric's labels, when its recorder gave them (for exporters).
        self._label_names: dict[str, tuple[str, ...]] = {}
        self._sources: weakref.WeakSet[Any] = weakref.WeakSet()

    def add_source(self, source: Source) -> None:
        """Fold ``source`` in before every read, for as long as it lives (it is
        held weakly: a buffer should hand over its last records when it is
        dropped, as `actors.ioq.ioq_stats.StatsBuffer` does)."""
        with self._lock:
            self._sources.add(source)

    def remove_source(self, source: Source) -> None:
        with self._lock:
            self._sources.discard(source)

    def _pull(self) -> None:
        """Fold in the registered buffers (outside the lock: they record through it)."""
        if self._sources:
            with self._lock:
                sources = list(self._sources)
            for source in sources:
                source.flush()

    def increment(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._counters[name] = self._counters.get(name, 0) + amount

    def decrement(self, name: str, amount: int = 1) -> None:
        self.increment(name, -amount)

    def increment_labelled(
        self, name: str, labels: tuple[str, ...], amount: int = 1, label_names: tuple[str, ...] | None = None
    ) -> None:
        """A counter kept per value of its labels (``supervision.child_restarts`` per
        supervisor and child): for names whose parts may contain any text, which a
        dotted name could not keep apart.  ``label_names`` names the labels for an
        exporter (``("channel",)``); given once is enough."""
        with self._lock:
            by_labels = self._labelled.get(name)
            if by_labels is None:
                by_labels = self._labelled[name] = {}
            by_labels[labels] = by_labels.get(labels, 0) + amount
            if label_names is not None:
                self._label_names[name] = tuple(label_names)

    def update_labelled_gauge(
        self, name: str, labels: tuple[str, ...], value: float, label_names: tuple[str, ...] | None = None
    ) -> None:
        """A gauge kept per value of its labels (smoosh's queue length per channel)."""
        with self._lock:
            self._labelled_gauges.setdefault(name, {})[labels] = value
            if label_names is not None:
                self._label_names[name] = tuple(label_names)

    def remove_labelled_gauge(self, name: str, labels: tuple[str, ...]) -> None:
        """Forget one series of a labelled gauge (what it measured is gone: a channel closed)."""
        with self._lock:
            by_labels = self._labelled_gauges.get(name)
            if by_labels is not None:
                by_labels.pop(labels, None)
                if not by_labels:
                    del self._labelled_gauges[name]

    def labelled_gauge(self, name: str, labels: tuple[str, ...]) -> float | None:
        with self._lock:
            return self._labelled_gauges.get(name, {}).get(labels)

    def labelled(self, name: str, labels: tuple[str, ...]) -> int:
        """One labelled counter's value (0 when never counted)."""
        self._pull()
        with self._lock:
            return self._labelled.get(name, {}).get(labels, 0)

    def update_gauge(self, name: str, value: float) -> None:
        with self._lock:
            self._gauges[name] = value

    def update_histogram(self, name: str, value: float) -> None:
        with self._lock:
            hist = self._histograms.get(name)
            if hist is None:
                hist = self._histograms[name] = Histogram()
            hist.update(value)

    def record_many(self, counters: dict[str, int], samples: dict[str, list[float]]) -> None:
        """Add ``counters`` and every histogram sample of ``samples`` under one
        lock: for a hot path that buffers its records and hands them over in
        bursts (see `actors.ioq.ioq_stats.StatsBuffer`)."""
        with self._lock:
            own = self._counters
            for name, amount in counters.items():
                own[name] = own.get(name, 0) + amount
            for name, values in samples.items():
                hist = self._histograms.get(name)
                if hist is None:
                    hist = self._histograms[name] = Histogram()
                hist.update_many(values)

    def counter(self, name: str) -> int:
        self._pull()
        with self._lock:
            return self._counters.get(name, 0)

    def gauge(self, name: str) -> float | None:
        with self._lock:
            return self._gauges.get(name)

    def snapshot(self) -> dict[str, Any]:
        """Plain data: ``{"counters": {...}, "gauges": {...}, "histograms": {...},
        "labelled": {name: [[label, ..., value], ...]}, "labelled_gauges": (the same shape),
        "label_names": {name: [label name, ...]}}``."""
        self._pull()
        with self._lock:
            return {
                "counters": dict(self._counters),
                "gauges": dict(self._gauges),
                "histograms": {k: h.summary() for k, h in self._histograms.items()},
                "labelled": {k: [[*labels, n] for labels, n in by.items()] for k, by in self._labelled.items()},
                "labelled_gauges": {
                    k: [[*labels, v] for labels, v in by.items()] for k, by in self._labelled_gauges.items()
                },
                "label_names": {k: list(v) for k, v in self._label_names.items()},
            }

    def reset(self) -> None:
        self._pull()  # what the buffers hold was recorded before the reset
        with self._lock:
            self._counters.clear()
            self._gauges.clear()
            self._histograms.clear()
            self._labelled.clear()
            self._labelled_gauges.clear()


def _sum_rows(into: dict[str, dict[tuple[Any, ...], float]], rows_by_name: dict[str, list[list[Any]]]) -> None:
    for name, rows in rows_by_name.items():
        by_labels = into.setdefault(name, {})
        for *labels, value in rows:
            key = tuple(labels)
            by_labels[key] = by_labels.get(key, 0) + value


def merge_snapshots(snapshots: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sum counters and gauges across processes; histograms are summed by count."""
    merged: dict[str, Any] = {
        "counters": {},
        "gauges": {},
        "histograms": {},
        "labelled": {},
        "labelled_gauges": {},
        "label_names": {},
    }
    labelled: dict[str, dict[tuple[Any, ...], float]] = {}
    labelled_gauges: dict[str, dict[tuple[Any, ...], float]] = {}
    for snap in snapshots:
        _sum_rows(labelled, snap.get("labelled", {}))
        _sum_rows(labelled_gauges, snap.get("labelled_gauges", {}))
        merged["label_names"].update(snap.get("label_names", {}))
        for name, value in snap.get("counters", {}).items():
            merged["counters"][name] = merged["counters"].get(name, 0) + value
        for name, value in snap.get("gauges", {}).items():
            merged["gauges"][name] = merged["gauges"].get(name, 0) + value
        for name, summary in snap.get("histograms", {}).items():
            prev = merged["histograms"].get(name)
            if prev is None or summary.get("n", 0) > prev.get("n", 0):
                merged["histograms"][name] = summary
    merged["labelled"] = {name: [[*labels, n] for labels, n in by.items()] for name, by in labelled.items()}
    merged["labelled_gauges"] = {
        name: [[*labels, v] for labels, v in by.items()] for name, by in labelled_gauges.items()
    }
    return merged


_current = Stats()


def current() -> Stats:
    """The metrics of this OS process."""
    return _current
