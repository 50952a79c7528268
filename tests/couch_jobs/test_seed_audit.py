"""Seed cases as the seed wrote them, where `test_couch_jobs` had to adapt.

The seed's ``accept_max_schedtime`` calls ``accept(T, #{max_sched_time =>
1000})`` with no timeout and expects ``{error, not_found}``: the seed's
``wait_pending`` stops waiting when ``max_sched_time`` (epoch seconds) comes,
and no sooner than 100 ms from now.  These cases hold our `accept` to that.
"""

from __future__ import annotations

import math
import queue
import threading

import pytest

import actors.couch_jobs as couch_jobs
from actors.clock import FakeClock
from actors.couch_jobs import CouchJobs, NotFound
from actors.couch_jobs.model import UNDEFINED_MAX_SCHEDULED_TIME
from actors.couch_jobs.pending import MIN_ACCEPT_WAIT, accept_wait_limit
from tests.couch_jobs.seed_cases import TX

pytestmark = pytest.mark.timeout(30)


def test_accept_max_schedtime_as_the_seed_writes_it(ctx):
    """``accept_max_schedtime`` verbatim: no timeout passed anywhere."""
    t, j1, j2 = ctx["t1"], ctx["j1"], ctx["j2"]
    assert couch_jobs.add(TX, t, j1, {}, 5000) is None
    assert couch_jobs.add(TX, t, j2, {}, 3000) is None
    with pytest.raises(NotFound):
        couch_jobs.accept(t, max_sched_time=1000)
    assert couch_jobs.accept(t, max_sched_time=3000)[0].id == j2
    assert couch_jobs.accept(t, max_sched_time=9000)[0].id == j1


def test_accept_wait_limit_is_the_seeds_wait_pending():
    now = 1_700_000_000.0
    # a time already past: the 100 ms minimum
    assert accept_wait_limit(1000, False, now) == MIN_ACCEPT_WAIT
    assert accept_wait_limit(int(now), False, now) == MIN_ACCEPT_WAIT
    # a time to come: wait until then
    assert accept_wait_limit(int(now) + 30, False, now) == 30.0
    # the default and no_schedule: no limit (limit_timeout's infinity)
    assert accept_wait_limit(UNDEFINED_MAX_SCHEDULED_TIME, False, now) == math.inf
    assert accept_wait_limit(0, True, now) == math.inf
    # 2^32 ms or more away is infinity too, as in the seed
    assert accept_wait_limit(int(now) + 5_000_000, False, now) == math.inf


def _accept_in_thread(jobs: CouchJobs, t, **kw) -> tuple[threading.Thread, queue.Queue]:
    results: queue.Queue = queue.Queue()

    def run() -> None:
        try:
            results.put(jobs.accept(t, **kw))
        except Exception as exc:  # reported to the test thread
            results.put(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, results


@pytest.fixture
def wall_jobs(tmp_path):
    """An instance whose wall clock stands at 1000 s since the epoch."""
    jobs = CouchJobs(str(tmp_path / "jobs.db"), wall_clock=FakeClock(1000.0))
    jobs.set_type_timeout("t", 5)
    try:
        yield jobs
    finally:
        jobs.close()


def test_accept_with_a_future_max_sched_time_waits_for_a_due_job(wall_jobs):
    thread, results = _accept_in_thread(wall_jobs, "t", max_sched_time=2000)
    # past the 100 ms minimum it is still waiting: 2000 is 1000 s away
    with pytest.raises(queue.Empty):
        results.get(timeout=3 * MIN_ACCEPT_WAIT)
    wall_jobs.add(None, "t", "late", {}, 3000)  # not due by 2000: keeps waiting
    wall_jobs.add(None, "t", "due", {}, 1500)
    job, data = results.get(timeout=10)
    assert (job.id, data) == ("due", {})
    thread.join(10)


def test_accept_with_a_past_max_sched_time_gives_up_even_while_jobs_arrive(wall_jobs):
    wall_jobs.add(None, "t", "late", {}, 5000)
    thread, results = _accept_in_thread(wall_jobs, "t", max_sched_time=500)
    got = results.get(timeout=10)
    assert isinstance(got, NotFound) and "max_sched_time 500" in str(got)
    thread.join(10)
    assert wall_jobs.get_job_state(None, "t", "late") == "pending"


def test_accept_no_schedule_still_blocks_until_a_job_comes(wall_jobs):
    thread, results = _accept_in_thread(wall_jobs, "t", no_schedule=True)
    with pytest.raises(queue.Empty):
        results.get(timeout=3 * MIN_ACCEPT_WAIT)
    wall_jobs.add(None, "t", "now", {})
    job, _ = results.get(timeout=10)
    assert job.id == "now"
    thread.join(10)


def test_resubmit_without_a_time_schedules_at_the_undefined_max_time(ctx):
    """The seed's ``resubmit/2`` is ``resubmit(Tx, Job, ?UNDEFINED_MAX_SCHEDULED_TIME)``:
    the job comes back due only to accepts that take any time (not to
    ``no_schedule`` ones); passing ``None`` (the seed's ``undefined``) keeps
    the job's time."""
    t, j1, j2 = ctx["t1"], ctx["j1"], ctx["j2"]
    couch_jobs.add(TX, t, j1, {}, 5)
    job, _ = couch_jobs.accept(t, timeout=5)
    assert couch_jobs.resubmit(TX, job).stime == UNDEFINED_MAX_SCHEDULED_TIME
    couch_jobs.finish(TX, job)
    got = couch_jobs.get_job(t, j1)
    assert (got.state, got.stime) == ("pending", UNDEFINED_MAX_SCHEDULED_TIME)
    with pytest.raises(NotFound):
        couch_jobs.accept(t, no_schedule=True, timeout=0)
    job, _ = couch_jobs.accept(t, timeout=0)
    assert job.id == j1
    # resubmit(tx, job, None): the seed's `undefined`, the current time stays
    couch_jobs.add(TX, t, j2, {}, 7)
    job2, _ = couch_jobs.accept(t, max_sched_time=7, timeout=0)
    assert couch_jobs.resubmit(TX, job2, None).stime == 7
    couch_jobs.finish(TX, job2)
    assert couch_jobs.get_job(t, j2).stime == 7
    # a finished job resubmitted without a time goes to the back as well
    couch_jobs.finish(TX, job)
    assert couch_jobs.resubmit(TX, job).state == "pending"
    assert couch_jobs.get_job(t, j1).stime == UNDEFINED_MAX_SCHEDULED_TIME


def test_subscribe_to_a_finished_job_needs_no_notifier(ctx):
    """The seed's ``subscribe/3`` returns ``{ok, finished, Data}`` straight from
    the job read, before it asks for the type's notifier: a finished job of a
    type whose timeout was cleared still answers; a pending one is
    ``not_found`` (no notifier serves the type)."""
    t, j1, j2 = ctx["t1"], ctx["j1"], ctx["j2"]
    couch_jobs.add(TX, t, j1, {"n": 1})
    couch_jobs.add(TX, t, j2, {"n": 2})
    job, _ = couch_jobs.accept(t, timeout=5)
    couch_jobs.finish(TX, job, {"done": job.id})
    couch_jobs.clear_type_timeout(t)
    done, waiting = (j1, j2) if job.id == j1 else (j2, j1)
    assert couch_jobs.subscribe(t, done) == (None, "finished", {"done": done})
    with pytest.raises(NotFound):
        couch_jobs.subscribe(t, waiting)
    with pytest.raises(NotFound):
        couch_jobs.subscribe(t, "missing")
