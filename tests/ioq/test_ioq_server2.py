"""Ioq2State: the seed's ioq_server2 tests, driven against the state class."""

import heapq
import random
from dataclasses import replace

import pytest

from actors.config import Config
from actors.ioq.hqueue import Full
from actors.ioq.ioq_config import DEFAULT_CLASS_PRIORITIES, DEFAULT_CONCURRENCY, DEFAULT_MAX_PRIORITY
from actors.ioq.request import IoqRequest, IoTargetDown, add_request_dimensions
from actors.ioq.server2_state import Ioq2State, total_concurrency
from actors.stats import Stats
from tests.ioq.seed_requests import IO_CLASSES, SHARDS, priority

pytestmark = pytest.mark.timeout(30)


def mock_server(sections=None, **kw):
    """The seed's mock_server/1: an ioq_server_1 initialised from the given config."""
    return Ioq2State.from_config(Config(sections or {}), "ioq_server_1", 1, **kw)


SIMPLE_CONFIG = {"ioq2.classes": {"db_compact": "0.9"}, "ioq2": {"resize_limit": "10"}}
EXTREMES_CONFIG = {"ioq2.classes": {"db_compact": "9999999.0", "interactive": "-0.00000000000000001"}}


# -- empty config tests --------------------------------------------------------


def test_basic_server_config():
    st = mock_server()
    resp = st.get_state()
    assert resp["user_p"] == []
    assert sorted(resp["class_p"]) == sorted(DEFAULT_CLASS_PRIORITIES)
    assert resp["shard_p"] == []
    assert resp["server_name"] == "ioq_server_1" and resp["scheduler_id"] == 1
    assert (resp["concurrency"], resp["resize_limit"], resp["scale_factor"]) == (1, 1000, 2.0)
    assert resp["max_priority"] == DEFAULT_MAX_PRIORITY


def test_simple_request_priority():
    st = mock_server()
    from_ = "pid1"
    request0 = IoqRequest(class_="db_compact")
    priority = st.prioritize_request(request0)
    request1 = replace(request0, init_priority=priority, from_=from_, key=st.next_key)
    assert st.enqueue(replace(request0), from_) is True
    assert st.get_state()["queue"] == [(priority, request1)]


def test_simple_dedupe():
    st = mock_server()
    from_a, from_b = "pid1", "pid2"
    fd, pos = "fd", 1234
    request0 = IoqRequest(class_="db_compact", fd=fd, msg=("pread_iolist", pos))
    req_key = st.waiter_key(request0)
    priority = st.prioritize_request(request0)
    request1a = replace(request0, init_priority=priority, from_=from_a, key=(fd, pos))
    assert st.enqueue(replace(request0), from_a) is True
    assert st.enqueue(replace(request0), from_b) is False
    resp = st.get_state()
    assert resp["queue"] == [(priority, request1a)]
    assert resp["waiters"] == [(req_key, [from_b, from_a])]


def test_io_error():
    st = mock_server()
    key, ref, caller = "asdf", object(), ("self", "ref_tag")
    st.waiters[key] = [caller]
    st.reqs[ref] = IoqRequest(ref=ref, key=key)
    error = ("exit", "foo")
    done = st.io_down(ref, error)
    assert done.waiters == [caller]
    assert isinstance(done.error, IoTargetDown) and done.error.reason == error
    assert done.failed and st.reqs == {} and st.waiters == {}


# -- simple config tests -------------------------------------------------------


def test_simple_config():
    st = mock_server(SIMPLE_CONFIG)
    assert st.prioritize_request(IoqRequest()) == 1.0
    assert st.prioritize_request(IoqRequest(class_="db_compact")) == 0.9


def test_auto_scale():
    st = mock_server(SIMPLE_CONFIG)
    # start with iterations=2 so we can tell when we auto-scaled
    st.resize_limit, st.iterations = 10, 2
    fd, t0 = "pid", 0.0
    base = IoqRequest(t0=t0, fd=fd)
    request_a = replace(base)
    request_b = replace(base, class_="db_compact")
    priority_a = st.prioritize_request(request_a)
    priority_b = st.prioritize_request(request_b)

    st.enqueue(request_b, fd)
    st.enqueue(request_a, fd)
    _p, got = st.queue.extract_max()
    assert got.init_priority == priority_a

    seen = []
    for _n in range(st.resize_limit + 7):
        expected = priority_b if st.iterations == 1 else priority_a
        req_n = replace(base)
        st.enqueue(req_n, fd)
        st.submit(req_n, t0)
        _p, got = st.queue.extract_max()
        seen.append((expected, got.init_priority))
    assert [e for e, _g in seen] == [g for _e, g in seen]
    assert priority_b in [g for _e, g in seen]  # the elevator lifted db_compact once


def test_min_max_priorities():
    st = mock_server(EXTREMES_CONFIG)
    assert st.prioritize_request(IoqRequest(class_="interactive")) == 0.0
    assert st.prioritize_request(IoqRequest(class_="db_compact")) == DEFAULT_MAX_PRIORITY


def test_queue_depths_of_a_server():
    st = mock_server()
    st.concurrency = 1
    for class_, shard in [
        ("db_compact", "shards/0-1/foo/a"),
        ("internal_repl", "shards/0-1/bar/a"),
        ("interactive", "shards/0-1/foo/a"),
        ("view_update", "shards/0-1/foo/a"),
        ("low", "shards/0-1/foo/a"),
    ]:
        st.enqueue(add_request_dimensions(IoqRequest(fd="fd", msg=("x",)), (class_, shard)), "c")
    assert st.get_queue_depths() == {
        "compaction": 1,
        "replication": 1,
        "low": 1,
        "channels": {"foo": [1, 0, 1]},
    }


# -- all_test_ / instantiate ----------------------------------------------------


def fake_server(msg):
    """The seed's FakeServer: answers every call with {reply, Call}."""
    return ("reply", msg)


def call_through(st, fd, msg, dims, now=0.0):
    """One ioq_server2:call round trip on one server, with a fake IO target."""
    req = add_request_dimensions(IoqRequest(fd=fd, msg=msg, t0=now), dims)
    caller = object()
    st.enqueue(req, caller)
    replies = {}
    for _ in range(100):
        subs = st.maybe_submit(now)
        if not subs:
            break
        for sub in subs:
            done = st.complete(sub.ref, fake_server(sub.msg), now)
            for w in done.waiters:
                replies[w] = done.reply
    return replies[caller]


def test_instantiate():
    servers = [mock_server() for _ in range(4)]
    for io_class in IO_CLASSES:
        for shard in SHARDS:
            call = ("call", random.random())
            st = servers[hash((io_class, shard)) % len(servers)]
            assert call_through(st, "server", call, priority(io_class, shard)) == ("reply", call)
    old = DEFAULT_CONCURRENCY * len(servers)
    assert total_concurrency(s.set_concurrency(10) for s in servers) == old
    assert total_concurrency(s.get_concurrency() for s in servers) == 10 * len(servers)
    for bad in (0, -1, "foo", 1.5, True):
        with pytest.raises(ValueError, match="concurrency"):
            servers[0].set_concurrency(bad)
    assert servers[0].get_concurrency() == 10


# -- many_clients_test_ ----------------------------------------------------------


def test_many_clients():
    """10 clients, each calling through random IOQ2 servers to 50 fake targets
    that answer after a random 1-20 ms; every call gets its own reply."""
    fd_count, client_count, max_delay = 50, 10, 0.020
    rng = random.Random(42)
    servers = [mock_server() for _ in range(4)]
    fds = [f"fd{i}" for i in range(fd_count)]
    plans = {c: [(cls, sh) for cls in IO_CLASSES for sh in SHARDS] for c in range(client_count)}
    progress = {c: 0 for c in range(client_count)}
    expected = {}
    events = []  # (time, seq, kind, payload)
    seq = 0

    def push(at, kind, payload):
        nonlocal seq
        seq += 1
        heapq.heappush(events, (at, seq, kind, payload))

    def issue(client, now):
        if progress[client] == len(plans[client]):
            return
        cls, shard = plans[client][progress[client]]
        ref = (client, progress[client])
        expected[client] = ref
        st = rng.choice(servers)
        req = add_request_dimensions(IoqRequest(fd=rng.choice(fds), msg=ref, t0=now), priority(cls, shard))
        st.enqueue(req, client)
        submit(st, now)

    def submit(st, now):
        for sub in st.maybe_submit(now):
            push(now + rng.uniform(0.001, max_delay), "io_done", (st, sub.ref, fake_server(sub.msg)))

    for c in range(client_count):
        push(0.0, "start", c)
    steps = 0
    while events and steps < 100_000:
        steps += 1
        now, _s, kind, payload = heapq.heappop(events)
        if kind == "start":
            issue(payload, now)
            continue
        st, ref, reply = payload
        done = st.complete(ref, reply, now)
        for client in done.waiters:
            assert reply == ("reply", expected[client])
            progress[client] += 1
            issue(client, now)
        submit(st, now)
    assert all(progress[c] == len(plans[c]) for c in range(client_count))
    assert all(not s.reqs and not s.waiters and s.queue.is_empty() for s in servers)


# -- elevator, dedupe, concurrency ----------------------------------------------


def run_backlog(st, victim, rounds, now=0.0):
    """Keep one interactive request queued per round; return the round ``victim`` ran in."""
    for i in range(rounds):
        st.enqueue(IoqRequest(fd="fd", msg=("x", i), class_="interactive"), "busy")
        (sub,) = st.maybe_submit(now)
        st.complete(sub.ref, None, now)
        if sub is victim:
            return i
    return None


def test_elevator_lifts_low_priority_work():
    st = mock_server({"ioq2": {"resize_limit": "10"}})
    st.enqueue(IoqRequest(fd="fd", msg=("x", -1), class_="interactive"), "busy")
    victim = IoqRequest(fd="fd", msg=("compact",), class_="db_compact")
    st.enqueue(victim, "compactor")
    served = run_backlog(st, victim, 1000)
    # 0.0001 * 2**k > 1.0 needs k = 14 scalings of 10 submissions each
    assert served is not None and 130 <= served <= 160


def test_zero_priority_never_rises():
    st = mock_server({"ioq2": {"resize_limit": "10"}, "ioq2.users": {"blackballed": "0.0"}})
    st.enqueue(IoqRequest(fd="fd", msg=("x", -1), class_="interactive"), "busy")
    victim = IoqRequest(fd="fd", msg=("r",), class_="interactive", user="blackballed")
    st.enqueue(victim, "victim")
    assert run_backlog(st, victim, 600) is None
    assert st.pending_requests()[-1] == (0.0, victim)
    # with no other work it still runs: IOQ2 prioritises, it does not rate-limit
    (busy,) = st.maybe_submit(0.0)
    st.complete(busy.ref, None, 0.0)
    assert st.maybe_submit(0.0) == [victim]


def test_dedupe_off_queues_every_read():
    st = mock_server({"ioq2": {"dedupe": "false"}})
    for caller in ("a", "b"):
        assert st.enqueue(IoqRequest(fd="fd", msg=("pread_iolist", 7)), caller) is True
    assert st.queue.size() == 2


def test_dedupe_merges_into_an_in_flight_read():
    st = mock_server()
    st.enqueue(IoqRequest(fd="fd", msg=("pread", 0, 10)), "a")
    (sub,) = st.maybe_submit(1.0)
    assert st.enqueue(IoqRequest(fd="fd", msg=("pread", 0, 10)), "b") is False
    assert st.enqueue(IoqRequest(fd="fd", msg=("pread", 0, 11)), "c") is True
    done = st.complete(sub.ref, b"data", 2.0)
    assert done.waiters == ["b", "a"] and done.reply == b"data"
    assert st.complete(sub.ref, b"again", 3.0) is None


def test_concurrency_bounds_submissions_and_highest_priority_goes_first():
    st = mock_server({"ioq2": {"concurrency": "2"}})
    for i, cls in enumerate(["db_compact", "interactive", "internal_repl", "interactive"]):
        st.enqueue(IoqRequest(fd="fd", msg=("x", i), class_=cls), i)
    first = st.maybe_submit(0.0)
    assert [r.from_ for r in first] == [1, 3]
    assert st.maybe_submit(0.0) == []
    st.complete(first[0].ref, "ok", 0.1)
    (nxt,) = st.maybe_submit(0.1)
    assert nxt.class_ == "internal_repl" and nxt.fin_priority == 0.001


def test_fd_down_fails_only_that_targets_requests():
    st = mock_server({"ioq2": {"concurrency": "3"}})
    for i, fd in enumerate(["a", "b", "a"]):
        st.enqueue(IoqRequest(fd=fd, msg=("x", i)), f"caller{i}")
    assert len(st.maybe_submit(0.0)) == 3
    failed = st.fd_down("a", "killed")
    assert sorted(w for c in failed for w in c.waiters) == ["caller0", "caller2"]
    assert all(c.error.reason == "killed" for c in failed)
    assert [r.fd for _ref, r in st.in_flight()] == ["b"]


def test_fail_all_answers_queued_and_in_flight_callers():
    st = mock_server()
    st.enqueue(IoqRequest(fd="a", msg=("x", 1)), "one")
    st.enqueue(IoqRequest(fd="a", msg=("x", 2)), "two")
    st.maybe_submit(0.0)
    failed = st.fail_all("shutdown")
    assert sorted(w for c in failed for w in c.waiters) == ["one", "two"]
    assert st.queue.is_empty() and not st.reqs and not st.waiters


def test_update_config_applies_to_new_requests():
    cfg = Config()
    st = Ioq2State.from_config(cfg, server_id=3)
    assert st.server_name == "ioq_server_3"
    cfg.set("ioq2.classes", "db_compact", "5.0")
    cfg.set("ioq2", "concurrency", "4")
    st.update_config(cfg)
    assert st.prioritize_request(IoqRequest(class_="db_compact")) == 5.0
    assert st.get_concurrency() == 4


def test_full_queue_raises_and_leaves_no_waiter():
    st = mock_server(max_queue=1)
    st.enqueue(IoqRequest(fd="fd", msg=("x", 1)), "a")
    with pytest.raises(Full):
        st.enqueue(IoqRequest(fd="fd", msg=("pread", 0, 1)), "b")
    assert list(st.waiters.values()) == [["a"]]


def test_stats_are_recorded():
    stats = Stats()
    st = mock_server(stats=stats)
    st.enqueue(IoqRequest(fd="fd", msg=("pread", 0, 4), class_="interactive", t0=1.0), "a")
    st.enqueue(IoqRequest(fd="fd", msg=("pread", 0, 4), class_="interactive", t0=1.0), "b")
    (sub,) = st.maybe_submit(1.5)
    st.complete(sub.ref, b"x", 2.0)
    st.enqueue(IoqRequest(fd="fd", msg=("append", b"x"), class_="db_update", t0=2.0), "c")
    (sub,) = st.maybe_submit(2.0)
    st.io_down(sub.ref, "boom")
    snap = stats.snapshot()
    c = snap["counters"]
    assert c["couchdb.io_queue2.queued"] == 3
    assert c["couchdb.io_queue2.reads.queued"] == 2
    assert c["couchdb.io_queue2.writes.queued"] == 1
    assert c["couchdb.io_queue2.merged"] == 1
    assert c["couchdb.io_queue2.interactive.count"] == 1
    assert c["couchdb.io_queue2.db_update.count"] == 1
    assert c["couchdb.io_queue2.io_errors"] == 1
    h = snap["histograms"]
    assert h["couchdb.io_queue2.submit_delay"]["max"] == pytest.approx(500.0)
    assert h["couchdb.io_queue2.svctm"]["max"] == pytest.approx(500.0)
    assert h["couchdb.io_queue2.iowait"]["max"] == pytest.approx(1000.0)


def _picture(st, stats):
    """Everything observable of a state: its seed-shaped state and its counters."""
    state = st.get_state()
    return state, stats.snapshot()["counters"]


def test_admit_is_enqueue_then_submit_when_nothing_is_queued():
    # The server's short way (`Ioq2State.admit`) must leave the state, the
    # stats and the submitted request exactly as enqueue + maybe_submit do,
    # the elevator's count and dedupe into a read in flight included.
    rng = random.Random(7)
    config = {"ioq2": {"concurrency": "3", "resize_limit": "4"}, "ioq2.classes": {"db_compact": "0.5"}}
    general_stats, short_stats = Stats(), Stats()
    general, short = mock_server(config, stats=general_stats), mock_server(config, stats=short_stats)
    for i in range(300):
        msg = rng.choice([("pread_iolist", rng.randrange(4)), ("pread", 0, 8), ("append", b"x")])
        cls = rng.choice(["interactive", "db_compact", "view_update"])
        now = float(i)
        if short.can_admit():
            assert general.can_admit()
            want = general.enqueue(IoqRequest(fd="fd", msg=msg, class_=cls, t0=now), i)
            subs = general.maybe_submit(now)
            got = short.admit(IoqRequest(fd="fd", msg=msg, class_=cls, t0=now), i, now)
            assert (got is None) == (not want)
            assert subs == ([] if got is None else [got])
        else:
            general.enqueue(IoqRequest(fd="fd", msg=msg, class_=cls, t0=now), i)
            short.enqueue(IoqRequest(fd="fd", msg=msg, class_=cls, t0=now), i)
            assert general.maybe_submit(now) == short.maybe_submit(now)
        if general.reqs and rng.random() < 0.5:  # the oldest in flight answers
            ref = min(general.reqs)
            assert general.complete(ref, b"r", now + 0.5) == short.complete(ref, b"r", now + 0.5)
        assert _picture(general, general_stats) == _picture(short, short_stats)
    assert general_stats.counter("couchdb.io_queue2.merged") > 0, "no read was merged: the test proves less"
