"""Ioq1State: IOQ1's channels, lottery and dedupe (ioq_server's sort_queues_test and ioq_tests)."""

import random
from collections import Counter

import pytest

from actors.config import Config
from actors.ioq.request import IoTargetDown
from actors.ioq.server1_state import (
    Ioq1Settings,
    Ioq1State,
    analyze_priority,
    channel_name,
    ioq1_bypassed,
    ioq1_to_float,
    make_key,
    read_ioq1_settings,
    sort_queues,
    summarize_counters,
    timebin,
)
from actors.stats import Stats
from tests.ioq.seed_requests import IO_CLASSES as ALL_IO_CLASSES
from tests.ioq.seed_requests import SHARDS, priority

pytestmark = pytest.mark.timeout(30)

QP = [("a", 0.5), ("b", 0.2), ("c", 0.3)]


@pytest.mark.parametrize(
    "choice, expected",
    [
        (0.10, ["a", "b", "c"]),
        (0.45, ["a", "c", "b"]),
        (0.60, ["b", "a", "c"]),
        (0.65, ["b", "c", "a"]),
        (0.71, ["c", "a", "b"]),
        (0.90, ["c", "b", "a"]),
    ],
)
def test_sort_queues(choice, expected):
    assert sort_queues(QP, 1, choice) == expected


def test_sort_queues_edge_cases():
    assert sort_queues([], 1.0, 0.5) == []
    assert sort_queues([("only", 1.0)], 1.0, 0.99) == ["only"]
    assert sorted(sort_queues([("a", 0.0), ("b", 0.0)], 0.0, 0.5)) == ["a", "b"]


# -- ioq_tests: every class and shard through IOQ1 ------------------------------

IO_CLASSES = [c for c in ALL_IO_CLASSES if c != "db_meta"]


def test_instantiate():
    st = Ioq1State.from_config(Config())
    rng = random.Random(1)
    for io_class in IO_CLASSES:
        for shard in SHARDS:
            call = ("call", io_class, shard)
            caller = object()
            st.enqueue(st.make_request("server", call, priority(io_class, shard), 0.0), caller)
            (sub,) = st.maybe_submit(0.0, rng)
            done = st.complete(sub.ref, ("reply", sub.msg), 0.0)
            assert done.waiters == [caller] and done.reply == ("reply", call)
    assert st.set_concurrency(10) == 20
    for bad in (0, -1, "foo"):
        with pytest.raises(ValueError, match="concurrency"):
            st.set_concurrency(bad)
    assert st.get_concurrency() == 10


# -- channels ------------------------------------------------------------------


def test_analyze_priority():
    assert analyze_priority(("interactive", "shards/0-1/foo/db")) == ("interactive", "foo")
    assert analyze_priority(("db_update", "shards/0-1/foo/db")) == ("db_update", "foo")
    assert analyze_priority(("view_update", "shards/0-1/foo/db", "g")) == ("view_update", "foo")
    assert analyze_priority(("db_compact", "s")) == ("db_compact", None)
    assert analyze_priority(("view_compact", "s", "g")) == ("view_compact", None)
    assert analyze_priority(("internal_repl", "s")) == ("internal_repl", None)
    assert analyze_priority(("low", "s")) == ("low", None)
    assert analyze_priority(None) == ("other", "other")
    assert analyze_priority(("db_meta", "s")) == ("other", "other")


def test_channel_name_and_custom_channels():
    assert channel_name("shards/0-1/heroku/app1/db.1.couch") == "app1.heroku"
    assert channel_name("shards/0-1/db") == "other"
    assert channel_name("shards/0-1/acct/db") == "acct"
    assert channel_name("shards/0-1/acct/my/db") == "acct"
    assert channel_name("junk") == "other"
    st = Ioq1State()
    st.add_channel("acct", "db", "acct-db")
    st.add_channel("other", "sysdb", "sys")
    st.add_channel("acct", "my/db", "deep")
    assert st.make_request("fd", "m", ("interactive", "shards/0-1/acct/db"), 0.0).channel == "acct-db"
    assert st.make_request("fd", "m", ("interactive", "shards/0-1/sysdb"), 0.0).channel == "sys"
    assert st.make_request("fd", "m", ("interactive", "shards/0-1/acct/my/db"), 0.0).channel == "deep"
    st.rem_channel("acct", "db")
    assert st.make_request("fd", "m", ("interactive", "shards/0-1/acct/db"), 0.0).channel == "acct"
    assert sorted(st.list_custom_channels()) == [(("acct", "my/db"), "deep"), (("other", "sysdb"), "sys")]


def test_queue_depths_and_round_robin_between_customer_channels():
    st = Ioq1State(Ioq1Settings(concurrency=1))
    for acct, n in (("a", 3), ("b", 2)):
        for i in range(n):
            st.enqueue(st.make_request("fd", ("x", acct, i), ("interactive", f"shards/0-1/{acct}/db"), 0.0), acct)
    st.enqueue(st.make_request("fd", ("u",), ("db_update", "shards/0-1/a/db"), 0.0), "a")
    st.enqueue(st.make_request("fd", ("c",), ("db_compact", "s"), 0.0), "c")
    assert st.get_queue_depths() == {
        "compaction": 1,
        "replication": 0,
        "low": 0,
        "channels": {"a": [3, 1, 0], "b": [2, 0, 0]},
    }

    class Fixed:
        def random(self):
            return 0.0  # always the first in line: customer, then reads

    order = []
    for _ in range(6):
        (sub,) = st.maybe_submit(0.0, Fixed())
        order.append(sub.channel)
        st.complete(sub.ref, None, 0.0)
    assert order == ["a", "b", "a", "b", "a", "a"]


def test_lottery_follows_class_priorities():
    st = Ioq1State(Ioq1Settings(concurrency=1, class_priorities=(0.5, 0.25, 0.25, 0.0001)))
    rng = random.Random(7)
    served = Counter()
    for i in range(4000):
        if not st.qC:
            st.enqueue(st.make_request("fd", ("c", i), ("db_compact", "s"), 0.0), "c")
        if not st.qR:
            st.enqueue(st.make_request("fd", ("r", i), ("internal_repl", "s"), 0.0), "r")
        if not st.channels:
            st.enqueue(st.make_request("fd", ("i", i), ("interactive", "shards/0-1/a/b"), 0.0), "i")
        (sub,) = st.maybe_submit(0.0, rng)
        served[sub.class_] += 1
        st.complete(sub.ref, None, 0.0)
    total = sum(served.values())
    assert served["interactive"] / total == pytest.approx(0.5, abs=0.05)
    assert served["db_compact"] / total == pytest.approx(0.25, abs=0.05)
    assert served["internal_repl"] / total == pytest.approx(0.25, abs=0.05)


def test_dedupe_merges_queued_reads_only_when_enabled():
    for dedupe, queued in ((True, 1), (False, 2)):
        st = Ioq1State(Ioq1Settings(concurrency=1, dedupe=dedupe), stats=Stats())
        st.enqueue(st.make_request("busy", ("other",), ("interactive", "shards/0-1/a/b"), 0.0), "x")
        st.maybe_submit(0.0, random.Random(0))
        for caller in ("first", "second"):
            st.enqueue(st.make_request("fd", ("pread_iolist", 9), ("interactive", "shards/0-1/a/b"), 0.0), caller)
        assert st.get_queue_depths()["channels"]["a"][0] == queued
        if dedupe:
            assert st.stats.counter("couchdb.io_queue.merged") == 1
            st.complete(1, None, 0.0)
            (sub,) = st.maybe_submit(0.0, random.Random(0))
            assert st.complete(sub.ref, b"block", 0.0).waiters == ["second", "first"]


def test_io_down_and_fail_all():
    st = Ioq1State(Ioq1Settings(concurrency=1))
    st.enqueue(st.make_request("fd", ("x",), ("low", "s"), 0.0), "a")
    st.enqueue(st.make_request("fd", ("y",), ("interactive", "shards/0-1/u/d"), 0.0), "b")
    (sub,) = st.maybe_submit(0.0, random.Random(3))
    done = st.io_down(sub.ref, "crashed")
    assert isinstance(done.error, IoTargetDown) and done.error.reason == "crashed"
    rest = st.fail_all("shutdown")
    assert len(rest) == 1 and rest[0].error.reason == "shutdown"
    assert list(st.queued()) == []


def test_counters_histograms_and_stats():
    stats = Stats()
    st = Ioq1State(stats=stats)
    st.enqueue(st.make_request("fd", ("pread", 0, 1), ("interactive", "shards/0-1/acct/db"), 0.0), "a")
    st.enqueue(st.make_request("fd", ("append", b"x"), ("view_update", "shards/0-1/acct/db", "g"), 0.0), "b")
    for sub in st.maybe_submit(0.001, random.Random(0)):
        st.complete(sub.ref, None, 0.002)
    assert st.get_counters() == {("acct", "interactive", "reads"): 1, ("acct", "view_update", "writes"): 1}
    assert summarize_counters(st.take_counters()) == {"acct": [1, 0, 1]}
    assert st.get_counters() == {}
    assert ("reads", "submit_delay", timebin(1000)) in st.histos
    assert ("acct", "iowait", timebin(2000)) in st.histos
    st.reset_histos()
    assert st.histos == {}
    c = stats.snapshot()["counters"]
    assert c["couchdb.io_queue.interactive"] == 1 and c["couchdb.io_queue.reads"] == 1
    assert c["couchdb.io_queue.view_update"] == 1 and c["couchdb.io_queue.writes"] == 1


def test_summarize_counters_skips_other_and_maps_classes():
    counters = {
        ("other", "interactive", "reads"): 5,
        ("a", "interactive", "reads"): 1,
        ("a", "interactive", "writes"): 2,
        ("a", "db_update", "reads"): 3,
        ("a", "db_update", "writes"): 4,
        ("a", "view_update", "reads"): 5,
        ("b", "view_update", "writes"): 6,
        ("b", "interactive", "unknown"): 7,
    }
    assert summarize_counters(counters) == {"a": [1, 9, 5], "b": [0, 0, 6]}


def test_make_key_and_timebin():
    assert [make_key(c, ("pread", 0, 1)) for c in ("db_compact", "view_compact", "internal_repl", "low")] == [
        "compaction",
        "compaction",
        "replication",
        "low",
    ]
    assert make_key("view_update", None) == "views" and make_key("db_update", None) == "writes"
    assert make_key("interactive", ("pread_iolist", 1)) == "reads"
    assert make_key("interactive", ("append_bin", b"")) == "writes"
    assert make_key("interactive", ("x",)) == "other"
    assert (timebin(1000), timebin(0), timebin(10)) == (30, 0, 10)


def test_settings_from_config():
    assert read_ioq1_settings(Config()) == Ioq1Settings()
    cfg = Config({"ioq": {"concurrency": "x", "dedupe": "false", "customer": "0", "reads": "junk", "views": "2"}})
    s = read_ioq1_settings(cfg)
    assert s.concurrency == 20 and s.dedupe is False
    assert s.class_priorities[0] == 0.00001
    assert s.op_priorities == (0.5, 1.0, 2.0)
    assert ioq1_to_float(None) == 0.5 and ioq1_to_float("1") == 1.0
    cfg.set("ioq.bypass", "interactive", "true")
    assert ioq1_bypassed(cfg, "interactive") and not ioq1_bypassed(cfg, "db_compact")
    st = Ioq1State()
    st.update_config(cfg)
    assert st.dedupe is False
