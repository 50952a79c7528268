"""The notifier, type monitor, activity monitor and type discovery logic,
driven directly with sequences, ``now`` and seeded randomness."""

from __future__ import annotations

import random

import pytest

import actors.couch_jobs as couch_jobs
from actors.config import Config
from actors.couch_jobs import (
    ActivityMonitorLogic,
    Notification,
    NotifierLogic,
    TypeDiscovery,
    TypeMonitorLogic,
    db,
    diff_types,
)
from actors.couch_jobs.activity import MISSING_TIMEOUT_CHECK_MSEC
from actors.couch_jobs.model import encode_type

pytestmark = pytest.mark.timeout(20)


def _refs():
    counter = iter(range(1000))
    return lambda: f"ref{next(counter)}"


# -- NotifierLogic ---------------------------------------------------------


def test_notifier_running_updates_only_when_sequence_advances(jobs):
    n = NotifierLogic("t", jobs.store, new_ref=_refs())
    ref = n.subscribe("j", "pending", 0, "pid1")
    assert n.notify_job_ids({"j": (5, "running", {"a": 1})}) == [
        Notification("pid1", ref, "t", "j", "running", {"a": 1})
    ]
    assert n.notify_job_ids({"j": (5, "running", {"a": 1})}) == []
    assert n.notify_job_ids({"j": (4, "running", {"a": 0})}) == []
    assert [x.data for x in n.notify_job_ids({"j": (9, "running", {"a": 2})})] == [{"a": 2}]
    assert n.subscriptions() == {"j": {ref: ("pid1", "running", 9)}}


def test_notifier_same_state_is_not_repeated_and_terminal_states_unsubscribe(jobs):
    n = NotifierLogic("t", jobs.store, new_ref=_refs())
    r1 = n.subscribe("j1", "pending", 0, "pid1")
    r2 = n.subscribe("j2", "running", 3, "pid1")
    assert n.notify_job_ids({"j1": (0, "pending", {})}) == []
    notes = n.notify_job_ids({"j1": (None, "finished", {"x": 1}), "j2": (None, "not_found", None)})
    assert {(x.ref, x.state) for x in notes} == {(r1, "finished"), (r2, "not_found")}
    assert len(n) == 0
    assert n.subscriptions() == {}


def test_notifier_resubscribe_returns_same_ref_and_down_unsubscribes(jobs):
    n = NotifierLogic("t", jobs.store, new_ref=_refs())
    ref = n.subscribe("j", "pending", 0, "pid1")
    assert n.subscribe("j", "running", 4, "pid1") == ref
    other = n.subscribe("j", "pending", 0, "pid2")
    assert other != ref
    assert ref in n and other in n
    n.subscriber_down(ref, "pid1")
    assert ref not in n
    assert n.subscriptions() == {"j": {other: ("pid2", "pending", 0)}}
    n.unsubscribe(other, "pid2")
    n.unsubscribe(other, "pid2")  # idempotent
    assert len(n) == 0


def test_notifier_type_updated_reads_store_and_reports_removal(ctx):
    t, j = ctx["t1"], ctx["j1"]
    store = ctx["jobs"].store
    couch_jobs.add(None, t, j, {"k": 1})
    n = NotifierLogic(t, store, new_ref=_refs())
    ref = n.subscribe(j, "pending", 0, "me")
    job, _ = couch_jobs.accept(t, timeout=5)
    assert n.type_updated(n.activity_seq()) == [Notification("me", ref, t, j, "running", {"k": 1})]
    couch_jobs.update(None, job, {"k": 2})
    assert [x.data for x in n.type_updated(n.activity_seq())] == [{"k": 2}]
    couch_jobs.remove(None, t, j)
    assert [(x.state, x.data) for x in n.type_updated(n.activity_seq())] == [("not_found", None)]
    assert len(n) == 0
    assert n.type_updated(n.activity_seq()) == []


# -- TypeMonitorLogic ------------------------------------------------------


def test_type_monitor_holdoff():
    m = TypeMonitorLogic(seq=3, holdoff=0.05)
    assert m.observe(3, now=10.0) is None
    assert m.observe(4, now=10.0) == 0.0
    assert m.observe(5, now=10.01) == pytest.approx(0.04)
    assert m.observe(5, now=10.02) is None
    assert m.observe(6, now=10.2) == 0.0
    with pytest.raises(ValueError, match="holdoff"):
        TypeMonitorLogic(seq=None, holdoff=-1)


# -- ActivityMonitorLogic --------------------------------------------------


def test_activity_monitor_missing_timeout_checks_every_5s(jobs):
    cfg = Config({"couch_jobs": {"activity_monitor_max_jitter_msec": "100000"}})
    m = ActivityMonitorLogic("nope", jobs.store, config=cfg, rng=random.Random(1))
    for _ in range(20):
        wait = m.schedule_check()
        assert MISSING_TIMEOUT_CHECK_MSEC / 1000 < wait <= 1.5 * MISSING_TIMEOUT_CHECK_MSEC / 1000
    assert m.vs is None


def test_activity_monitor_jitter_is_bounded_by_config(ctx):
    cfg = Config({"couch_jobs": {"activity_monitor_max_jitter_msec": "0"}})
    m = ActivityMonitorLogic(ctx["t1"], ctx["jobs"].store, config=cfg)
    assert m.init() == pytest.approx(ctx["t1_timeout"] + 0.001)


def test_activity_monitor_spares_updated_jobs(ctx):
    t, j1, j2 = ctx["t1"], ctx["j1"], ctx["j2"]
    m = ActivityMonitorLogic(t, ctx["jobs"].store)
    m.init()
    couch_jobs.add(None, t, j1, {})
    couch_jobs.add(None, t, j2, {})
    a, _ = couch_jobs.accept(t, timeout=5)
    b, _ = couch_jobs.accept(t, timeout=5)
    assert m.check_activity() == []
    couch_jobs.update(None, a)  # a reports progress, b does not
    assert m.check_activity() == [b.id]
    assert couch_jobs.get_job_state(None, t, a.id) == "running"
    assert couch_jobs.get_job_state(None, t, b.id) == "pending"
    # a keeps working: the next check spares it again only if it updates again
    couch_jobs.update(None, a)
    assert m.check_activity() == []
    assert m.check_activity() == [a.id]


def test_re_enqueue_spares_a_job_updated_after_the_monitor_read(ctx):
    """The monitor's read and its re-enqueue are apart: an update in between keeps the job."""
    t, j = ctx["t1"], ctx["j1"]
    store = ctx["jobs"].store
    couch_jobs.add(None, t, j, {})
    job, _ = couch_jobs.accept(t, timeout=5)
    with store.transaction(write=False) as tx:
        seen = db.get_running_seqs(tx, encode_type(t))
    assert set(seen) == {j}
    couch_jobs.update(None, job)  # commits after the read, with a fresh sequence
    with store.transaction() as tx:
        assert db.re_enqueue_inactive(tx, encode_type(t), seen) == []
    assert couch_jobs.get_job_state(None, t, j) == "running"
    with store.transaction(write=False) as tx:
        seen = db.get_running_seqs(tx, encode_type(t))
    with store.transaction() as tx:
        assert db.re_enqueue_inactive(tx, encode_type(t), seen) == [j]


def test_activity_monitor_timeout_change_resets_sequence(ctx):
    t, j = ctx["t1"], ctx["j1"]
    m = ActivityMonitorLogic(t, ctx["jobs"].store)
    m.init()
    couch_jobs.add(None, t, j, {})
    couch_jobs.accept(t, timeout=5)
    m.check_activity()
    assert m.vs is not None
    couch_jobs.set_type_timeout(t, 7)
    m.schedule_check()
    assert (m.vs, m.timeout_msec) == (None, 7000)
    # the new timeout is waited out in full: this check only records
    assert m.check_activity() == []
    m.schedule_check()  # unchanged timeout keeps the sequence
    assert m.vs is not None
    assert m.check_activity() == [j]


# -- TypeDiscovery ---------------------------------------------------------


def test_diff_types():
    assert diff_types([1, "a", ("b", 2)], ["a", "gone"]) == ([1, ("b", 2)], ["gone"])


def test_type_discovery_delay_uses_period_and_jitter(jobs):
    cfg = Config({"couch_jobs": {"type_check_period_msec": "1000", "type_check_max_jitter_msec": "10"}})
    d = TypeDiscovery(jobs.store, config=cfg, rng=random.Random(3))
    for _ in range(20):
        # the seed takes max(period div 2, jitter): here 500 ms
        assert d.next_check_delay() > 1.0 and d.next_check_delay() <= 1.5
    jobs.set_type_timeout(("x", 1), 5)
    jobs.set_type_timeout(7, 5)
    assert sorted(d.store_types(), key=repr) == [("x", 1), 7]
