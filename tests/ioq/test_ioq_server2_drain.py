"""The IOQ2 server's cheaper bookkeeping: fewer messages to itself, no lock per request.

* It submits once its mailbox is drained by checking the mailbox at the end
  of every callback (`QueueServer._after_callback`) instead of sending
  itself a *submit* message per burst; a mailbox that never drains cannot
  hold the queue back for more than `_MAX_PENDING_CALLBACKS` callbacks.
* Its `StatsBuffer` records a request in three deque appends, without a
  lock; the process's `Stats` folds the buffer in whenever it is read, so a
  caller that reads the stats after its answer finds its request counted,
  histograms included.

The unit tests drive the server object and the buffer without processes;
the last test runs the real server and reads `Node.stats`.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest

from actors.ioq import api, ioq_stats
from actors.ioq._queue_server import _MAX_PENDING_CALLBACKS
from actors.ioq.file_server import FileServer
from actors.ioq.server2 import Ioq2Server
from actors.ioq.sup import start_ioq
from actors.stats import Stats

pytestmark = pytest.mark.timeout(60)

SHARD = "shards/00000000-1fffffff/foo/bar.1503945430"


class _Probe(Ioq2Server):
    """An `Ioq2Server` without an actor behind it: the mailbox is a flag the
    test sets, and submit rounds and sent messages are counted."""

    def __init__(self) -> None:
        self._submit_pending = False
        self._pending_callbacks = 0
        self._stats_buffer = None
        self.empty = False
        self.rounds = 0
        self.sent: list[Any] = []

    def mailbox_empty(self) -> bool:
        return self.empty

    def _submit(self) -> None:
        self.rounds += 1

    @property
    def ref(self) -> Any:
        probe = self

        class _Ref:
            def send(self, message: Any) -> None:
                probe.sent.append(message)

        return _Ref()


def test_a_pending_submit_waits_for_the_mailbox_to_drain_without_a_message():
    server = _Probe()
    server._schedule_submit()  # a request queued while others wait in the mailbox
    assert server._submit_pending and server.rounds == 0
    assert server.sent == []  # no self-addressed submit message
    server._after_callback()  # end of that callback: more waits
    server._after_callback()  # the next message's callback: still more
    assert server.rounds == 0
    server.empty = True
    server._after_callback()  # the last message of the burst
    assert server.rounds == 1 and not server._submit_pending
    server._after_callback()  # nothing pending: nothing to do
    assert server.rounds == 1


def test_a_drained_mailbox_submits_at_once():
    server = _Probe()
    server.empty = True
    server._schedule_submit()
    assert server.rounds == 1 and not server._submit_pending and server.sent == []


def test_a_mailbox_that_never_drains_cannot_hold_the_queue_back():
    server = _Probe()
    server._schedule_submit()
    for _ in range(_MAX_PENDING_CALLBACKS - 1):
        server._after_callback()
    assert server.rounds == 0
    server._after_callback()
    assert server.rounds == 1 and not server._submit_pending


def test_the_buffer_records_a_request_as_the_helpers_do():
    helpers, fast = Stats(), Stats()
    ioq_stats.record_queued(helpers, "reads")
    ioq_stats.record_queued(helpers, "writes")
    ioq_stats.record_submitted(helpers, "interactive", "reads", 1.5)
    ioq_stats.record_submitted(helpers, None, "writes", 0.5)
    ioq_stats.record_completed(helpers, 0.25, 2.0)
    ioq_stats.record_merged(helpers)
    ioq_stats.record_io_error(helpers)
    buf = ioq_stats.StatsBuffer(fast)
    buf.queued("reads")
    buf.queued("writes")
    buf.submitted("interactive", "reads", 1.5)
    buf.submitted(None, "writes", 0.5)
    buf.completed(0.25, 2.0)
    ioq_stats.record_merged(buf)
    ioq_stats.record_io_error(buf)
    assert buf.pending() == 7
    assert fast.snapshot() == helpers.snapshot()  # the read folds the buffer in
    assert buf.pending() == 0


def test_every_read_of_the_stats_folds_the_buffer_in_first():
    stats = Stats()
    buf = ioq_stats.StatsBuffer(stats)
    buf.queued("reads")
    assert stats.counter("couchdb.io_queue2.queued") == 1
    buf.submitted("interactive", "reads", 1.0)
    buf.completed(2.0, 3.0)
    h = stats.snapshot()["histograms"]
    assert h["couchdb.io_queue2.svctm"]["n"] == 1 and h["couchdb.io_queue2.submit_delay"]["sum"] == 1.0
    buf.queued("reads")
    stats.reset()  # what was recorded before the reset goes with it
    assert stats.snapshot()["counters"] == {} and buf.pending() == 0


def test_the_server_folds_its_buffer_once_it_is_full():
    stats = Stats()
    buf = ioq_stats.StatsBuffer(stats)
    for _ in range(ioq_stats.FOLD_AT - 1):
        buf.queued("reads")
    buf.fold_if_full()
    assert buf.pending() == ioq_stats.FOLD_AT - 1  # not yet
    buf.queued("reads")
    buf.fold_if_full()
    assert buf.pending() == 0
    stats.remove_source(buf)  # read the stats alone
    assert stats.counter("couchdb.io_queue2.queued") == ioq_stats.FOLD_AT


def test_the_buffer_stays_bounded_while_readers_fold_it():
    """Readers fold without emptying (the server may be appending); the
    server empties the columns once `FOLD_AT` records are held, folded or not."""
    stats = Stats()
    buf = ioq_stats.StatsBuffer(stats)
    for i in range(3 * ioq_stats.FOLD_AT):
        buf.queued("reads")
        buf.submitted("interactive", "reads", 1.0)
        buf.completed(1.0, 2.0)
        if i % 7 == 0:
            assert stats.counter("couchdb.io_queue2.queued") == i + 1  # a reader folds
        buf.fold_if_full()
        assert buf._records.size() < ioq_stats.FOLD_AT
    snap = stats.snapshot()
    assert snap["counters"]["couchdb.io_queue2.queued"] == 3 * ioq_stats.FOLD_AT
    assert snap["counters"]["couchdb.io_queue2.reads.count"] == 3 * ioq_stats.FOLD_AT
    assert snap["histograms"]["couchdb.io_queue2.iowait"]["n"] == 3 * ioq_stats.FOLD_AT
    assert snap["histograms"]["couchdb.io_queue2.iowait"]["sum"] == 6.0 * ioq_stats.FOLD_AT


def test_a_buffer_dropped_unfolded_hands_its_records_over():
    """A killed server never runs ``terminate``: its last records still count."""
    stats = Stats()
    buf = ioq_stats.StatsBuffer(stats)
    buf.queued("writes")
    del buf
    gc.collect()
    assert stats.counter("couchdb.io_queue2.writes.queued") == 1


def test_a_reader_folding_while_the_server_records_loses_nothing():
    stats = Stats()
    buf = ioq_stats.StatsBuffer(stats)
    n = 20_000
    stop = threading.Event()

    def reader() -> None:
        for _ in range(100_000):
            if stop.is_set():
                return
            stats.counter("couchdb.io_queue2.queued")

    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(n):
            buf.queued("reads")
            buf.submitted("interactive", "reads", 1.0)
            buf.completed(1.0, 1.0)
    finally:
        stop.set()
        t.join(30)
    snap = stats.snapshot()
    assert snap["counters"]["couchdb.io_queue2.queued"] == n
    assert snap["counters"]["couchdb.io_queue2.interactive.count"] == n
    assert snap["histograms"]["couchdb.io_queue2.iowait"]["n"] == n


def test_a_caller_finds_its_requests_in_the_stats_once_answered(node, tmp_path):
    """Counters and histogram samples are in `Node.stats` when the answer
    arrives: the host folds the server's buffer in when it is read."""
    node.config.set("ioq2", "enabled", "true")
    node.config.set("ioq2", "servers", "1")
    start_ioq(node)
    f = node.spawn(FileServer, str(tmp_path / "a.couch"), host="ioq1")
    pos = api.call(f, ("append_bin", b"x" * 10), ("interactive", SHARD))
    for _ in range(5):
        assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == b"x" * 10
    stats = node.stats()
    assert stats["counters"]["couchdb.io_queue2.queued"] == 6
    assert stats["counters"]["couchdb.io_queue2.reads.count"] == 5
    h = stats["histograms"]
    for name in ("svctm", "iowait", "submit_delay"):
        assert h[f"couchdb.io_queue2.{name}"]["n"] == 6
