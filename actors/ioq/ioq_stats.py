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

import threading
import weakref
from collections import Counter, deque
from typing import Any, Union

from actors.stats import Stats

__all__ = [
    "Recorder",
    "STATS_DESCRIPTIONS",
    "FOLD_AT",
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
    """Write-behind records of one queue server, folded into its process's `Stats` on read.

    It takes the place of the `Stats` a server's state records into: the
    same ``increment`` / ``update_histogram`` calls, and `queued`,
    `submitted` and `completed` for what `record_queued`,
    `record_submitted` and `record_completed` do.  Those three append each
    value to a list of its own (a column) and take no lock: a request of
    the hot path costs a few list appends here, where folding its records
    into the stats under their lock costs microseconds, and a column folds
    at C speed (`collections.Counter` for the counters, one slice per
    histogram) where a record per call would be walked one by one.

    The buffer registers with its `Stats` (`Stats.add_source`), which folds
    it in before every read, on the reader's thread.  Only the server
    appends; a reader folds, under the buffer's lock, what each column
    holds past what was folded before (a list slice is atomic), so the
    server records while a reader folds.  A caller that reads `Node.stats`
    after its answer therefore finds its request counted, histograms
    included.  The server folds the buffer itself and empties the columns
    once `FOLD_AT` records wait (`fold_if_full`), which bounds its memory
    whether anybody reads or not, and when it stops; records left in a
    buffer that is dropped without that (a killed server) are folded when
    it is collected.
    """

    __slots__ = (
        "target",
        "_records",
        "queued",
        "_submitted",
        "_completed",
        "increment",
        "update_histogram",
        "__weakref__",
    )

    def __init__(self, target: Stats) -> None:
        self.target = target
        records = _Records()
        self._records = records
        #: `record_queued`: a request of kind ``rw`` entered the queue.
        self.queued = records.queued_rw.append
        self._submitted = (records.submitted_class.append, records.submitted_rw.append, records.submit_delay.append)
        self._completed = (records.svctm.append, records.iowait.append)
        self.increment = records.increment
        self.update_histogram = records.update_histogram
        weakref.finalize(self, records.fold, target)
        target.add_source(self)

    def submitted(self, class_: str | None, rw: str, submit_delay_ms: float) -> None:
        """`record_submitted`: a request was sent to (or read for) its target."""
        add_class, add_rw, add_delay = self._submitted
        add_class(class_)
        add_rw(rw)
        add_delay(submit_delay_ms)

    def completed(self, svctm_ms: float, iowait_ms: float) -> None:
        """`record_completed`: the target answered."""
        add_svctm, add_iowait = self._completed
        add_svctm(svctm_ms)
        add_iowait(iowait_ms)

    def pending(self) -> int:
        """Records (calls) not folded in yet."""
        return self._records.pending()

    def fold_if_full(self) -> None:
        """Fold and empty the columns once `FOLD_AT` records wait: the server's
        bound on the buffer (only the server, the one thread that appends, calls it)."""
        records = self._records
        if records.size() >= FOLD_AT:
            records.fold(self.target, empty=True)

    def flush(self) -> None:
        """Fold every record so far into the stats; any thread may call it."""
        self._records.fold(self.target)

    def close(self) -> None:
        """Fold what is left and stop being read through: the server stops."""
        self.flush()
        self.target.remove_source(self)


#: Records a server's `StatsBuffer` holds before the server folds it in itself.
FOLD_AT = 1024


class _Records:
    """The columns of a `StatsBuffer`, apart from it so that its finalizer can fold them."""

    __slots__ = (
        "lock",
        "queued_rw",
        "submitted_class",
        "submitted_rw",
        "submit_delay",
        "svctm",
        "iowait",
        "other",
        "folded",
    )

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queued_rw: list[str] = []
        self.submitted_class: list[str | None] = []
        self.submitted_rw: list[str] = []
        self.submit_delay: list[float] = []
        self.svctm: list[float] = []
        self.iowait: list[float] = []
        #: ``(name, amount, is_sample)`` of the generic calls (merged, io errors: rare).
        self.other: deque[tuple[str, Any, bool]] = deque()
        #: How much of each column (in `_columns` order) is folded in already.
        self.folded = [0] * 6

    def _columns(self) -> tuple[list[Any], ...]:
        return (self.queued_rw, self.submitted_class, self.submitted_rw, self.submit_delay, self.svctm, self.iowait)

    def increment(self, name: str, amount: int = 1) -> None:
        self.other.append((name, amount, False))

    def update_histogram(self, name: str, value: float) -> None:
        self.other.append((name, value, True))

    def size(self) -> int:
        """Records held, folded or not: what bounds the columns."""
        return len(self.queued_rw) + len(self.submitted_class) + len(self.svctm) + len(self.other)

    def pending(self) -> int:
        folded = self.folded
        return (
            len(self.queued_rw)
            - folded[0]
            + len(self.submitted_class)
            - folded[1]
            + len(self.svctm)
            - folded[4]
            + len(self.other)
        )

    def fold(self, target: Stats, empty: bool = False) -> None:
        """Add what the columns hold past what was folded before to
        ``target``; ``empty``: then clear them (only the appending thread
        may ask, so nothing lands in a column between the fold and the clear)."""
        with self.lock:
            columns = self._columns()
            folded = self.folded
            parts = []
            for i, column in enumerate(columns):
                end = len(column)
                parts.append(column[folded[i] : end])
                folded[i] = end
            queued_rw, submitted_class, submitted_rw, delay, svctm, iowait = parts
            counters: dict[str, int] = {}
            samples: dict[str, list[float]] = {}
            other = self.other
            popleft = other.popleft
            for _ in range(len(other)):
                name, value, is_sample = popleft()
                if is_sample:
                    samples.setdefault(name, []).append(value)
                else:
                    counters[name] = counters.get(name, 0) + value
            if queued_rw:
                for rw, n in Counter(queued_rw).items():
                    name = _rw_queued[rw]
                    counters[name] = counters.get(name, 0) + n
                counters[QUEUED] = counters.get(QUEUED, 0) + len(queued_rw)
            for column in (submitted_class, submitted_rw):
                for key, n in Counter(column).items():
                    name = _count[key]
                    counters[name] = counters.get(name, 0) + n
            for name, values in ((SUBMIT_DELAY, delay), (SVCTM, svctm), (IOWAIT, iowait)):
                if values:
                    samples.setdefault(name, []).extend(values)
            if empty:
                for column in columns:
                    column.clear()
                self.folded = [0] * 6
            if counters or samples:
                target.record_many(counters, samples)


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
