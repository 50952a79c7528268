"""Worker actors in separate host processes, woken and supervised by the real tree."""

from __future__ import annotations

import os
import queue
import signal
import time
from typing import Any

import pytest

import actors.couch_jobs as couch_jobs
from actors.couch_jobs import Halt
from tests.couch_jobs.actor_fixtures import start_tree
from tests.couch_jobs.actor_workers import Collector, Worker, collected
from tests.couch_jobs.finished_log import create_finished_log, finish_counts
from tests.kernel.probes import Gate

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TYPE = ("mp", 2)


@pytest.fixture
def tree(node, store_url):
    yield from start_tree(node, store_url, {"activity_monitor_max_jitter_msec": "100"})


N_JOBS = 1000
N_WORKERS = 4


def test_worker_processes_finish_1000_jobs_exactly_once(tree):
    node, jobs = tree["node"], tree["jobs"]
    jobs.set_type_timeout(TYPE, 60)
    create_finished_log(jobs)
    q: "queue.Queue[Any]" = queue.Queue()
    collector = node.spawn(Collector, q)
    gate = node.spawn(Gate, queue.Queue())
    workers = [node.spawn(Worker, TYPE, i, host=f"w{i}") for i in range(N_WORKERS)]
    assert len({w.os_pid for w in workers} | {os.getpid()}) == N_WORKERS + 1
    for w in workers:
        w.cast(("run", collector, N_JOBS + 1, 2.0, gate))
    for _ in workers:
        collected(q, "running", 30)
    # add while the workers already wait, 100 jobs per transaction
    for batch in range(0, N_JOBS, 100):
        with jobs.transaction() as tx:
            for k in range(batch, batch + 100):
                jobs.add(tx, TYPE, f"job-{k:04d}", {"k": k})
    # Each worker holds its first job until all do: the work is shared by every
    # process, which SQLite's lock alone would not promise (one can win it each time).
    holding = {collected(q, "holding", 60)[1] for _ in workers}
    assert holding == set(range(N_WORKERS))
    gate.call("open")
    done = {}
    for _ in workers:
        _, no, count = collected(q, "done", 90)
        done[no] = count
    assert sum(done.values()) == N_JOBS
    assert all(c > 0 for c in done.values()), done
    counts = finish_counts(jobs)
    assert len(counts) == N_JOBS and set(counts.values()) == {1}
    states = jobs.get_jobs(TYPE)
    assert len(states) == N_JOBS
    assert {state for _, _, state, _ in states} == {"finished"}


def test_killed_worker_host_job_is_rerun_by_the_activity_monitor(tree):
    node, jobs = tree["node"], tree["jobs"]
    jobs.set_type_timeout(TYPE, 1)
    couch_jobs.server.force_check_types()  # the real activity monitor for TYPE runs now
    create_finished_log(jobs)
    q: "queue.Queue[Any]" = queue.Queue()
    collector = node.spawn(Collector, q)
    victim = node.spawn(Worker, TYPE, 0, host="victim")
    jobs.add(None, TYPE, "victim-job", {"v": 1})
    t_accept = time.monotonic()
    victim.cast(("accept_and_hold", collector))
    _, _, dead_job, pid = collected(q, "held", 30)
    assert pid == victim.os_pid != os.getpid()

    rescuer = node.spawn(Worker, TYPE, 1, host="rescuer")
    rescuer.cast(("run", collector, 1, 30.0))
    collected(q, "running", 30)
    down = node.monitor(victim)
    os.kill(pid, signal.SIGKILL)
    assert down.wait(10)[1] == "killed"
    assert jobs.get_job_state(None, TYPE, "victim-job") == "running"

    # Re-enqueued after about a timeout or two, then accepted by the rescuer.
    assert collected(q, "finished", 30) == ("finished", 1, "victim-job")
    assert time.monotonic() - t_accept >= 1.0  # not before a whole timeout without updates
    assert collected(q, "done", 30) == ("done", 1, 1)
    with pytest.raises(Halt):
        jobs.update(None, dead_job)
    assert finish_counts(jobs) == {"victim-job": 1}
    job = jobs.get_job(TYPE, "victim-job")
    assert (job.state, job.data) == ("finished", {"v": 1, "by": 1})


@pytest.fixture
def slow_recheck_tree(node, store_url):
    # Blocked callers re-read the store only once a minute: a prompt accept
    # below can only come from the cross-process wake-up (the hub on SQLite,
    # LISTEN/NOTIFY on PostgreSQL).
    yield from start_tree(node, store_url, {"wakeup_recheck_msec": "60000"})


def test_accept_wakes_up_across_processes_without_recheck(slow_recheck_tree):
    node, jobs = slow_recheck_tree["node"], slow_recheck_tree["jobs"]
    assert jobs.waker.recheck_interval == 60.0
    jobs.set_type_timeout(TYPE, 60)
    q: "queue.Queue[Any]" = queue.Queue()
    collector = node.spawn(Collector, q)
    worker = node.spawn(Worker, TYPE, 0, host="sleeper")
    for round_no in range(5):
        worker.cast(("accept_async", collector, 30.0))
        collected(q, "accepting", 30)
        t0 = time.monotonic()
        jobs.add(None, TYPE, f"wake-{round_no}", {})
        # Without a wake-up the worker would wait for the 60 s re-check: half
        # of it tells the two apart even on a heavily loaded machine (a 5 s and
        # 10 s bound failed once at load 10).
        _, _, job_id, _ = collected(q, "accepted", 30)
        latency = time.monotonic() - t0
        assert job_id == f"wake-{round_no}"
        assert latency < 30.0, latency


def _hub_agents(node) -> list[Any]:
    hub = node.whereis("couch_jobs_wakeups")
    return [] if hub is None else hub.call(["agents"], timeout=10)


def test_wakeups_survive_a_hub_restart(slow_recheck_tree):
    node, jobs = slow_recheck_tree["node"], slow_recheck_tree["jobs"]
    jobs.set_type_timeout(TYPE, 60)
    q: "queue.Queue[Any]" = queue.Queue()
    collector = node.spawn(Collector, q)
    worker = node.spawn(Worker, TYPE, 0, host="sleeper")
    old_hub = node.whereis("couch_jobs_wakeups")
    assert len(_hub_agents(node)) == 2  # the host program's agent and the worker's
    down = node.monitor(old_hub)
    node.kill(old_hub)
    assert down.wait(10)[1] == "killed"
    # rest_for_one restarts the hub (and what follows it); both agents come back.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # bounded; each round is a call to the new hub
        hub = node.whereis("couch_jobs_wakeups")
        if hub is not None and hub != old_hub and len(_hub_agents(node)) == 2:
            break
    else:
        raise AssertionError("the process agents did not subscribe to the restarted hub")
    worker.cast(("accept_async", collector, 30.0))
    collected(q, "accepting", 30)
    t0 = time.monotonic()
    jobs.add(None, TYPE, "after-restart", {})
    assert collected(q, "accepted", 10)[2] == "after-restart"
    assert time.monotonic() - t0 < 5.0
