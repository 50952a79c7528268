"""The name mapping and the exposition of one scrape, on plain data (no processes)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from actors import Crash
from actors._core.metrics.families import Scrape, families, merge, retire
from actors._core.metrics.names import map_name, safe_label, safe_name
from actors._core.runtime.meter import CALL_BOUNDS, Meter, Meters, exit_kind
from actors.app import configcheck
from actors.config import Config
from actors.stats import Stats, merge_snapshots


@pytest.mark.parametrize(
    "dotted, kind, expected",
    [
        ("couchdb.io_queue2.queued", "counter", "couchdb_io_queue2_queued"),
        ("couchdb.io_queue2.reads.count", "counter", "couchdb_io_queue2_reads_count"),
        ("couch_replicator.jobs.running", "gauge", "couch_replicator_jobs_running"),
        ("couch_replicator.jobs.avg_running", "gauge", "couch_replicator_jobs_avg_running_seconds"),
        ("couchdb.io_queue2.svctm", "summary", "couchdb_io_queue2_svctm_seconds"),
        ("actors.transport.dropped_frames", "counter", "otpy_transport_dropped_frames"),
        ("demo.jobs.finished", "counter", "demo_jobs_finished"),
        ("weird name-with/chars..x", "gauge", "weird_name_with_chars_x"),
        ("9lives", "gauge", "_9lives"),
        ("some.total", "counter", "some_total_count"),
    ],
)
def test_map_name(dotted: str, kind: str, expected: str) -> None:
    assert map_name(dotted, kind).name == expected


def test_millisecond_histograms_are_scaled_to_seconds() -> None:
    assert map_name("couchdb.io_queue2.iowait", "summary").factor == 0.001
    assert map_name("couchdb.io_queue2.queued", "counter").factor == 1.0
    with pytest.raises(ValueError, match="kind"):
        map_name("x", "histogram")


def test_safe_name_and_label() -> None:
    assert safe_name("__a..b__") == "a_b"
    assert safe_name("") == "_"
    assert safe_label("x" * 500).endswith("...") and len(safe_label("x" * 500)) == 123
    assert safe_label(("tuple", 1)) == "('tuple', 1)"


def test_exit_kinds() -> None:
    assert [
        exit_kind(r)
        for r in (
            "normal",
            "shutdown",
            ("shutdown", "x"),
            "killed",
            "noproc",
            "noconnection",
            Crash("ValueError", "boom"),
            "whatever",
            42,
        )
    ] == ["normal", "shutdown", "shutdown", "killed", "noproc", "noconnection", "crash", "other", "other"]


class _Server:
    pass


class _Cell:
    """What `Meters` reads of a cell."""

    def __init__(self, cid: str, queued: int = 0) -> None:
        self.id, self.server, self.meter, self.messages_handled = cid, _Server(), Meter(), 0
        self.inbox = type("Q", (), {"qsize": lambda _self: queued})()


def test_meters_keep_a_dead_actors_counts_and_count_its_exit_once() -> None:
    meters, cells = Meters(), {}
    a, b = _Cell("a", queued=3), _Cell("b")
    cells.update(a=a, b=b)
    a.meter.calls, a.meter.buckets[0], a.meter.call_seconds = 2, 2, 0.00002
    b.meter.casts = 5
    snap = meters.snapshot(cells)["classes"]["_Server"]
    assert (snap["actors"], snap["mailbox"], snap["calls"], snap["casts"]) == (2, 3, 2, 5)
    meters.retire(cells, a, "killed")
    meters.retire(cells, a, "killed")  # a second notice of the same death counts nothing
    after = meters.snapshot(cells)
    sums = after["classes"]["_Server"]
    assert (sums["actors"], sums["mailbox"], sums["calls"], sums["casts"]) == (1, 0, 2, 5)
    assert after["exits"] == {"_Server": {"killed": 1}}
    assert after["call_bounds"] == list(CALL_BOUNDS)


def _process(calls: int, restarts: int, gauge: float, ioq_n: int) -> dict:
    buckets = [0] * (len(CALL_BOUNDS) + 1)
    buckets[3] = calls
    return {
        "counters": {
            "couchdb.io_queue2.queued": 10,
            "supervision.restarts.top": restarts,
            "supervision.escalations.top": 1,
        },
        "gauges": {"couch_replicator.jobs.running": gauge},
        "histograms": {"couchdb.io_queue2.svctm": {"n": ioq_n, "sum": 2.0 * ioq_n, "p50": 2.0, "p99": 3.0}},
        "labelled": {"supervision.child_restarts": [["top", "worker", restarts]]},
        "actors": {
            "call_bounds": list(CALL_BOUNDS),
            "exits": {"Worker": {"crash": 1}},
            "classes": {
                "Worker": {
                    "actors": 1,
                    "mailbox": 2,
                    "handled": calls,
                    "calls": calls,
                    "casts": 1,
                    "call_seconds": 0.001 * calls,
                    "call_buckets": buckets,
                }
            },
        },
    }


def _exposed(scrape: Scrape) -> dict[str, dict]:
    registry = CollectorRegistry()
    registry.register(type("C", (), {"collect": lambda self: families(scrape)})())
    text = generate_latest(registry).decode()
    out: dict[str, dict] = {}
    for family in text_string_to_metric_families(text):
        out[family.name] = {
            "type": family.type,
            "samples": {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples},
        }
    return out


def test_exposition_sums_every_process_and_follows_the_conventions() -> None:
    scrape = Scrape(
        processes=[_process(3, 2, 1.0, 4), _process(5, 1, 2.0, 6)],
        hosts=[{"state": "up"}, {"state": "up"}, {"state": "dead"}],
        nodes=["n2", "n3"],
        net={"ticks_out": 7, "ticks_in": 9},
        unanswered=1,
    )
    got = _exposed(scrape)
    calls = got["otpy_actor_calls"]
    assert calls["type"] == "counter"
    assert calls["samples"][("otpy_actor_calls_total", (("class", "Worker"),))] == 8
    hist = got["otpy_actor_call_duration_seconds"]
    assert hist["type"] == "histogram"
    assert hist["samples"][("otpy_actor_call_duration_seconds_count", (("class", "Worker"),))] == 8
    le = repr(CALL_BOUNDS[3])
    assert hist["samples"][("otpy_actor_call_duration_seconds_bucket", (("class", "Worker"), ("le", le)))] == 8
    assert (
        hist["samples"][
            ("otpy_actor_call_duration_seconds_bucket", (("class", "Worker"), ("le", repr(CALL_BOUNDS[2]))))
        ]
        == 0
    )
    assert got["otpy_actor_mailbox_messages"]["samples"][("otpy_actor_mailbox_messages", (("class", "Worker"),))] == 4
    exits = got["otpy_actor_exits"]["samples"]
    assert exits[("otpy_actor_exits_total", (("class", "Worker"), ("reason", "crash")))] == 2
    restarts = got["otpy_supervisor_restarts"]["samples"]
    assert restarts == {("otpy_supervisor_restarts_total", (("child", "worker"), ("supervisor", "top"))): 3}
    assert (
        got["otpy_supervisor_shutdowns"]["samples"][("otpy_supervisor_shutdowns_total", (("supervisor", "top"),))] == 2
    )
    assert got["otpy_hosts"]["samples"][("otpy_hosts", (("state", "up"),))] == 2
    assert got["otpy_nodes_up"]["samples"][("otpy_nodes_up", ())] == 2
    assert got["otpy_processes_unanswered"]["samples"][("otpy_processes_unanswered", ())] == 1
    assert got["otpy_net_ticks_sent"]["samples"][("otpy_net_ticks_sent_total", ())] == 7
    assert got["couchdb_io_queue2_queued"]["samples"][("couchdb_io_queue2_queued_total", ())] == 20
    assert got["couch_replicator_jobs_running"]["samples"][("couch_replicator_jobs_running", ())] == 3.0
    svctm = got["couchdb_io_queue2_svctm_seconds"]
    assert svctm["type"] == "summary"
    assert svctm["samples"][("couchdb_io_queue2_svctm_seconds_count", ())] == 10
    assert svctm["samples"][("couchdb_io_queue2_svctm_seconds_sum", ())] == pytest.approx(0.020)
    assert svctm["samples"][("couchdb_io_queue2_svctm_seconds", (("quantile", "0.99"),))] == pytest.approx(0.003)
    # the per-supervisor dotted counters are not exposed a second time under generic names
    assert not any(name.startswith("supervision") for name in got)
    assert all("pid" not in dict(labels) for fam in got.values() for _, labels in fam["samples"])


def test_an_ended_process_keeps_its_counts_but_not_its_gauges() -> None:
    first, second = _process(3, 2, 1.0, 4), _process(5, 1, 2.0, 6)
    retired = retire({}, first)
    total = merge([retired, second])
    assert total["classes"]["Worker"]["calls"] == 8
    assert total["classes"]["Worker"]["actors"] == 1  # only the live process's actor
    assert total["gauges"] == {"couch_replicator.jobs.running": 2.0}
    assert total["counters"]["couchdb.io_queue2.queued"] == 20
    assert total["histograms"]["couchdb.io_queue2.svctm"]["n"] == 10


def test_labelled_counters_keep_labels_apart_and_merge_across_processes() -> None:
    a, b = Stats(), Stats()
    a.increment_labelled("supervision.child_restarts", ("sup.with.dots", "child"))
    a.increment_labelled("supervision.child_restarts", ("sup", "with.dots.child"), 0)
    b.increment_labelled("supervision.child_restarts", ("sup.with.dots", "child"), 2)
    rows = merge_snapshots([a.snapshot(), b.snapshot()])["labelled"]["supervision.child_restarts"]
    assert sorted(rows) == [["sup", "with.dots.child", 0], ["sup.with.dots", "child", 3]]
    a.reset()
    assert a.snapshot()["labelled"] == {}


def test_the_config_check_knows_the_metrics_section() -> None:
    assert configcheck.check(Config({"metrics": {"port": "9464", "bind": "0.0.0.0"}})).ok
    result = configcheck.check(Config({"metrics": {"port": "abc", "prot": "1"}}))
    assert any("[metrics] port" in e for e in result.errors), result.errors
    assert any("prot" in w for w in result.warnings), result.warnings
