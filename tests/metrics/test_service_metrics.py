"""smoosh's and couch_jobs' metrics, labelled series and bounded mailboxes' drops, read from /metrics.

The unit tests feed `actors._core.metrics.families` plain snapshots; the
others run the real thing on a node serving ``/metrics`` (a bounded mailbox
that drops, couch_jobs on SQLite, smoosh compacting a SQLite file) and read
the endpoint's text, the way Prometheus does.
"""

from __future__ import annotations

import queue
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from actors import Node
from actors._core.metrics.families import Scrape, families, retire
from actors.couch_jobs import metrics as jobs_metrics
from actors.smoosh import SQLiteAdapter, handle_db_event, start_smoosh
from actors.smoosh import metrics as smoosh_metrics
from actors.stats import Stats, merge_snapshots
from tests.couch_jobs.actor_fixtures import start_tree
from tests.kernel.mailbox_actors import Gate, Held
from tests.metrics.scraping import scrape, value
from tests.polling import poll_until
from tests.smoosh.actor_util import Events, Observer
from tests.smoosh.sqlite_util import delete_rows, grow_db


def _text(scrape_: Scrape) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(type("C", (), {"collect": lambda self: families(scrape_)})())
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


# -- plain data ----------------------------------------------------------------------------------


def test_labelled_gauges_are_kept_per_label_forgotten_on_request_and_summed_across_processes() -> None:
    a, b = Stats(), Stats()
    a.update_labelled_gauge("smoosh.channel.waiting", ("ratio_dbs",), 3, ("channel",))
    a.update_labelled_gauge("smoosh.channel.waiting", ("slack_dbs",), 1, ("channel",))
    b.update_labelled_gauge("smoosh.channel.waiting", ("ratio_dbs",), 2, ("channel",))
    a.remove_labelled_gauge("smoosh.channel.waiting", ("slack_dbs",))
    assert a.labelled_gauge("smoosh.channel.waiting", ("slack_dbs",)) is None
    merged = merge_snapshots([a.snapshot(), b.snapshot()])
    assert merged["labelled_gauges"] == {"smoosh.channel.waiting": [["ratio_dbs", 5]]}
    assert merged["label_names"] == {"smoosh.channel.waiting": ["channel"]}
    a.reset()
    assert a.snapshot()["labelled_gauges"] == {}


def test_services_labelled_series_are_exported_with_their_label_names() -> None:
    stats = Stats()
    jobs_metrics.count(stats, "accept", "db_compaction", 2)
    jobs_metrics.count(stats, "accept", ("t1", 1024))
    smoosh_metrics.publish_status(
        stats, "ratio_dbs", {"active": 1, "starting": 0, "waiting": {"size": 2, "min": 1.5, "max": 7.0}}
    )
    smoosh_metrics.count(stats, "started", "ratio_dbs")
    stats.increment_labelled("myapp.orders", ("eu", "web"))  # no label names given: label1, label2
    samples = _text(Scrape(processes=[stats.snapshot()]))
    assert value(samples, "couch_jobs_accept_total", type="db_compaction") == 2
    assert value(samples, "couch_jobs_accept_total", type="('t1', 1024)") == 1
    assert value(samples, "smoosh_channel_active", channel="ratio_dbs") == 1
    assert value(samples, "smoosh_channel_waiting", channel="ratio_dbs") == 2
    assert value(samples, "smoosh_channel_waiting_max", channel="ratio_dbs") == 7.0
    assert value(samples, "smoosh_channel_started_total", channel="ratio_dbs") == 1
    assert value(samples, "myapp_orders_total", label1="eu", label2="web") == 1
    # the queue empties: min and max go, the size stays (0); a closed channel's gauges go
    smoosh_metrics.publish_status(stats, "ratio_dbs", {"active": 0, "starting": 0, "waiting": {"size": 0}})
    samples = _text(Scrape(processes=[stats.snapshot()]))
    assert ("smoosh_channel_waiting_max", (("channel", "ratio_dbs"),)) not in samples
    assert ("smoosh_channel_waiting", (("channel", "ratio_dbs"),)) in samples
    smoosh_metrics.forget(stats, "ratio_dbs")
    samples = _text(Scrape(processes=[stats.snapshot()]))
    assert ("smoosh_channel_waiting", (("channel", "ratio_dbs"),)) not in samples
    assert value(samples, "smoosh_channel_started_total", channel="ratio_dbs") == 1  # counters stay


def test_an_ended_process_keeps_its_labelled_counts_but_not_its_gauges() -> None:
    stats = Stats()
    jobs_metrics.count(stats, "finish", "t")
    jobs_metrics.jobs_now(stats, "t", running=1, pending=4)
    samples = _text(Scrape(retired=retire({}, stats.snapshot())))
    assert value(samples, "couch_jobs_finish_total", type="t") == 1
    assert ("couch_jobs_jobs_pending", (("type", "t"),)) not in samples


def test_per_class_mailbox_drops_add_up_across_processes() -> None:
    def proc(dropped: int) -> dict:
        return {
            "actors": {
                "call_bounds": [],
                "exits": {},
                "classes": {
                    "Held": {
                        "actors": 1,
                        "mailbox": 0,
                        "handled": 0,
                        "calls": 0,
                        "casts": 0,
                        "call_seconds": 0.0,
                        "call_buckets": [0],
                        "dropped": dropped,
                    }
                },
            }
        }

    samples = _text(Scrape(processes=[proc(2), proc(3)]))
    assert value(samples, "otpy_actor_mailbox_dropped_total", **{"class": "Held"}) == 5


# -- on a node serving /metrics -------------------------------------------------------------------


@pytest.mark.timeout(90)
@pytest.mark.parametrize("host", [None, "own"])
def test_a_bounded_mailbox_s_drops_are_on_the_endpoint(tmp_path: Path, host: str | None) -> None:
    with Node(metrics=0) as node:
        assert node.metrics_server is not None
        url = node.metrics_server.url
        before = value(scrape(url), "otpy_mailbox_dropped_total")
        ref = node.spawn(Held, mailbox=2, overflow="drop_newest", host=host)
        with Gate(ref, tmp_path, expect=2) as gate:
            for i in range(7):
                ref.cast(i)
            assert ref.is_alive()  # a barrier: every cast has reached the mailbox
            gate.release()
        assert ref.call("dropped") == 5
        samples = scrape(url)
        assert value(samples, "otpy_actor_mailbox_dropped_total", **{"class": "Held"}) == 5
        assert value(samples, "otpy_mailbox_dropped_total") - before == 5
        assert value(samples, "otpy_mailbox_block_timeouts_total") >= 0  # listed, counted once it happens


@pytest.mark.timeout(120)
def test_couch_jobs_counts_its_calls_and_its_jobs_per_type(tmp_path: Path) -> None:
    with Node(metrics=0) as node:
        assert node.metrics_server is not None
        url = node.metrics_server.url
        tree = start_tree(node, str(tmp_path / "jobs.db"))
        ctx = next(tree)
        try:
            jobs, t1 = ctx["jobs"], ctx["t1"]
            label = repr(t1)
            before = scrape(url)
            jobs.add(None, t1, "j1", {})
            jobs.add(None, t1, "j2", {})
            job, _ = jobs.accept(t1)
            jobs.finish(None, job)
            samples = scrape(url)
            for call, n in (("add", 2), ("accept", 1), ("finish", 1)):
                got = value(samples, f"couch_jobs_{call}_total", type=label) - value(
                    before, f"couch_jobs_{call}_total", type=label
                )
                assert got == n, (call, got)
            # the type's activity monitor reads the counts at its next check (every type timeout)
            samples = poll_until(
                lambda: (s := scrape(url)) and value(s, "couch_jobs_jobs_pending", type=label) == 1 and s,
                "the activity monitor's pending count",
                seconds=30,
            )
            assert value(samples, "couch_jobs_jobs_running", type=label) == 0
        finally:
            tree.close()


@pytest.mark.timeout(120)
def test_smoosh_channels_status_and_compactions_are_on_the_endpoint(tmp_path: Path) -> None:
    data, state = tmp_path / "data", tmp_path / "state"
    data.mkdir()
    state.mkdir()
    with Node(metrics=0) as node:
        assert node.metrics_server is not None
        url = node.metrics_server.url
        for section, key, val in (
            ("smoosh", "state_dir", str(state)),
            ("smoosh", "staleness", "0"),
            ("smoosh", "wait_secs", "0"),
            ("smoosh.ratio_dbs", "min_size", "1"),
            ("smoosh.ratio_dbs", "min_priority", "1"),
        ):
            node.config.set(section, key, val)
        q: queue.Queue = queue.Queue()
        events = Events(q)
        adapter = SQLiteAdapter(str(data))
        start_smoosh(
            node,
            adapter,
            overrides={"re_enqueue_delay": 0.3, "checkpoint_interval": 3600.0, "check_window_interval": 3600.0},
            observer=node.spawn(Observer, q),
        )
        for _ in range(7):  # the seven default channels
            events.wait_for("channel_started", keep=lambda e: e[1] not in ("channel_up", "channel_started"))
        before = scrape(url)
        assert value(before, "smoosh_channel_waiting", channel="ratio_dbs") == 0
        assert ("smoosh_channel_active", (("channel", "upgrade_views"),)) in before  # every channel listed
        path = adapter.db_path("db1")
        grow_db(path, rows=2500)
        delete_rows(path)
        handle_db_event("db1", "local_updated", node)
        events.wait_for("started", "ratio_dbs", "db1")
        assert events.wait_for("exited", "ratio_dbs", "db1")[4] == "normal"
        samples = scrape(url)
        for event, n in (("started", 1), ("finished", 1), ("failed", 0)):
            got = value(samples, f"smoosh_channel_{event}_total", channel="ratio_dbs") - value(
                before, f"smoosh_channel_{event}_total", channel="ratio_dbs"
            )
            assert got == n, (event, got)
        assert value(samples, "smoosh_channel_active", channel="ratio_dbs") == 0
