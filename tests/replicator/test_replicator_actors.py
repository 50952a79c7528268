"""The replicator scheduler end to end: real processes, real SQLite files.

The tree (job supervisor + scheduler + reader) runs in the test process or
in a host of its own; every job runs in a host process of its own.  Tests
wait on the scheduler's events (a `Probe` subscribed to it), on replies, or
on queues fed by probes, never on sleep.  Intervals are short (0.1-0.2 s) and
the back-off unit small, so rotation and back-off happen within seconds.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from typing import Any

import pytest

from actors.replicator import DocStore, Rep
from actors.replicator import scheduler as sched
from actors.replicator.records import STARTING
from actors.replicator.scheduler_sup import SCHEDULER_SUP
from actors.replicator.sup import start_replicator
from supervision import which_children
from tests.kernel.probes import Gate
from tests.polling import poll_until
from tests.replicator.actor_jobs import CountingJob, GatedJob, Probe, RecordingJob, make_source, runs_db

pytestmark = pytest.mark.timeout(60)


def configure(node: Any, **values: Any) -> None:
    for key, value in values.items():
        node.config.set("replicator", key, str(value))


def subscribe(node: Any) -> "queue.Queue[Any]":
    q: queue.Queue = queue.Queue()
    sched.subscribe(node, node.spawn(Probe, q))
    return q


def wait_for(q: "queue.Queue[Any]", pred: Any, timeout: float = 20.0, limit: int = 100_000) -> list:
    """Events until ``pred(event)`` holds (returned, with those before it)."""
    deadline = time.monotonic() + timeout
    seen = []
    for _ in range(limit):
        event = q.get(timeout=max(0.01, deadline - time.monotonic()))
        seen.append(event)
        if pred(event):
            return seen
    raise AssertionError(f"no matching event in {limit} events")


def rep(
    tmp_path: Any,
    i: int,
    *,
    docs: int = 20,
    continuous: bool = False,
    db_name: str | None = "_replicator",
    **options: Any,
) -> Rep:
    source = str(tmp_path / f"source{i}.db")
    if docs:
        make_source(source, docs)
    opts = {
        "continuous": continuous,
        "create_target": True,
        "worker_batch_size": 5,
        "worker_processes": 2,
        "checkpoint_interval": 100,
        "run_log": str(tmp_path / "runs.db"),
    }
    opts.update(options)
    return Rep(id=f"job{i}", source=source, target=str(tmp_path / f"target{i}.db"), options=opts, db_name=db_name)


def doc_count(path: str) -> int:
    with DocStore(path) as store:
        return store.info()["doc_count"]


def assert_never_ran_twice(tmp_path: Any) -> None:
    conn = runs_db(str(tmp_path / "runs.db"))
    try:
        assert conn.execute("SELECT * FROM overlaps").fetchall() == []
        by_job: dict = {}
        for job, pid, started, ended in conn.execute("SELECT * FROM runs ORDER BY started"):
            by_job.setdefault(job, []).append((started, ended, pid))
    finally:
        conn.close()
    for job, runs in by_job.items():
        for (s1, e1, p1), (s2, _e2, _p2) in zip(runs, runs[1:]):
            # A finished run ended before the next began; a killed run (no end,
            # or -1) was checked dead at the next start (no overlap recorded).
            assert e1 is None or e1 == -1 or e1 <= s2, f"{job}: run of {p1} [{s1}, {e1}] overlaps next at {s2}"


# -- rotation ----------------------------------------------------------------------------


def test_fifty_jobs_with_five_slots_all_make_progress_through_rotation(node, tmp_path):
    configure(node, max_jobs=5, max_churn=5, interval=150, backoff_interval=0.05)
    start_replicator(node, RecordingJob)
    q = subscribe(node)
    reps = [rep(tmp_path, i, docs=10, continuous=True) for i in range(50)]
    for r in reps:
        sched.add_job(node, r)
    assert len(sched.jobs(node)) == 50
    stopped: set = set()
    running_max = 0

    def rotated(event: Any) -> bool:
        nonlocal running_max
        if event[1] == "stopped":
            stopped.add(event[2])
        running = sum(1 for j in sched.jobs(node) if j["pid"] is not None)
        running_max = max(running_max, running)
        return len(stopped) == 50

    wait_for(q, rotated, timeout=40)
    assert running_max <= 5
    # Every job ran, copied its documents and recorded a checkpoint when rotated out.
    for r in reps:
        assert doc_count(r.target) == 10, r.id
        with DocStore(r.source) as source:
            assert source.get_local(f"_local/{r.id}").body["source_last_seq"] == 10, r.id
    assert_never_ran_twice(tmp_path)
    stats = node.stats()
    assert stats["gauges"]["couch_replicator.jobs.total"] == 50
    assert stats["gauges"]["couch_replicator.jobs.running"] <= 5
    assert stats["counters"]["couch_replicator.jobs.stops"] >= 50


# -- crashes and back-off --------------------------------------------------------------------


def test_killed_jobs_back_off_and_eventually_complete(node, tmp_path):
    configure(node, max_jobs=4, interval=100, backoff_interval=0.3)
    start_replicator(node, RecordingJob)
    q = subscribe(node)
    reps = [rep(tmp_path, i, docs=300, worker_batch_size=3, worker_processes=1, hold_first_run=True) for i in range(8)]
    for r in reps:
        sched.add_job(node, r)
    killed: dict = {}
    crashed_at: dict = {}
    restarted_after: dict = {}
    completed: set = set()

    def handle(event: Any) -> bool:
        _, kind, job_id, detail = event
        if kind == "started" and job_id not in killed:
            try:
                os.kill(detail.os_pid, signal.SIGKILL)
                killed[job_id] = True
            except ProcessLookupError:
                killed[job_id] = False  # already finished
        elif kind == "started" and job_id in crashed_at and job_id not in restarted_after:
            restarted_after[job_id] = time.monotonic() - crashed_at[job_id]
        elif kind == "crashed":
            assert detail == "killed"
            crashed_at[job_id] = time.monotonic()
            summary = sched.job_summary(node, job_id)
            assert summary["state"] in ("crashing", "running"), summary
        elif kind == "completed":
            completed.add(job_id)
        return len(completed) == len(reps)

    wait_for(q, handle, timeout=50)
    assert sched.jobs(node) == []
    assert len(crashed_at) == len(reps), f"only {len(crashed_at)} kills landed"
    for job_id, delay in restarted_after.items():
        assert delay >= 0.25, f"{job_id} restarted {delay:.3f}s after its crash (back-off 0.3s)"
    for r in reps:
        assert doc_count(r.target) == 300, r.id
    assert_never_ran_twice(tmp_path)


def test_crash_of_transient_job_removes_it_and_permanent_job_stays(node, tmp_path):
    configure(node, max_jobs=5, interval=100, backoff_interval=10)
    start_replicator(node, RecordingJob)
    q = subscribe(node)
    transient = rep(tmp_path, 0, continuous=True, db_name=None)
    permanent = rep(tmp_path, 1, continuous=True)
    ids = {}
    for r in (transient, permanent):
        sched.add_job(node, r)
    for event in wait_for(q, lambda e: e[1] == "started" and e[2] == "job1"):
        if event[1] == "started":
            ids[event[2]] = event[3]
    for job_id in ("job0", "job1"):
        os.kill(ids[job_id].os_pid, signal.SIGKILL)
        wait_for(q, lambda e, j=job_id: e[1] == "crashed" and e[2] == j)
    assert sched.job(node, "job0") is None
    assert sched.find_jobs_by_dbname(node, "_replicator") == ["job1"]
    summary = sched.job_summary(node, "job1")
    assert summary["state"] == "crashing" and summary["error_count"] == 1
    assert summary["info"] == "killed"
    history = sched.job(node, "job1")["history"]
    assert history[0]["type"] == "crashed"


def test_missing_source_is_reported_then_recovers_after_back_off(node, tmp_path):
    # A long back-off while the crash is read (a free slot is refilled after
    # every crash, as in the seed: with a short one the job could already be
    # running again), then a short one for the recovery.
    configure(node, max_jobs=5, interval=100, backoff_interval=60)
    start_replicator(node, RecordingJob)
    q = subscribe(node)
    r = rep(tmp_path, 0, docs=0)
    transient = rep(tmp_path, 1, docs=0, db_name=None)
    sched.add_job(node, r)
    event = wait_for(q, lambda e: e[1] == "crashed" and e[2] == "job0")[-1]
    assert event[3] == ("db_not_found", f"could not open {r.source}")
    summary = sched.job_summary(node, "job0")
    assert summary["state"] == "crashing"
    assert summary["info"] == f"db_not_found: could not open {r.source}"
    # A transient job that cannot start is not retried.
    sched.add_job(node, transient)
    wait_for(q, lambda e: e[1] == "removed" and e[2] == "job1")
    assert sched.job(node, "job1") is None
    # The source appears; after its back-off the job runs and completes.
    make_source(r.source, 7)
    configure(node, backoff_interval=0.001)  # reaches the scheduler through its config listener
    poll_until(
        lambda: all(b["backoff"] < 1 for b in sched.backoffs(node) if b["id"] == "job0"),
        "the scheduler took the short back-off",
    )
    sched.reschedule(node)
    wait_for(q, lambda e: e[1] == "completed" and e[2] == "job0")
    assert doc_count(r.target) == 7


# -- continuous jobs, checkpoints, resume --------------------------------------------------------


def start_probed(node, interval: int):
    """The replicator running `RecordingJob`s (max_jobs 5, scheduler interval
    ``interval`` ms): its top supervisor, its events subscribed (a queue), and
    a `Probe` with the queue the jobs report their progress to."""
    configure(node, max_jobs=5, interval=interval)
    top = start_replicator(node, RecordingJob)
    q = subscribe(node)
    progress: queue.Queue = queue.Queue()
    return top, q, progress, node.spawn(Probe, progress)


def test_continuous_job_follows_changes_checkpoints_on_stop_and_resumes(node, tmp_path):
    _, q, progress, probe = start_probed(node, interval=5000)
    r = rep(tmp_path, 0, docs=10, continuous=True, notify=probe, checkpoint_interval=60000, changes_poll_interval=50)
    sched.add_job(node, r)
    wait_for(progress, lambda e: e[2] == 10)
    make_source(r.source, 15, start=10)  # 15 new documents, sequences 11..25
    wait_for(progress, lambda e: e[2] == 25)
    assert doc_count(r.target) == 25
    with DocStore(r.source) as source:
        assert source.get_local("_local/job0") is None  # no checkpoint yet (interval 60 s)
    sched.remove_job(node, "job0")  # shutdown: final checkpoint on both sides
    for path in (r.source, r.target):
        with DocStore(path) as store:
            assert store.get_local("_local/job0").body["source_last_seq"] == 25
    make_source(r.source, 5, start=25)
    sched.add_job(node, r)
    events = wait_for(progress, lambda e: e[2] == 30)
    # Resumed from the checkpoint: the first batch reported starts after 25.
    assert all(e[2] > 25 for e in events)
    assert doc_count(r.target) == 30
    assert_never_ran_twice(tmp_path)


def test_periodic_checkpoints_are_recorded_on_both_sides(node, tmp_path):
    _, q, progress, probe = start_probed(node, interval=5000)
    r = rep(tmp_path, 0, docs=10, continuous=True, notify=probe, checkpoint_interval=50)
    sched.add_job(node, r)
    wait_for(progress, lambda e: e[2] == 10)
    started = [e for e in wait_for(q, lambda e: e[1] == "started")][-1][3]
    # A checkpoint call is answered after any timer checkpoint queued before it.
    started.call("checkpoint")
    for path in (r.source, r.target):
        with DocStore(path) as store:
            body = store.get_local("_local/job0").body
            assert body["source_last_seq"] == 10
            assert body["history"][0]["docs_written"] == 10


def test_host_supplied_job_class_is_stepped_to_completion(node, tmp_path):
    configure(node, max_jobs=2, interval=100, backoff_interval=0.05)
    start_replicator(node, CountingJob)
    q = subscribe(node)
    log = str(tmp_path / "counting.db")
    for i in range(4):
        sched.add_job(node, Rep(id=f"count{i}", options={"steps": 50 + i, "log": log}, db_name="_replicator"))
    done: set = set()
    wait_for(q, lambda e: e[1] == "completed" and (done.add(e[2]) or len(done) == 4))
    import sqlite3

    conn = sqlite3.connect(log)
    try:
        rows = dict(conn.execute("SELECT job, done FROM progress").fetchall())
    finally:
        conn.close()
    assert rows == {f"count{i}": 50 + i for i in range(4)}


# -- config and reads -------------------------------------------------------------------------------


def test_config_changes_take_effect_and_invalid_values_are_rejected(node, tmp_path):
    configure(node, max_jobs=3, interval=60000)
    start_replicator(node, RecordingJob)
    q = subscribe(node)
    for i in range(3):
        sched.add_job(node, rep(tmp_path, i, continuous=True))
    # add_job starts a job at once only while the table is smaller than max_jobs.
    assert sum(1 for j in sched.jobs(node) if j["pid"] is not None) == 2
    sched.reschedule(node)
    assert sum(1 for j in sched.jobs(node) if j["pid"] is not None) == 3
    node.config.set("replicator", "max_jobs", "1")
    wait_for(q, lambda e: e[1] == "config_applied" and e[2] == ("replicator", "max_jobs"))
    sched.reschedule(node)
    assert sum(1 for j in sched.jobs(node) if j["pid"] is not None) == 1
    for key, bad in (("max_jobs", "-1"), ("max_churn", "many"), ("interval", "0"), ("max_history", "0")):
        node.config.set("replicator", key, bad)
        wait_for(q, lambda e, k=key: e[1] == "config_rejected" and e[2] == ("replicator", k))
    settings = node.whereis("couch_replicator_scheduler").call(("settings",))
    assert (settings.max_jobs, settings.max_churn, settings.interval, settings.max_history) == (1, 20, 60000, 20)
    node.config.set("replicator", "max_history", "2")
    wait_for(q, lambda e: e[1] == "config_applied" and e[2] == ("replicator", "max_history"))
    # A short interval takes effect at once: rotation starts without a manual reschedule.
    node.config.set("replicator", "max_churn", "1")
    node.config.set("replicator", "interval", "50")
    rotated_out = wait_for(q, lambda e: e[1] == "stopped")[-1][2]
    wait_for(q, lambda e: e[1] == "started")
    # Histories are trimmed to the new max_history as they are updated.
    assert len(sched.job(node, rotated_out)["history"]) <= 2


def test_reads_do_not_block_while_the_scheduler_is_busy(node, tmp_path):
    configure(node, max_jobs=5, interval=60000)
    start_replicator(node, GatedJob)
    held: queue.Queue = queue.Queue()
    gate = node.spawn(Gate, held)
    gate.call("open")
    sched.add_job(node, rep(tmp_path, 0, docs=5, continuous=True, gate=gate))
    # The next start blocks in the job's init until the gate opens again.
    gate2 = node.spawn(Gate, held)
    result: queue.Queue = queue.Queue()
    adder = threading.Thread(target=lambda: result.put(sched.add_job(node, rep(tmp_path, 1, docs=5, gate=gate2))))
    adder.start()
    try:
        assert held.get(timeout=10) == "held"
        # The scheduler is stuck inside add_job; the reader answers at once.
        jobs = {j["id"]: j for j in sched.jobs(node, timeout=2.0)}
        assert set(jobs) == {"job0", "job1"}
        assert jobs["job1"]["pid"] == repr(STARTING)
        assert sched.job_summary(node, "job1", timeout=2.0)["state"] == "running"
        assert sched.rep_state(node, "job0", timeout=2.0).source == str(tmp_path / "source0.db")
        assert sched.find_jobs_by_doc(node, "_replicator", None, timeout=2.0) == ["job0", "job1"]
        assert result.empty()
    finally:
        gate2.call("open")
        adder.join(timeout=30)
    assert result.get(timeout=1) == "ok"


def test_tree_in_its_own_host_answers_reads_from_other_processes(node, tmp_path):
    configure(node, max_jobs=2, interval=100)
    start_replicator(node, RecordingJob, host="replicator")
    sup = node.whereis(SCHEDULER_SUP)
    assert sup is not None and sup.os_pid != os.getpid()
    q = subscribe(node)
    for i in range(3):
        sched.add_job(node, rep(tmp_path, i, docs=5))
    done: set = set()
    wait_for(q, lambda e: e[1] == "completed" and (done.add(e[2]) or len(done) == 3))
    assert sched.jobs(node) == []
    assert which_children(sup) == []
    assert node.stats()["counters"]["couch_replicator.jobs.starts"] >= 3
    assert sched.health_threshold() == 120.0


def test_scheduler_death_restarts_the_tree_and_stops_orphaned_jobs(node, tmp_path):
    top, q, progress, probe = start_probed(node, interval=60000)
    for i in range(2):
        sched.add_job(node, rep(tmp_path, i, continuous=True, notify=probe, checkpoint_interval=60000))
    refs = [e[3] for e in wait_for(q, lambda e: e[1] == "started" and e[2] == "job1") if e[1] == "started"]
    caught_up: set = set()
    wait_for(progress, lambda e: e[2] == 20 and (caught_up.add(e[1]) or len(caught_up) == 2))
    monitors = [node.monitor(r) for r in refs]
    old = node.whereis(sched.SCHEDULER)
    node.kill(old)
    # one_for_all: the job supervisor is restarted too, shutting its jobs down
    # (each takes its final checkpoint); no job is left running unscheduled.
    for m, r in zip(monitors, refs):
        assert m.wait(20) == (r, "shutdown")
    assert len(which_children(top)) == 2  # answered once the restart is done
    new = node.whereis(sched.SCHEDULER)
    assert new is not None and new != old
    assert sched.jobs(node) == []
    for i in range(2):
        with DocStore(str(tmp_path / f"source{i}.db")) as source:
            assert source.get_local(f"_local/job{i}").body["source_last_seq"] == 20
    assert_never_ran_twice(tmp_path)
