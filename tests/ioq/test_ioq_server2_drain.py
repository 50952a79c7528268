"""The IOQ2 server's cheaper bookkeeping (issue 11, third round).

* It submits once its mailbox is drained by checking the mailbox at the end
  of every callback (`QueueServer._after_callback`) instead of sending
  itself a *submit* message per burst; a mailbox that never drains cannot
  hold the queue back for more than `_MAX_PENDING_CALLBACKS` callbacks.
* Its `StatsBuffer` records a request in three calls and hands the
  histogram samples over in batches, while the counters are in the stats
  before any reply leaves.

The unit tests drive the server object and the buffer without processes;
the last test runs the real server and reads `Node.stats`.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from actors.ioq import api, ioq_stats
from actors.ioq._queue_server import _MAX_PENDING_CALLBACKS, FLUSH_SAMPLES, SAMPLES_DELAY
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
    buf = ioq_stats.StatsBuffer(fast)
    buf.queued("reads")
    buf.queued("writes")
    buf.submitted("interactive", "reads", 1.5)
    buf.submitted(None, "writes", 0.5)
    buf.completed(0.25, 2.0)
    assert buf.holds_samples()
    buf.flush()
    assert not buf.holds_samples()
    assert fast.snapshot() == helpers.snapshot()


def test_a_counters_only_flush_keeps_the_samples_until_a_batch_is_full():
    stats = Stats()
    buf = ioq_stats.StatsBuffer(stats)
    buf.queued("reads")
    buf.submitted("interactive", "reads", 1.0)
    buf.completed(2.0, 3.0)
    buf.flush(samples=False)
    snap = stats.snapshot()
    assert snap["counters"]["couchdb.io_queue2.queued"] == 1
    assert snap["counters"]["couchdb.io_queue2.interactive.count"] == 1
    assert snap["histograms"] == {}  # held back
    assert buf.holds_samples()
    for _ in range(ioq_stats.HELD_SAMPLES - 1):
        buf.submitted("interactive", "reads", 1.0)
        buf.completed(2.0, 3.0)
    buf.flush(samples=False)  # a full batch goes over with the counters
    h = stats.snapshot()["histograms"]
    assert h["couchdb.io_queue2.svctm"]["n"] == ioq_stats.HELD_SAMPLES
    assert h["couchdb.io_queue2.submit_delay"]["n"] == ioq_stats.HELD_SAMPLES
    assert not buf.holds_samples()


def test_the_server_hands_its_histogram_samples_over_soon_after_the_answers(node, tmp_path):
    """Counters are in the stats when the answer arrives; the samples follow
    within `SAMPLES_DELAY` (the server's timer message `FLUSH_SAMPLES`)."""
    assert FLUSH_SAMPLES and SAMPLES_DELAY < 1.0
    node.config.set("ioq2", "enabled", "true")
    node.config.set("ioq2", "servers", "1")
    start_ioq(node)
    f = node.spawn(FileServer, str(tmp_path / "a.couch"), host="ioq1")
    pos = api.call(f, ("append_bin", b"x" * 10), ("interactive", SHARD))
    for _ in range(5):
        assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == b"x" * 10
    assert node.stats()["counters"]["couchdb.io_queue2.queued"] == 6

    def svctm_n() -> int:
        return node.stats()["histograms"].get("couchdb.io_queue2.svctm", {}).get("n", 0)

    # each try is a round trip to every host (no sleep), bounded in count and time
    deadline = time.monotonic() + 20.0
    for _ in range(20_000):
        if svctm_n() == 6 or time.monotonic() > deadline:
            break
    assert svctm_n() == 6
    h = node.stats()["histograms"]
    assert h["couchdb.io_queue2.iowait"]["n"] == 6
    assert h["couchdb.io_queue2.submit_delay"]["n"] == 6
