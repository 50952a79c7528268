"""The pure policy: priority queue (property-tested), priority rules, quantize, windows."""

from __future__ import annotations

import math

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from actors.config import Config, ConfigError
from actors.smoosh.channel import _channel_settings
from actors.smoosh.policy import (
    INDEX_CLEANUP,
    PriorityQueue,
    get_priority,
    in_window,
    parse_time,
    quantize,
    stringify,
    utc_minutes,
    validate_key,
)
from actors.smoosh.settings import ChannelSettings, ServerSettings, all_channels, channel_list

INF = math.inf

# -- priority queue: examples -------------------------------------------------


def test_empty_queue():
    q = PriorityQueue()
    assert q.out() is None
    assert q.info() == {"size": 0}
    assert q.to_map() == {}


def test_highest_out_first_and_inf_above_numbers():
    q = PriorityQueue()
    q.insert("a", 3.0, 10)
    q.insert("b", INF, 10)
    q.insert("c", 10**12, 10)
    q.insert("d", 1, 10)
    assert q.info() == {"size": 4, "min": 1, "max": INF}
    assert [q.out() for _ in range(5)] == ["b", "c", "a", "d", None]


def test_capacity_evicts_lowest():
    q = PriorityQueue()
    for i, key in enumerate("abcde"):
        q.insert(key, i, 3)
    assert q.to_map() == {"e": 4, "d": 3, "c": 2}
    q.insert("z", 0.5, 3)  # lower than everything: dropped at once
    assert "z" not in q and len(q) == 3


def test_same_priority_reinsert_is_noop_new_priority_replaces():
    q = PriorityQueue()
    q.insert("a", 5, 10)
    q.insert("b", 5, 10)
    q.insert("a", 5, 10)  # no-op: a keeps its (older) place
    assert q.out() == "b"  # newest first among equal priorities, as upstream
    q.insert("b", 5, 10)
    q.insert("a", 1, 10)  # replaces
    assert q.priority("a") == 1
    assert q.out() == "b" and q.out() == "a" and q.out() is None


def test_flush_and_map_round_trip():
    q = PriorityQueue()
    q.insert(("db", "idx"), 2.5, 10)
    q.insert("db", INF, 10)
    q.insert("other", 2.5, 10)
    copy = PriorityQueue.from_map(q.to_map(), 10)
    assert copy.to_map() == q.to_map()
    assert [copy.out() for _ in range(3)] == [q.out() for _ in range(3)]
    q.insert("x", 1, 10)
    q.flush()
    assert len(q) == 0 and q.out() is None


def test_bad_priority_and_capacity_are_named():
    q = PriorityQueue()
    with pytest.raises(TypeError, match="priority"):
        q.insert("a", "high", 1)
    with pytest.raises(ValueError, match="NaN"):
        q.insert("a", math.nan, 1)
    with pytest.raises(ValueError, match="capacity"):
        q.insert("a", 1, -1)


# -- priority queue: properties ----------------------------------------------

keys = st.sampled_from([f"db{i}" for i in range(12)] + [("db1", "v"), ("db2", "v")])
priorities = st.one_of(st.integers(0, 20), st.floats(0, 50, allow_nan=False), st.just(INF))
ops = st.lists(
    st.one_of(
        st.tuples(st.just("in"), keys, priorities, st.integers(0, 8)),
        st.tuples(st.just("out")),
    ),
    max_size=60,
)


class Model:
    """The queue as a dict and a counter: obviously right, slow."""

    def __init__(self):
        self.entries = {}
        self.seq = 0

    def insert(self, key, priority, capacity):
        if key in self.entries and self.entries[key][0] == priority:
            return
        self.seq += 1
        self.entries[key] = (priority, self.seq)
        while len(self.entries) > capacity:
            low = min(self.entries, key=lambda k: self.entries[k])
            del self.entries[low]

    def out(self):
        if not self.entries:
            return None
        high = max(self.entries, key=lambda k: self.entries[k])
        del self.entries[high]
        return high


def in_step(q, m, operations):
    """Apply each of ``operations`` to the queue ``q`` and the model ``m`` alike;
    they must hold the same entries after each.  Yields after each step, for the
    caller's own checks."""
    for op in operations:
        if op[0] == "in":
            q.insert(op[1], op[2], op[3])
            m.insert(op[1], op[2], op[3])
        else:
            assert q.out() == m.out()
        assert len(q) == len(m.entries)
        assert q.to_map() == {k: p for k, (p, _s) in m.entries.items()}
        yield


@settings(max_examples=150, deadline=None)
@given(ops)
def test_queue_matches_model(operations):
    q, m = PriorityQueue(), Model()
    for _ in in_step(q, m, operations):
        info = q.info()
        if m.entries:
            assert info["min"] == min(p for p, _ in m.entries.values())
            assert info["max"] == max(p for p, _ in m.entries.values())


class CountingQueue(PriorityQueue):
    """The queue, counting the heap rebuilds of `_maybe_compact`."""

    rebuilds = 0

    def _maybe_compact(self):
        before = len(self._max_heap) + len(self._min_heap)
        super()._maybe_compact()
        if len(self._max_heap) + len(self._min_heap) < before:
            self.rebuilds += 1


def check_against_model(operations):
    """Apply ``operations`` to the queue and the model; they must agree after each.

    Returns how many times the heaps were rebuilt.
    """
    q, m = CountingQueue(), Model()
    for _ in in_step(q, m, operations):
        # garbage stays bounded: the heaps are rebuilt past 2 * live + 64
        assert len(q._max_heap) <= 2 * len(q) + 65 and len(q._min_heap) <= 2 * len(q) + 65
    while m.entries:  # drain: every key comes out in the model's order
        assert q.out() == m.out()
    assert q.out() is None
    return q.rebuilds


# Long runs: more than 64 stale heap entries make `_maybe_compact` rebuild the
# heaps, and the operations after the rebuild must still match the model.
long_ops = st.lists(
    st.one_of(
        st.tuples(st.just("in"), keys, priorities, st.integers(6, 14)),
        st.tuples(st.just("in"), keys, priorities, st.integers(6, 14)),
        st.tuples(st.just("in"), keys, priorities, st.integers(6, 14)),
        st.tuples(st.just("out")),
    ),
    min_size=200,
    max_size=400,
)


# No shrinking: shrinking a failing run of hundreds of operations takes
# minutes; the unshrunk run is reported as it is.
@settings(max_examples=40, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(long_ops)
def test_queue_matches_model_across_heap_rebuilds(operations):
    check_against_model(operations)


def test_heap_rebuild_keeps_order_and_ties():
    """A deterministic run through several rebuilds, with ties among equal priorities."""
    names = [f"db{i}" for i in range(12)] + [("db1", "v"), ("db2", "v")]
    operations = []
    for step in range(600):
        key = names[(step * 5) % len(names)]
        operations.append(("in", key, (step * 7) % 4 if step % 3 else float((step * 11) % 9) / 2, 14))
        if step % 9 == 8:
            operations.append(("out",))
        if step % 50 == 49:
            operations.append(("in", key, INF, 14))
    assert check_against_model(operations) >= 3


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(keys, priorities, max_size=14), st.integers(0, 20))
def test_bounded_and_outs_in_descending_order(entries, capacity):
    q = PriorityQueue()
    for key, prio in entries.items():
        q.insert(key, prio, capacity)
        assert len(q) <= capacity
    out = []
    for _ in range(len(q) + 1):
        key = q.out()
        if key is None:
            break
        out.append(entries[key])
    assert out == sorted(out, reverse=True)
    # the kept entries are the highest ones
    if entries and capacity:
        kept = sorted(entries.values(), reverse=True)[: min(capacity, len(entries))]
        assert sorted(out, reverse=True) == kept


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(keys, priorities, max_size=14))
def test_from_map_round_trips(entries):
    q = PriorityQueue.from_map(entries, 9999)
    assert q.to_map() == entries
    again = PriorityQueue.from_map(q.to_map(), 9999)
    assert list(again.to_map().items()) == list(q.to_map().items())


@settings(max_examples=100, deadline=None)
@given(priorities)
def test_inf_is_above_every_number(p):
    q = PriorityQueue()
    q.insert("number", p if p != INF else 10**300, 10)
    q.insert("inf", INF, 10)
    assert q.out() == "inf"


# -- get_priority -------------------------------------------------------------


def chan(kind="ratio", **kw):
    return ChannelSettings(name=f"{kind}_dbs", kind=kind, **kw)


MB = 1024 * 1024


def test_ratio_rules():
    s = chan("ratio")
    assert get_priority(s, 10 * MB, 2 * MB) == 5.0
    assert get_priority(s, 4 * MB, 2 * MB) == 0  # r == 2.0 <= min_priority
    assert get_priority(s, MB, 1) == 0  # file_size <= min_size
    assert get_priority(s, 10 * MB, 0) == 2.0  # live size 0 -> min_priority
    assert get_priority(chan("ratio", max_priority=4), 10 * MB, 2 * MB) == 0
    assert get_priority(chan("ratio", max_size=5 * MB), 10 * MB, 2 * MB) == 0


def test_slack_rules():
    s = ChannelSettings.from_config(Config(), "slack_dbs")
    assert s.kind == "slack" and s.min_priority == 536870912
    assert get_priority(s, 1024 * MB, 100 * MB) == 924 * MB
    assert get_priority(s, 600 * MB, 100 * MB) == 0  # 500 MB slack <= 512 MB
    assert get_priority(chan("slack", min_priority=1, max_priority=10 * MB), 100 * MB, 50 * MB) == 0


def test_upgrade_rules_first_rule_applies():
    s = chan("upgrade")
    assert get_priority(s, 10, 10, needs_upgrade=True) == 1  # before the size rules
    assert get_priority(s, 10 * MB, 5 * MB, needs_upgrade=False) == 0
    assert get_priority(s, 10 * MB, 0, needs_upgrade=False) == s.min_priority
    assert get_priority(chan("ratio"), 10 * MB, 9 * MB, needs_upgrade=True) == 0


def test_min_changes():
    s = chan("ratio", min_changes=10)
    assert get_priority(s, 10 * MB, 2 * MB, changes=9) == 0
    assert get_priority(s, 10 * MB, 2 * MB, changes=10) == 5.0
    assert get_priority(s, 10 * MB, 2 * MB) == 5.0  # unknown changes


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="file_size"):
        get_priority(chan(), -1, 0)
    with pytest.raises(ValueError, match="active_size"):
        get_priority(chan(), 1, "x")


def test_quantize():
    # upstream smoosh_server quantize_test (=:= compares types too)
    cases = [
        (0, 0, int),
        (1, 1, int),
        (0.0, 0.0, float),
        (16.0, 16, int),
        (15.0, 15.0, float),
        (0.01, 0.0, float),
        (0.1, 0.125, float),
        (0.1042, 0.125, float),
        (0.125111111111, 0.125, float),
        (10.0002, 10.0, float),
    ]
    for value, expected, kind in cases:
        got = quantize(value)
        assert (got, type(got)) == (expected, kind), value
    assert quantize(3.03) == 3.0
    assert quantize(3.07) == 3.0625
    assert quantize(3.04) == 3.0625  # nearest sixteenth, not the one below
    assert quantize(15.99) == 16.0
    assert quantize(16.7) == 17
    assert quantize(16.5) == 17 and quantize(17.5) == 18  # halves away from zero, not to even
    assert quantize(3.03125) == 3.0625  # 48.5 sixteenths rounds up
    assert quantize(0.49999999999999994 / 16) == 0.0  # just below a half stays down
    assert quantize(536870912.5) == 536870913
    assert quantize(536870913) == 536870913 and type(quantize(536870913)) is int
    assert quantize(INF) == INF
    with pytest.raises(TypeError):
        quantize("3")


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1e12, allow_nan=False))
def test_quantize_is_nearest_and_stable(p):
    q = quantize(p)
    step = 1 / 16 if p < 16 else 1
    assert abs(p - q) <= step / 2
    assert quantize(q) == q
    assert isinstance(q, int) == (p >= 16)


@settings(max_examples=100, deadline=None)
@given(st.integers(-(2**70), 2**70))
def test_quantize_keeps_integers(n):
    q = quantize(n)
    assert q == n and type(q) is int


# -- windows ------------------------------------------------------------------


def test_in_window():
    assert in_window("10:00", "09:00", "17:00")
    assert not in_window("17:00", "09:00", "17:00")
    assert in_window("09:00", "09:00", "17:00")
    # crossing midnight
    assert in_window("23:30", "22:00", "06:00")
    assert in_window("01:00", "22:00", "06:00")
    assert not in_window("12:00", "22:00", "06:00")
    # defaults: always
    assert in_window("00:00", "00:00", "24:00") and in_window("23:59", "00:00", "24:00")
    assert in_window(600, 540, 1020)
    assert in_window("12:00", "05:00", "05:00")  # from == to: always, as upstream


def test_parse_time_errors_are_named():
    assert parse_time("24:00") == 1440
    for bad in ("25:00", "12:60", "noon", "24:01"):
        with pytest.raises(ValueError, match="time|HH:MM"):
            parse_time(bad)
    assert utc_minutes(86400 + 3600 + 61) == 61


# -- keys ------------------------------------------------------------------------


def test_validate_key():
    assert validate_key(b"db") == "db"
    assert validate_key(["db", "idx"]) == ("db", "idx")
    assert validate_key((INDEX_CLEANUP, "db")) == ("index_cleanup", "db")
    assert stringify(("db", "idx")) == "db idx"
    for bad in ("", 3, ("a",), ("a", 1), None):
        with pytest.raises(ValueError, match="smoosh key"):
            validate_key(bad)


# -- settings --------------------------------------------------------------------


def test_channel_defaults():
    s = ChannelSettings.from_config(Config(), "ratio_dbs")
    assert (s.capacity, s.concurrency, s.min_priority, s.max_priority) == (9999, 1, 2.0, INF)
    assert (s.min_size, s.max_size, s.min_changes) == (1048576, INF, 0)
    assert (s.from_, s.to, s.strict_window, s.kind) == (0, 1440, False, "ratio")
    assert ChannelSettings.from_config(Config(), "upgrade_views").kind == "upgrade"
    assert ChannelSettings.from_config(Config(), "mychan").kind == "ratio"


def test_channel_from_config():
    cfg = Config(
        {
            "smoosh.mychan": {
                "priority": "slack",
                "capacity": "5",
                "concurrency": "3",
                "max_priority": "infinity",
                "min_size": "1",
                "from": "22:00",
                "to": "06:30",
                "strict_window": "true",
            }
        }
    )
    s = ChannelSettings.from_config(cfg, "mychan")
    assert (s.kind, s.capacity, s.concurrency, s.min_priority) == ("slack", 5, 3, 536870912)
    assert (s.min_size, s.from_, s.to, s.strict_window) == (1, 1320, 390, True)


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("capacity", "lots", "capacity"),
        ("concurrency", "-1", "concurrency"),
        ("min_priority", "high", "min_priority"),
        ("from", "25:00", "from"),
        ("priority", "biggest", "priority"),
    ],
)
def test_bad_channel_config_is_named(key, value, match):
    cfg = Config({"smoosh.ratio_dbs": {key: value}})
    with pytest.raises(ConfigError, match=match):
        ChannelSettings.from_config(cfg, "ratio_dbs")


def test_server_defaults_and_channel_lists():
    s = ServerSettings.from_config(Config())
    assert (s.staleness, s.wait_secs, s.persist, s.state_dir, s.cleanup_index_files) == (5, 30, False, ".", True)
    assert (s.checkpoint_interval, s.status_interval, s.re_enqueue_delay) == (180.0, 4.9, 5.0)
    assert all_channels(s) == (
        "index_cleanup",
        "ratio_dbs",
        "ratio_views",
        "slack_dbs",
        "slack_views",
        "upgrade_dbs",
        "upgrade_views",
    )
    cfg = Config({"smoosh": {"db_channels": "zz, ratio_dbs,aa", "staleness": "0"}, "smoosh.ignore": {"x": "true"}})
    s = ServerSettings.from_config(cfg)
    assert s.db_channels == ("aa", "ratio_dbs", "slack_dbs", "upgrade_dbs", "zz")
    assert s.staleness_sec == 0 and s.ignore == {"x"}
    assert channel_list(None, ("b", "a")) == ("a", "b")


def test_public_names():
    import actors.smoosh as smoosh
    import actors.smoosh.policy as policy

    for name in ("PriorityQueue", "get_priority", "quantize", "in_window"):
        assert getattr(policy, name) is getattr(smoosh, name)
    assert all(hasattr(smoosh, name) for name in smoosh.__all__)


def test_bad_channel_key_takes_its_own_default_only():
    # Upstream reads each channel key on its own: a malformed `from` is
    # logged and 00:00 used (smoosh_utils:parse_time/2), the channel's
    # other keys keep their configured values.
    cfg = Config(
        {
            "smoosh.ratio_dbs": {
                "concurrency": "3",
                "min_size": "1",
                "from": "8pm",
                "to": "06:00",
                "strict_window": "true",
                "capacity": "lots",
            }
        }
    )
    s = _channel_settings(cfg, "ratio_dbs")
    assert (s.concurrency, s.min_size, s.from_, s.to, s.strict_window) == (3, 1, 0, 360, True)
    assert s.capacity == 9999
    errors: list = []
    s = ChannelSettings.from_config(cfg, "ratio_dbs", on_error=errors.append)
    assert (s.concurrency, s.from_, s.capacity) == (3, 0, 9999)
    assert [str(e).split("]")[1].split("=")[0].strip() for e in errors] == ["capacity", "from"]
    with pytest.raises(ConfigError):  # without on_error a bad value still raises
        ChannelSettings.from_config(cfg, "ratio_dbs")


def test_bad_server_value_takes_its_own_default_with_on_error():
    cfg = Config({"smoosh": {"staleness": "soon", "wait_secs": "0", "persist": "maybe", "db_channels": "zz"}})
    errors: list = []
    s = ServerSettings.from_config(cfg, on_error=errors.append, status_interval=1.0)
    assert (s.staleness, s.wait_secs, s.persist, s.status_interval) == (5, 0, False, 1.0)
    assert "zz" in s.db_channels and len(errors) == 2
    with pytest.raises(ConfigError, match="staleness"):
        ServerSettings.from_config(cfg)
