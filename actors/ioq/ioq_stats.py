"""The IOQ metrics of the seed's ``stats_descriptions.cfg``, and helpers to record them.

Names are the seed's paths joined with dots (``couchdb.io_queue2.queued``).
IOQ1 and the os-process queue record under ``couchdb.io_queue`` and
``couchdb.io_queue_bypassed``; IOQ2 under ``couchdb.io_queue2``.  Times are
recorded in milliseconds, as floats (the seed truncates to whole ms, which
hides sub-millisecond IO).

The helpers take the `actors.stats.Stats` to record into, so a state class
records into whatever its host process reads from, and records nothing when
given ``None``.
"""

from __future__ import annotations

from typing import Union

from actors.stats import Stats

__all__ = [
    "Recorder",
    "STATS_DESCRIPTIONS",
    "HELD_SAMPLES",
    "StatsBuffer",
    "metric_names",
    "record_bypassed",
    "record_completed",
    "record_io_error",
    "record_ioq1_bypassed",
    "record_ioq1_merged",
    "record_ioq1_submitted",
    "record_merged",
    "record_osq_submitted",
    "record_queued",
    "record_submitted",
]

#: ``(name, type, description)`` of every IOQ metric, in the seed's order.
STATS_DESCRIPTIONS: tuple[tuple[str, str, str], ...] = (
    ("couchdb.io_queue.latency", "histogram", "delay introduced by routing request through IO queue"),
    ("couchdb.io_queue.low", "counter", "number of requests routed through IO at low priority"),
    ("couchdb.io_queue.merged", "counter", "number of requests routed through IO queue that were merged"),
    ("couchdb.io_queue.osproc", "counter", "number of requests routed through IO os queue"),
    ("couchdb.io_queue.reads", "counter", "number of read requests routed through IO queue"),
    ("couchdb.io_queue.writes", "counter", "number of write requests routed through IO queue"),
    ("couchdb.io_queue.undefined", "counter", "number of requests routed through IO queue without I/O class"),
    ("couchdb.io_queue.unknown", "counter", "number of unknown requests routed through IO queue"),
    ("couchdb.io_queue.db_update", "counter", "DB update requests routed through IO queue"),
    ("couchdb.io_queue.db_compact", "counter", "DB compaction requests routed through IO queue"),
    ("couchdb.io_queue.view_compact", "counter", "view compaction requests routed through IO queue"),
    ("couchdb.io_queue.view_update", "counter", "view indexing requests routed through IO queue"),
    ("couchdb.io_queue.interactive", "counter", "IO directly triggered by client requests"),
    ("couchdb.io_queue.internal_repl", "counter", "IO related to internal replication"),
    ("couchdb.io_queue.other", "counter", "IO related to internal replication"),
    ("couchdb.io_queue_bypassed.low", "counter", "number of requests that bypassed IO at low priority"),
    ("couchdb.io_queue_bypassed.merged", "counter", "number of requests that bypassed IO queue that were merged"),
    ("couchdb.io_queue_bypassed.osproc", "counter", "number of requests that bypassed IO os queue"),
    ("couchdb.io_queue_bypassed.reads", "counter", "number of read requests that bypassed IO queue"),
    ("couchdb.io_queue_bypassed.writes", "counter", "number of write requests that bypassed IO queue"),
    ("couchdb.io_queue_bypassed.undefined", "counter", "number of requests that bypassed IO queue without I/O class"),
    ("couchdb.io_queue_bypassed.unknown", "counter", "number of unknown requests that bypassed IO queue"),
    ("couchdb.io_queue_bypassed.db_update", "counter", "DB update requests that bypassed IO queue"),
    ("couchdb.io_queue_bypassed.db_compact", "counter", "DB compaction requests that bypassed IO queue"),
    ("couchdb.io_queue_bypassed.view_compact", "counter", "view compaction requests that bypassed IO queue"),
    ("couchdb.io_queue_bypassed.view_update", "counter", "view indexing requests that bypassed IO queue"),
    ("couchdb.io_queue_bypassed.interactive", "counter", "bypassed IO directly triggered by client requests"),
    ("couchdb.io_queue_bypassed.internal_repl", "counter", "bypassed IO related to internal replication"),
    ("couchdb.io_queue_bypassed.other", "counter", "bypassed IO related to internal replication"),
    ("couchdb.io_queue2.io_errors", "counter", "number of IO errors"),
    ("couchdb.io_queue2.merged", "counter", "number of requests routed through IO queue that were merged"),
    ("couchdb.io_queue2.submit_delay", "histogram", "delay introduced by routing request through IO queue"),
    ("couchdb.io_queue2.svctm", "histogram", "time taken to service the IO request"),
    ("couchdb.io_queue2.iowait", "histogram", "Total time request spent waiting on IO"),
    ("couchdb.io_queue2.low.count", "counter", "number of requests routed through IO at low priority"),
    ("couchdb.io_queue2.osproc.count", "counter", "number of requests routed through IO os queue"),
    ("couchdb.io_queue2.reads.count", "counter", "number of read requests routed through IO queue"),
    ("couchdb.io_queue2.writes.count", "counter", "number of write requests routed through IO queue"),
    ("couchdb.io_queue2.undefined.count", "counter", "number of requests routed through IO queue without I/O class"),
    ("couchdb.io_queue2.unknown.count", "counter", "number of unknown requests routed through IO queue"),
    ("couchdb.io_queue2.db_update.count", "counter", "DB update requests routed through IO queue"),
    ("couchdb.io_queue2.db_compact.count", "counter", "DB compaction requests routed through IO queue"),
    ("couchdb.io_queue2.view_compact.count", "counter", "view compaction requests routed through IO queue"),
    ("couchdb.io_queue2.view_update.count", "counter", "view indexing requests routed through IO queue"),
    ("couchdb.io_queue2.interactive.count", "counter", "IO directly triggered by client requests"),
    ("couchdb.io_queue2.db_meta.count", "counter", "IO related to db_meta"),
    ("couchdb.io_queue2.internal_repl.count", "counter", "IO related to internal replication"),
    ("couchdb.io_queue2.other.count", "counter", "IO related to internal replication"),
    ("couchdb.io_queue2.bypassed_count", "counter", "number of requests that bypassed IO queue"),
    ("couchdb.io_queue2.reads.bypassed_count", "counter", "number of read requests that bypassed IO queue"),
    ("couchdb.io_queue2.writes.bypassed_count", "counter", "number of write requests that bypassed IO queue"),
    ("couchdb.io_queue2.unknown.bypassed_count", "counter", "number of unknown requests that bypassed IO queue"),
    ("couchdb.io_queue2.reads.queued", "counter", "number of read requests queued into IO queue"),
    ("couchdb.io_queue2.writes.queued", "counter", "number of write requests queued into IO queue"),
    ("couchdb.io_queue2.unknown.queued", "counter", "number of unknown requests queued into IO queue"),
    ("couchdb.io_queue2.queued", "counter", "number of requests queued into IO"),
)

IO_QUEUE2 = "couchdb.io_queue2"
IO_QUEUE = "couchdb.io_queue"
IO_QUEUE_BYPASSED = "couchdb.io_queue_bypassed"

QUEUED = f"{IO_QUEUE2}.queued"
MERGED = f"{IO_QUEUE2}.merged"
IO_ERRORS = f"{IO_QUEUE2}.io_errors"
SUBMIT_DELAY = f"{IO_QUEUE2}.submit_delay"
SVCTM = f"{IO_QUEUE2}.svctm"
IOWAIT = f"{IO_QUEUE2}.iowait"
BYPASSED_COUNT = f"{IO_QUEUE2}.bypassed_count"
IOQ1_LATENCY = f"{IO_QUEUE}.latency"
IOQ1_MERGED = f"{IO_QUEUE}.merged"
IOQ1_OSPROC = f"{IO_QUEUE}.osproc"


def metric_names() -> list[str]:
    return [name for name, _type, _desc in STATS_DESCRIPTIONS]


class _Names(dict):
    """``key -> name`` built on first use, so the hot path does one dict lookup."""

    def __init__(self, pattern: str) -> None:
        super().__init__()
        self._pattern = pattern

    def __missing__(self, key: object) -> str:
        name = self[key] = self._pattern.format(key)
        return name


_rw_queued = _Names(IO_QUEUE2 + ".{}.queued")
_count = _Names(IO_QUEUE2 + ".{}.count")
_rw_bypassed = _Names(IO_QUEUE2 + ".{}.bypassed_count")
_ioq1 = _Names(IO_QUEUE + ".{}")
_ioq1_bypassed = _Names(IO_QUEUE_BYPASSED + ".{}")


class StatsBuffer:
    """Records of one queue server, held until `flush` hands them to `Stats`.

    It takes the place of the `Stats` a server's state records into: the
    same ``increment`` / ``update_histogram`` calls, without a lock (only the
    server's thread records), so a request's seven records cost dictionary
    updates and the lock is taken once per burst.  The server flushes before
    it replies and whenever it has drained its mailbox, so nothing a caller
    can see after its reply is missing from `Node.stats`.

    `queued`, `submitted` and `completed` record what `record_queued`,
    `record_submitted` and `record_completed` do, in one call each: they
    count per read/write kind and per class and keep the three IOQ2
    histograms' samples in lists of their own, and `flush` turns those into
    the metric names -- a request then costs three cheap calls, not ten.
    """

    __slots__ = ("target", "counters", "samples", "_queued", "_classes", "_kinds", "_delay", "_svctm", "_iowait")

    def __init__(self, target: Stats) -> None:
        self.target = target
        self.counters: dict[str, int] = {}
        self.samples: dict[str, list[float]] = {}
        self._queued: dict[str, int] = {}  # rw -> requests queued
        self._classes: dict[str | None, int] = {}  # class -> requests submitted
        self._kinds: dict[str, int] = {}  # rw -> requests submitted
        self._delay: list[float] = []
        self._svctm: list[float] = []
        self._iowait: list[float] = []

    def increment(self, name: str, amount: int = 1) -> None:
        counters = self.counters
        counters[name] = counters.get(name, 0) + amount

    def update_histogram(self, name: str, value: float) -> None:
        samples = self.samples.get(name)
        if samples is None:
            self.samples[name] = [value]
        else:
            samples.append(value)

    def queued(self, rw: str) -> None:
        """`record_queued`: a request of kind ``rw`` entered the queue."""
        queued = self._queued
        queued[rw] = queued.get(rw, 0) + 1

    def submitted(self, class_: str | None, rw: str, submit_delay_ms: float) -> None:
        """`record_submitted`: a request was sent to (or read for) its target."""
        classes = self._classes
        classes[class_] = classes.get(class_, 0) + 1
        kinds = self._kinds
        kinds[rw] = kinds.get(rw, 0) + 1
        self._delay.append(submit_delay_ms)

    def completed(self, svctm_ms: float, iowait_ms: float) -> None:
        """`record_completed`: the target answered."""
        self._svctm.append(svctm_ms)
        self._iowait.append(iowait_ms)

    def _fold(self, with_samples: bool = True) -> None:
        """Turn the per-kind counts (and, ``with_samples``, the sample lists) into metric names."""
        counters, samples = self.counters, self.samples
        if self._queued:
            total = 0
            for rw, n in self._queued.items():
                total += n
                name = _rw_queued[rw]
                counters[name] = counters.get(name, 0) + n
            counters[QUEUED] = counters.get(QUEUED, 0) + total
            self._queued = {}
        for part in (self._classes, self._kinds):
            if part:
                for key, n in part.items():
                    name = _count[key]
                    counters[name] = counters.get(name, 0) + n
        if self._classes:
            self._classes = {}
        if self._kinds:
            self._kinds = {}
        if not with_samples:
            return
        for name, values in ((SUBMIT_DELAY, self._delay), (SVCTM, self._svctm), (IOWAIT, self._iowait)):
            if values:
                held = samples.get(name)
                if held is None:
                    samples[name] = values
                else:
                    held.extend(values)
        if self._delay:
            self._delay = []
        if self._svctm:
            self._svctm = []
        if self._iowait:
            self._iowait = []

    def flush(self, samples: bool = True) -> None:
        """Hand everything recorded since the last flush to the process's `Stats`.

        ``samples=False`` hands over the counters and keeps the histogram
        samples, unless `HELD_SAMPLES` of a kind wait: merging a burst's few
        samples into three histograms costs more than the rest of a flush,
        so a busy server hands them over in larger batches (the server says
        when, see `actors.ioq._queue_server`).
        """
        if self._queued or self._classes or self._kinds or self._delay or self._svctm or self._iowait:
            if not samples and (len(self._svctm) >= HELD_SAMPLES or len(self._delay) >= HELD_SAMPLES):
                samples = True
            self._fold(samples)
        if samples:
            counters, held = self.counters, self.samples
            if counters or held:
                self.counters, self.samples = {}, {}
                self.target.record_many(counters, held)
        elif self.counters:
            counters, self.counters = self.counters, {}
            self.target.record_many(counters, {})

    def holds_samples(self) -> bool:
        """Whether histogram samples wait for a flush."""
        return bool(self._delay or self._svctm or self._iowait or self.samples)


#: Samples of one IOQ2 histogram a `StatsBuffer` holds back at most on a counters-only flush.
HELD_SAMPLES = 256


#: What a state records into: the process's `Stats`, or a server's buffer in front of it.
Recorder = Union[Stats, StatsBuffer]


def record_queued(stats: Recorder | None, rw: str) -> None:
    """A request entered an IOQ2 server's queue (merged or not)."""
    if stats is not None:
        stats.increment(QUEUED)
        stats.increment(_rw_queued[rw])


def record_merged(stats: Recorder | None) -> None:
    """A read joined an identical queued read instead of queueing its own."""
    if stats is not None:
        stats.increment(MERGED)


def record_submitted(stats: Recorder | None, class_: str | None, rw: str, submit_delay_ms: float) -> None:
    """An IOQ2 server sent a request to its IO target."""
    if stats is not None:
        stats.increment(_count[class_])
        stats.increment(_count[rw])
        stats.update_histogram(SUBMIT_DELAY, submit_delay_ms)


def record_completed(stats: Recorder | None, svctm_ms: float, iowait_ms: float) -> None:
    """An IO target answered: service time since submission, wait since the call."""
    if stats is not None:
        stats.update_histogram(SVCTM, svctm_ms)
        stats.update_histogram(IOWAIT, iowait_ms)


def record_io_error(stats: Recorder | None) -> None:
    """An IO target died with requests in flight."""
    if stats is not None:
        stats.increment(IO_ERRORS)


def record_bypassed(stats: Recorder | None, rw: str) -> None:
    """A request of a bypassed class went straight to its IO target (IOQ2)."""
    if stats is not None:
        stats.increment(BYPASSED_COUNT)
        stats.increment(_rw_bypassed[rw])


def record_ioq1_submitted(stats: Recorder | None, class_: str, rw: str, latency_ms: float) -> None:
    if stats is not None:
        stats.increment(_ioq1[class_])
        stats.increment(_ioq1[rw])
        stats.update_histogram(IOQ1_LATENCY, latency_ms)


def record_ioq1_merged(stats: Stats | None) -> None:
    if stats is not None:
        stats.increment(IOQ1_MERGED)


def record_ioq1_bypassed(stats: Recorder | None, class_: str, rw: str) -> None:
    if stats is not None:
        stats.increment(_ioq1_bypassed[class_])
        stats.increment(_ioq1_bypassed[rw])


def record_osq_submitted(stats: Recorder | None, class_: str, latency_ms: float) -> None:
    if stats is not None:
        stats.increment(_ioq1[class_])
        stats.increment(IOQ1_OSPROC)
        stats.update_histogram(IOQ1_LATENCY, latency_ms)
