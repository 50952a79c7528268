"""The seed's couch_jobs_tests.erl, case by case, on a real SQLite file.

``TX = None`` plays the seed's ``?TX = undefined``: the API opens its own
transaction.  Cases that need the actor tree (the server and supervisor
restart cases) belong to the actor layer; their store-level halves are here
(type_timeouts_and_server uses `TypeDiscovery`, enqueue_inactive drives
`ActivityMonitorLogic` directly instead of waiting for its timer).
"""

from __future__ import annotations

import queue
import threading
import uuid
from types import SimpleNamespace

import pytest

import actors.couch_jobs as couch_jobs
from actors.couch_jobs import (
    ActivityMonitorLogic,
    Halt,
    JsonEncodingError,
    NotFound,
    NoTypeTimeout,
    TypeDiscovery,
)
from tests.couch_jobs.seed_cases import TX, subscribe_case, subscribe_wait_multiple_case

pytestmark = pytest.mark.timeout(30)


def get_job(t, j):
    return couch_jobs.get_job(t, j)


def test_add_remove_pending(ctx):
    t1, j1, t2, j2 = ctx["t1"], ctx["j1"], ctx["t2"], ctx["j2"]
    assert couch_jobs.add(TX, t1, j1, {}) is None
    job = get_job(t1, j1)
    assert (job.state, job.data) == ("pending", {})
    assert couch_jobs.remove(TX, t1, j1) is None
    # Data and numeric type should work as well. Also do it in a transaction
    data = {"x": 42}
    with couch_jobs.transaction() as tx:
        assert couch_jobs.add(tx, t2, j2, data) is None
    job = get_job(t2, j2)
    assert (job.state, job.data) == ("pending", data)
    assert couch_jobs.remove(TX, t2, j2) is None


def test_get_job_data_and_state(ctx):
    t, j = ctx["t1"], ctx["j1"]
    data = {"x": 42}
    couch_jobs.add(TX, t, j, data)
    assert couch_jobs.get_job_data(TX, t, j) == data
    assert couch_jobs.get_job_state(TX, t, j) == "pending"
    assert couch_jobs.remove(TX, t, j) is None
    with pytest.raises(NotFound):
        couch_jobs.get_job_data(TX, t, j)
    with pytest.raises(NotFound):
        couch_jobs.get_job_state(TX, t, j)


def test_add_remove_errors(ctx):
    t, j = ctx["t1"], ctx["j1"]
    with pytest.raises(NotFound):
        couch_jobs.remove(TX, 999, "x")
    with pytest.raises(JsonEncodingError):
        couch_jobs.add(TX, t, j, {1: 2})
    with pytest.raises(NoTypeTimeout):
        couch_jobs.add(TX, "x", j, {})
    assert couch_jobs.add(TX, t, j, {}) is None
    assert couch_jobs.add(TX, t, j, {}) is None
    assert couch_jobs.remove(TX, t, j) is None


def test_resubmit_as_job_creator(ctx):
    t, j = ctx["t1"], ctx["j1"]
    data = {"x": 42}
    couch_jobs.add(TX, t, j, data, 15)

    # Job was pending, doesn't get resubmitted
    couch_jobs.add(TX, t, j, data, 16)
    job = get_job(t, j)
    assert (job.state, job.stime) == ("pending", 16)

    job1, accepted_data = couch_jobs.accept(t, timeout=5)
    assert accepted_data == data

    # If is running, it gets flagged to be resubmitted
    couch_jobs.add(TX, t, j, data, 17)
    job = get_job(t, j)
    assert (job.state, job.stime) == ("running", 17)
    assert couch_jobs.is_resubmitted(get_job(t, j)) is True

    assert couch_jobs.finish(TX, job1) is None
    # It should be pending according to the resubmit flag
    job = get_job(t, j)
    assert (job.state, job.stime) == ("pending", 17)

    # A finished job will be re-enqueued
    job2, _ = couch_jobs.accept(t, timeout=5)
    assert couch_jobs.finish(TX, job2) is None
    job = get_job(t, j)
    assert (job.state, job.stime) == ("finished", 17)
    couch_jobs.add(TX, t, j, data, 18)
    job = get_job(t, j)
    assert (job.state, job.stime) == ("pending", 18)


def test_re_add_stores_new_data(ctx):
    """The seed's intent (and later upstream): re-adding replaces pending/finished data."""
    t, j = ctx["t1"], ctx["j1"]
    couch_jobs.add(TX, t, j, {"v": 1})
    couch_jobs.add(TX, t, j, {"v": 2})
    assert couch_jobs.get_job_data(TX, t, j) == {"v": 2}
    job, data = couch_jobs.accept(t, timeout=5)
    assert data == {"v": 2}
    # running: the worker owns the data; re-adding only flags a resubmit
    couch_jobs.add(TX, t, j, {"v": 3})
    assert couch_jobs.get_job_data(TX, t, j) == {"v": 2}
    couch_jobs.finish(TX, job, {"v": 4})
    job, data = couch_jobs.accept(t, timeout=5)
    assert data == {"v": 4}
    couch_jobs.finish(TX, job)
    assert couch_jobs.get_job_state(TX, t, j) == "finished"
    couch_jobs.add(TX, t, j, {"v": 5})
    assert couch_jobs.get_job_state(TX, t, j) == "pending"
    assert couch_jobs.get_job_data(TX, t, j) == {"v": 5}


def test_type_timeouts_and_server(ctx):
    t, t1_timeout = ctx["t1"], ctx["t1_timeout"]
    server = TypeDiscovery(ctx["jobs"].store)
    assert couch_jobs.get_type_timeout(t) == t1_timeout

    running: list = []
    to_start, to_stop = server.check_types(running)
    assert (len(to_start), to_stop) == (2, [])
    running.extend(to_start)

    couch_jobs.set_type_timeout("t3", 8)
    to_start, to_stop = server.check_types(running)
    assert (to_start, to_stop) == (["t3"], [])
    running.extend(to_start)
    assert len(running) == 3

    couch_jobs.clear_type_timeout("t3")
    to_start, to_stop = server.check_types(running)
    assert (to_start, to_stop) == ([], ["t3"])
    running.remove("t3")
    assert len(running) == 2
    # no timeout, no notifier: subscribing to a t3 job is not_found
    with pytest.raises(NotFound):
        couch_jobs.subscribe("t3", "j")
    assert couch_jobs.get_type_timeout("t3") is None


def test_basic_accept_and_finish(ctx):
    t, j = ctx["t1"], ctx["j1"]
    couch_jobs.add(TX, t, j, {})
    job, data = couch_jobs.accept(t, timeout=5)
    assert data == {}
    assert get_job(t, j).state == "running"
    # check json validation for bad data in finish
    with pytest.raises(JsonEncodingError):
        with couch_jobs.transaction() as tx:
            couch_jobs.finish(tx, job, {1: 1})
    data = {"x": 42}
    with couch_jobs.transaction() as tx:
        assert couch_jobs.finish(tx, job, data) is None
    got = get_job(t, j)
    assert (got.state, got.data) == ("finished", data)


def _spawn_accept(t, results: queue.Queue) -> threading.Thread:
    def run():
        try:
            results.put(couch_jobs.accept(t, timeout=10))
        except Exception as exc:  # reported to the test thread
            results.put(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _wait_accept(results: queue.Queue, timeout: float = 0.5):
    try:
        return results.get(timeout=timeout)
    except queue.Empty:
        return "timeout"


def test_accept_blocking(ctx):
    t, j1, j2 = ctx["t1"], ctx["j1"], ctx["j2"]
    res1: queue.Queue = queue.Queue()
    th1 = _spawn_accept(t, res1)
    couch_jobs.add(TX, t, j1, {})
    job, data = _wait_accept(res1, 5)
    assert (job.id, data) == (j1, {})
    res2: queue.Queue = queue.Queue()
    th2 = _spawn_accept(t, res2)
    assert _wait_accept(res2) == "timeout"
    couch_jobs.add(TX, t, j2, {})
    job, data = _wait_accept(res2, 5)
    assert (job.id, data) == (j2, {})
    th1.join(5)
    th2.join(5)


def test_job_processor_update(ctx):
    t, j = ctx["t1"], ctx["j1"]
    couch_jobs.add(TX, t, j, {})
    job, _ = couch_jobs.accept(t, timeout=5)

    with couch_jobs.transaction() as tx:
        assert couch_jobs.update(tx, job, {"x": 1}).id == j
    got = get_job(t, j)
    assert (got.data, got.state) == ({"x": 1}, "running")

    with couch_jobs.transaction() as tx:
        assert couch_jobs.update(tx, job).id == j
    got = get_job(t, j)
    assert (got.data, got.state) == ({"x": 1}, "running")

    with couch_jobs.transaction() as tx:
        couch_jobs.update(tx, job, {"x": 2})

    # check json validation for bad data in update
    with pytest.raises(JsonEncodingError):
        with couch_jobs.transaction() as tx:
            couch_jobs.update(tx, job, {1: 1})
    got = get_job(t, j)
    assert (got.data, got.state) == ({"x": 2}, "running")

    # Finish may update the data as well
    assert couch_jobs.finish(TX, job, {"x": 3}) is None
    got = get_job(t, j)
    assert (got.data, got.state) == ({"x": 3}, "finished")


def test_resubmit_enqueues_job(ctx):
    t, j = ctx["t1"], ctx["j1"]
    couch_jobs.add(TX, t, j, {})
    job1, _ = couch_jobs.accept(t, timeout=5)
    assert couch_jobs.resubmit(TX, job1, 6).resubmit is True
    assert couch_jobs.finish(TX, job1) is None
    got = get_job(t, j)
    assert (got.state, got.stime) == ("pending", 6)
    job2, _ = couch_jobs.accept(t, timeout=5)
    assert couch_jobs.finish(TX, job2) is None
    assert get_job(t, j).state == "finished"


def test_resubmit_custom_schedtime(ctx):
    t, j = ctx["t1"], ctx["j1"]
    assert couch_jobs.add(TX, t, j, {}, 7) is None
    job, _ = couch_jobs.accept(t, timeout=5)
    couch_jobs.resubmit(TX, job, 9)
    assert couch_jobs.finish(TX, job) is None
    got = get_job(t, j)
    assert (got.stime, got.state) == (9, "pending")


def test_accept_max_schedtime(ctx):
    t, j1, j2 = ctx["t1"], ctx["j1"], ctx["j2"]
    couch_jobs.add(TX, t, j1, {}, 5000)
    couch_jobs.add(TX, t, j2, {}, 3000)
    with pytest.raises(NotFound):
        couch_jobs.accept(t, max_sched_time=1000, timeout=0)
    assert couch_jobs.accept(t, max_sched_time=3000, timeout=5)[0].id == j2
    assert couch_jobs.accept(t, max_sched_time=9000, timeout=5)[0].id == j1


def test_accept_no_schedule(ctx):
    t = ctx["t1"]
    job_count = 25
    ids = [uuid.uuid4().hex for _ in range(job_count)]
    for j in ids:
        couch_jobs.add(TX, t, j, {})
    with pytest.raises(ValueError, match="no_schedule"):
        couch_jobs.accept(t, no_schedule=True, max_sched_time=1)
    accepted = [couch_jobs.accept(t, no_schedule=True, timeout=5)[0].id for _ in range(job_count)]
    assert sorted(accepted) == sorted(ids)


def test_subscribe(ctx):
    subscribe_case(ctx)


def test_subscribe_wait_multiple(ctx):
    subscribe_wait_multiple_case(ctx)


def test_unsubscribe_discards_delivered_notifications(ctx):
    """The seed's flush never matched its own event shape; here it really flushes."""
    jobs, t, j = ctx["jobs"], ctx["t1"], ctx["j1"]
    couch_jobs.add(TX, t, j, {})
    sub, _, _ = couch_jobs.subscribe(t, j)
    job, _ = couch_jobs.accept(t, timeout=5)
    couch_jobs.finish(TX, job)
    assert jobs.subscriptions.pump([couch_jobs.encode_type(t)]) == 1
    assert jobs.subscriptions.pending_events(sub.ref) == 1
    couch_jobs.unsubscribe(sub)
    assert jobs.subscriptions.pending_events(sub.ref) == 0
    assert couch_jobs.wait(sub, timeout=0.05) is None


def test_enqueue_inactive(ctx):
    jobs, t, j = ctx["jobs"], ctx["t1"], ctx["j1"]
    monitor = ActivityMonitorLogic(t, jobs.store)
    first_wait = monitor.init()
    assert ctx["t1_timeout"] < first_wait <= 1.5 * ctx["t1_timeout"] + 0.001

    couch_jobs.add(TX, t, j, {"y": 1})
    job, _ = couch_jobs.accept(t, timeout=5)

    sub_id, state, data = couch_jobs.subscribe(t, j)
    assert (state, data) == ("running", {"y": 1})

    # The monitor's timer fires twice: the first check remembers the activity
    # sequence, the second finds the job not updated since and re-enqueues it.
    assert monitor.handle_check()[0] == []
    assert monitor.handle_check()[0] == [j]

    assert couch_jobs.wait(sub_id, "pending", 5) == (t, j, "pending", {"y": 1})
    assert get_job(t, j).state == "pending"

    # After job was re-enqueued, old job processor can't update it anymore
    with pytest.raises(Halt):
        couch_jobs.update(TX, job)
    with pytest.raises(Halt):
        couch_jobs.finish(TX, job)


def test_remove_running_job(ctx):
    t, j = ctx["t1"], ctx["j1"]
    couch_jobs.add(TX, t, j, {})
    job, _ = couch_jobs.accept(t, timeout=5)
    assert couch_jobs.remove(TX, t, j) is None
    with pytest.raises(NotFound):
        couch_jobs.remove(TX, t, j)
    with pytest.raises(Halt):
        couch_jobs.update(TX, job)
    with pytest.raises(Halt):
        couch_jobs.finish(TX, job)


def test_check_get_jobs(ctx):
    t1, j1, t2, j2 = ctx["t1"], ctx["j1"], ctx["t2"], ctx["j2"]
    couch_jobs.add(TX, t1, j1, {})
    couch_jobs.add(TX, t2, j2, {})
    assert couch_jobs.get_jobs() == [(t2, j2, "pending", {}), (t1, j1, "pending", {})]
    couch_jobs.accept(t1, timeout=5)
    assert couch_jobs.get_jobs() == [(t2, j2, "pending", {}), (t1, j1, "running", {})]


def test_use_fabric_transaction_object(ctx):
    t1, j1 = ctx["t1"], ctx["j1"]
    with couch_jobs.transaction() as tx:
        tx.execute("CREATE TABLE docs (id TEXT PRIMARY KEY, body TEXT)")
    db = SimpleNamespace(tx=None)  # a db handle holding no transaction
    assert couch_jobs.add(db, t1, j1, {}) is None
    got = get_job(t1, j1)
    assert (got.state, got.data) == ("pending", {})
    job, _ = couch_jobs.accept(t1, timeout=5)
    with couch_jobs.transaction() as tx:
        db1 = SimpleNamespace(tx=tx)
        assert couch_jobs.get_job_data(db1, t1, j1) == {}
        tx.execute("INSERT INTO docs VALUES ('1', '{}')")
        tx.execute("INSERT INTO docs VALUES ('2', '{}')")
        assert couch_jobs.finish(db1, job, {"d": 1}) is None
    assert get_job(t1, j1).data == {"d": 1}
    with couch_jobs.transaction(write=False) as tx:
        assert tx.execute("SELECT count(*) FROM docs").fetchone() == (2,)
    assert couch_jobs.remove(SimpleNamespace(tx=None), t1, j1) is None


def test_caller_transaction_rolls_back_job_and_own_tables(ctx):
    t1, j1 = ctx["t1"], ctx["j1"]
    with couch_jobs.transaction() as tx:
        tx.execute("CREATE TABLE docs (id TEXT PRIMARY KEY)")
    couch_jobs.add(TX, t1, j1, {})
    job, _ = couch_jobs.accept(t1, timeout=5)
    with pytest.raises(RuntimeError, match="boom"):
        with couch_jobs.transaction() as tx:
            tx.execute("INSERT INTO docs VALUES ('1')")
            couch_jobs.finish(tx, job, {"d": 1})
            raise RuntimeError("boom")
    assert get_job(t1, j1).state == "running"
    with couch_jobs.transaction(write=False) as tx:
        assert tx.execute("SELECT count(*) FROM docs").fetchone() == (0,)
    couch_jobs.finish(TX, job)
    assert get_job(t1, j1).state == "finished"
