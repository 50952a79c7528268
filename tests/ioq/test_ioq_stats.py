"""The seed's stats_descriptions.cfg names and the recording helpers."""

import pytest

from actors.ioq import ioq_stats
from actors.stats import Stats

pytestmark = pytest.mark.timeout(10)


def test_every_seed_metric_is_listed_once():
    names = ioq_stats.metric_names()
    assert len(names) == 56 == len(set(names))
    assert "couchdb.io_queue2.queued" in names
    assert "couchdb.io_queue.latency" in names
    types = {t for _n, t, _d in ioq_stats.STATS_DESCRIPTIONS}
    assert types == {"counter", "histogram"}


def test_helpers_record_only_declared_names():
    stats = Stats()
    ioq_stats.record_queued(stats, "reads")
    ioq_stats.record_merged(stats)
    ioq_stats.record_submitted(stats, "interactive", "reads", 1.5)
    ioq_stats.record_completed(stats, 2.0, 3.5)
    ioq_stats.record_io_error(stats)
    ioq_stats.record_bypassed(stats, "writes")
    ioq_stats.record_ioq1_submitted(stats, "db_compact", "reads", 4.0)
    ioq_stats.record_ioq1_merged(stats)
    ioq_stats.record_ioq1_bypassed(stats, "interactive", "writes")
    ioq_stats.record_osq_submitted(stats, "interactive", 1.0)
    snap = stats.snapshot()
    recorded = set(snap["counters"]) | set(snap["histograms"])
    assert recorded <= set(ioq_stats.metric_names())
    assert snap["counters"]["couchdb.io_queue2.bypassed_count"] == 1
    assert snap["counters"]["couchdb.io_queue2.writes.bypassed_count"] == 1
    assert snap["counters"]["couchdb.io_queue_bypassed.interactive"] == 1
    assert snap["counters"]["couchdb.io_queue.interactive"] == 1
    assert snap["histograms"]["couchdb.io_queue2.iowait"]["max"] == 3.5


def test_helpers_accept_no_stats():
    ioq_stats.record_queued(None, "reads")
    ioq_stats.record_submitted(None, "interactive", "reads", 1.0)
    ioq_stats.record_osq_submitted(None, "x", 1.0)
    assert ioq_stats.record_completed(None, 1.0, 1.0) is None


def test_a_buffer_holds_records_until_folded_then_hands_them_over_whole():
    stats = Stats()
    stats.increment("couchdb.io_queue2.queued", 5)
    buf = ioq_stats.StatsBuffer(stats)
    stats.remove_source(buf)  # so reading does not fold it in
    ioq_stats.record_queued(buf, "reads")
    ioq_stats.record_queued(buf, "reads")
    ioq_stats.record_submitted(buf, "interactive", "reads", 1.5)
    ioq_stats.record_completed(buf, 0.25, 2.0)
    ioq_stats.record_completed(buf, 0.75, 4.0)
    assert stats.counter("couchdb.io_queue2.queued") == 5  # nothing yet
    buf.flush()
    snap = stats.snapshot()
    assert snap["counters"]["couchdb.io_queue2.queued"] == 7
    assert snap["counters"]["couchdb.io_queue2.reads.queued"] == 2
    assert snap["counters"]["couchdb.io_queue2.interactive.count"] == 1
    assert snap["histograms"]["couchdb.io_queue2.svctm"]["n"] == 2
    assert snap["histograms"]["couchdb.io_queue2.svctm"]["sum"] == 1.0
    assert snap["histograms"]["couchdb.io_queue2.iowait"]["max"] == 4.0
    buf.flush()  # empty: changes nothing
    assert stats.snapshot() == snap
