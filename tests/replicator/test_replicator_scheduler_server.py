"""The scheduler actor against the seed's gen_server clauses that its state
class cannot show: catch-all requests and the reschedule timer.

Real processes: the replicator tree runs in the test process (so its timers
are this runtime's), the jobs in hosts of their own.  Waits are replies and
subscribed events, never sleeps.
"""

from __future__ import annotations

import queue
from typing import Any

import pytest

from actors.replicator import Rep
from actors.replicator import scheduler as sched
from actors.replicator.sup import start_replicator
from tests.replicator.actor_jobs import Probe, RecordingJob, make_source

pytestmark = pytest.mark.timeout(60)


def _rep(tmp_path: Any, i: int) -> Rep:
    source = str(tmp_path / f"source{i}.db")
    make_source(source, 3)
    return Rep(
        id=f"job{i}",
        source=source,
        target=str(tmp_path / f"target{i}.db"),
        db_name="_replicator",
        options={
            "continuous": True,
            "create_target": True,
            "checkpoint_interval": 100,
            "run_log": str(tmp_path / "runs.db"),
        },
    )


def _live_reschedule_timers(node: Any, scheduler: Any) -> int:
    timers = node.runtime.transport.timers.pending()
    return sum(
        1 for t in timers if t.target == scheduler and t.message == "reschedule" and not (t.cancelled or t.fired)
    )


def test_stray_calls_and_casts_leave_the_scheduler_and_its_jobs_alone(node, tmp_path):
    # Seed: handle_call(_, ...) -> {noreply, State}; handle_cast(_, ...) ->
    # {noreply, State}.  A crash would restart the scheduler empty.
    start_replicator(node, RecordingJob)
    q: queue.Queue = queue.Queue()
    sched.subscribe(node, node.spawn(Probe, q))
    scheduler = node.whereis(sched.SCHEDULER)
    sched.add_job(node, _rep(tmp_path, 1))
    for request in [("bogus",), "bogus", (), ("remove_job",), ("add_job", "not a rep"), (["x"], 1)]:
        assert scheduler.call(request, timeout=10)[0] == "error"
    for request in ["bogus", ("config", "replicator"), ("set_max_jobs", 3)]:
        scheduler.cast(request)
    # Casts are handled in order: the reply to this call comes after them.
    assert sched.reschedule(node) == "ok"
    assert node.whereis(sched.SCHEDULER) == scheduler
    assert [j["id"] for j in sched.jobs(node)] == ["job1"]
    assert sched.job_summary(node, "job1")["state"] == "running"
    sched.remove_job(node, "job1")


def test_a_stray_reschedule_message_does_not_start_a_second_timer_chain(node, tmp_path):
    # Seed: handle_info(reschedule) cancels the stored timer before it arms
    # the next one, so at most one reschedule timer is ever pending.
    node.config.set("replicator", "interval", "600000")
    start_replicator(node, RecordingJob)
    scheduler = node.whereis(sched.SCHEDULER)
    assert _live_reschedule_timers(node, scheduler) == 1
    for _ in range(3):
        scheduler.send("reschedule")
    assert sched.reschedule(node) == "ok"  # after the three messages
    assert _live_reschedule_timers(node, scheduler) == 1
    # A new interval re-arms the one timer.
    node.config.set("replicator", "interval", "500000")
    scheduler.send("reschedule")
    assert sched.reschedule(node) == "ok"
    assert _live_reschedule_timers(node, scheduler) == 1


def test_a_max_backoff_exit_stops_the_job_for_a_retry_with_lower_options(node, tmp_path):
    # Seed (scheduler_job): {'EXIT', _, {shutdown, max_backoff}} from any
    # linked process stops the job with {shutdown, max_backoff}; the
    # scheduler restarts it with rate-limit options (worker_processes 2).
    node.config.set("replicator", "interval", "100")
    node.config.set("replicator", "backoff_interval", "0.05")
    start_replicator(node, RecordingJob)
    q: queue.Queue = queue.Queue()
    sched.subscribe(node, node.spawn(Probe, q))
    r = _rep(tmp_path, 1)
    r = Rep(id=r.id, source=r.source, target=r.target, db_name=r.db_name, options={**r.options, "worker_processes": 8})
    sched.add_job(node, r)
    events = []
    for _ in range(1000):
        events.append(q.get(timeout=10))
        if events[-1][1] == "started":
            break
    node.exit(events[-1][3], ("shutdown", "max_backoff"))
    for _ in range(1000):
        event = q.get(timeout=10)
        if event[1] == "crashed":
            assert event[3] == ("shutdown", "max_backoff")
            break
    for _ in range(1000):
        if q.get(timeout=10)[1] == "started":
            break
    assert sched.rep_state(node, "job1").options["worker_processes"] == 2
    assert sched.job(node, "job1")["history"][1]["type"] == "crashed"
    sched.remove_job(node, "job1")
