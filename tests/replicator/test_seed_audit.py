"""The seed's ``t_*`` reschedule cases once more, on the pure `policy.reschedule`.

`test_replicator_scheduler` runs them through `SchedulerState`; here the
table is a plain list of `Job` records and a case applies each `Decision`
itself (all stops, then all starts, as `policy` documents), so the pure
function is held to the seed's end states on its own.  The two crash cases
(``t_if_*_job_crashes_*``) are the scheduler's ``handle_info``, not the
policy's, and stay in `test_replicator_scheduler`.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from actors.replicator import Job, Rep, is_continuous, pending_jobs, reschedule
from actors.replicator.policy import DEFAULT_MAX_CHURN, DEFAULT_MAX_JOBS

pytestmark = pytest.mark.timeout(30)

NOW = 1_700_000_000.0


def started(when):
    return ("started", when)


def stopped(when):
    return ("stopped", when)


def added():
    return ("added", 0)


def continuous(i):
    return Job(id=i, rep=Rep(id=i, options={"continuous": True}), history=(stopped(i + 1), started(i), added()))


def continuous_running(i):
    return Job(id=i, rep=Rep(id=i, options={"continuous": True}), history=(started(i), added()), pid=f"<0.999.{i}>")


def oneshot(i):
    return Job(id=i, rep=Rep(id=i, options={}), history=(stopped(i + 1), started(i), added()))


def oneshot_running(i):
    return Job(id=i, rep=Rep(id=i, options={}), history=(started(i), added()), pid=f"<0.999.{i}>")


class Table:
    """The seed's ets table, and its ``reschedule(mock_state(...))``."""

    def __init__(self, jobs):
        self.jobs = {job.id: job for job in jobs}

    def reschedule(self, max_jobs, max_churn=DEFAULT_MAX_CHURN):
        decision = reschedule(list(self.jobs.values()), NOW, max_jobs=max_jobs, max_churn=max_churn)
        for job_id in decision.stop:
            job = self.jobs[job_id]
            assert job.pid is not None, f"stopping {job_id}, which is not running"
            self.jobs[job_id] = replace(job, pid=None, history=(stopped(NOW),) + job.history)
        for job_id in decision.start:
            job = self.jobs[job_id]
            assert job.pid is None, f"starting {job_id}, which is running"
            self.jobs[job_id] = replace(job, pid=f"<0.1.{job_id}>", history=(started(NOW),) + job.history)

    def jobs_running(self):
        return sorted(i for i, j in self.jobs.items() if j.pid is not None)

    def jobs_stopped(self):
        return sorted(i for i, j in self.jobs.items() if j.pid is None)

    def run_stop_count(self):
        return len(self.jobs_running()), len(self.jobs_stopped())

    def oneshot_run_stop_count(self):
        oneshots = [j for j in self.jobs.values() if not is_continuous(j)]
        return sum(j.pid is not None for j in oneshots), sum(j.pid is None for j in oneshots)


def test_t_pending_jobs_simple():
    job1, job2 = oneshot(1), oneshot(2)
    jobs = [job2, job1]
    assert pending_jobs(jobs, 0, NOW) == []
    assert pending_jobs(jobs, 1, NOW) == [job1]
    assert pending_jobs(jobs, 2, NOW) == [job1, job2]
    assert pending_jobs(jobs, 3, NOW) == [job1, job2]


def test_t_pending_jobs_skip_crashed():
    job = oneshot(1)
    ts = NOW  # the seed's os:timestamp(): a crash just now
    job1 = replace(job, history=((("crashed", "some_reason"), ts), started(ts)) + job.history)
    job2, job3 = oneshot(2), oneshot(3)
    jobs = [job2, job1, job3]
    assert pending_jobs(jobs, 1, NOW) == [job2]
    assert pending_jobs(jobs, 2, NOW) == [job2, job3]
    assert pending_jobs(jobs, 3, NOW) == [job2, job3]


def test_t_one_job_starts():
    t = Table([oneshot(1)])
    assert t.run_stop_count() == (0, 1)
    t.reschedule(DEFAULT_MAX_JOBS)
    assert t.run_stop_count() == (1, 0)


def test_t_no_jobs_start_if_max_is_0():
    t = Table([oneshot(1)])
    t.reschedule(0)
    assert t.run_stop_count() == (0, 1)


def test_t_one_job_starts_if_max_is_1():
    t = Table([oneshot(1), oneshot(2)])
    t.reschedule(1)
    assert t.run_stop_count() == (1, 1)


def test_t_max_churn_does_not_throttle_initial_start():
    t = Table([oneshot(1), oneshot(2)])
    t.reschedule(DEFAULT_MAX_JOBS, 0)
    assert t.run_stop_count() == (2, 0)


def test_t_excess_oneshot_only_jobs():
    t = Table([oneshot_running(1), oneshot_running(2)])
    assert t.run_stop_count() == (2, 0)
    t.reschedule(1)
    assert t.run_stop_count() == (1, 1)
    t.reschedule(0)
    assert t.run_stop_count() == (0, 2)


def test_t_excess_continuous_only_jobs():
    t = Table([continuous_running(1), continuous_running(2)])
    assert t.run_stop_count() == (2, 0)
    t.reschedule(1)
    assert t.run_stop_count() == (1, 1)
    t.reschedule(0)
    assert t.run_stop_count() == (0, 2)


def test_t_excess_prefer_continuous_first():
    t = Table([continuous_running(1), oneshot_running(2), continuous_running(3)])
    assert t.run_stop_count() == (3, 0)
    assert t.oneshot_run_stop_count() == (1, 0)
    t.reschedule(2)
    assert t.run_stop_count() == (2, 1)
    assert t.oneshot_run_stop_count() == (1, 0)
    t.reschedule(1)
    assert t.oneshot_run_stop_count() == (1, 0)
    t.reschedule(0)
    assert t.oneshot_run_stop_count() == (0, 1)


def test_t_stop_oldest_first():
    t = Table([continuous_running(7), continuous_running(4), continuous_running(5)])
    t.reschedule(2)
    assert t.run_stop_count() == (2, 1)
    assert t.jobs_stopped() == [4]
    t.reschedule(1)
    assert t.jobs_running() == [7]


def test_t_start_oldest_first():
    t = Table([continuous(7), continuous(2), continuous(5)])
    t.reschedule(1)
    assert t.run_stop_count() == (1, 2)
    assert t.jobs_running() == [2]
    t.reschedule(2)
    assert t.jobs_stopped() == [7]


def test_t_dont_stop_if_nothing_pending():
    t = Table([continuous_running(1), continuous_running(2)])
    t.reschedule(2)
    assert t.run_stop_count() == (2, 0)


def test_t_max_churn_limits_number_of_rotated_jobs():
    t = Table([continuous(1), continuous_running(2), continuous(3), continuous_running(4)])
    t.reschedule(2, 1)
    assert t.jobs_stopped() == [2, 3]


def test_t_if_pending_less_than_running_start_all_pending():
    t = Table([continuous(1), continuous_running(2), continuous(3), continuous_running(4), continuous_running(5)])
    t.reschedule(3)
    assert t.jobs_running() == [1, 2, 5]


def test_t_running_less_than_pending_swap_all_running():
    t = Table([continuous(1), continuous(2), continuous(3), continuous_running(4), continuous_running(5)])
    t.reschedule(2)
    assert t.jobs_stopped() == [3, 4, 5]


def test_t_oneshot_dont_get_rotated():
    t = Table([oneshot_running(1), continuous(2)])
    t.reschedule(1)
    assert t.jobs_running() == [1]


def test_t_rotate_continuous_only_if_mixed():
    t = Table([continuous(1), oneshot_running(2), continuous_running(3)])
    t.reschedule(2)
    assert t.jobs_running() == [1, 2]


def test_t_oneshot_dont_get_starting_priority():
    t = Table([continuous(1), oneshot(2), continuous_running(3)])
    t.reschedule(1)
    assert t.jobs_running() == [1]


def test_t_oneshot_will_hog_the_scheduler():
    t = Table([oneshot_running(1), oneshot_running(2), oneshot(3), continuous(4)])
    t.reschedule(2)
    assert t.jobs_running() == [1, 2]


def test_t_if_excess_is_trimmed_rotation_doesnt_happen():
    t = Table([continuous(1), continuous_running(2), continuous_running(3)])
    t.reschedule(1)
    assert t.jobs_running() == [3]
