"""The seed's 22 ``t_*`` scheduler cases, run against `SchedulerState`.

The seed sets up an ets table, mocks the job supervisor (``start_child``
returns a pid) and calls ``reschedule(mock_state(...))``.  Here the table is
loaded into a `SchedulerState`, and `apply` plays the mocked supervisor: it
answers every `StartJob` effect with a started process.
"""

from __future__ import annotations

import pytest

from actors.replicator.policy import DEFAULT_MAX_CHURN, DEFAULT_MAX_HISTORY, DEFAULT_MAX_JOBS, pending_jobs
from actors.replicator.records import Job, Rep
from actors.replicator.scheduler_state import SchedulerState, StartJob, StopJob
from actors.replicator.settings import Settings
from actors.stats import Stats

pytestmark = pytest.mark.timeout(30)

NOW = 1_700_000_000.0


def crashed(when=0):
    return (("crashed", "some_reason"), when)


def started(when=0):
    return ("started", when)


def stopped(when=0):
    return ("stopped", when)


def added():
    return ("added", 0)


def mock_pid(job_id):
    return f"<0.999.{job_id}>"


def continuous(i):
    return Job(id=i, rep=Rep(id=i, options={"continuous": True}), history=(stopped(i + 1), started(i), added()))


def continuous_running(i):
    return Job(id=i, rep=Rep(id=i, options={"continuous": True}), history=(started(i), added()), pid=mock_pid(i))


def oneshot(i):
    return Job(id=i, rep=Rep(id=i, options={}), history=(stopped(i + 1), started(i), added()))


def oneshot_running(i):
    return Job(id=i, rep=Rep(id=i, options={}), history=(started(i), added()), pid=mock_pid(i))


class Harness:
    """A table plus the mocked job supervisor of the seed's ``setup/0``."""

    def __init__(self, jobs):
        self.state = SchedulerState(Settings(), Stats())
        self.state.load_jobs(jobs, NOW)
        self.stopped_pids = []

    def reschedule(self, max_jobs, max_churn=DEFAULT_MAX_CHURN):
        self.state.settings = Settings(max_jobs=max_jobs, max_churn=max_churn, max_history=DEFAULT_MAX_HISTORY)
        self.apply(self.state.reschedule(NOW))

    def apply(self, effects):
        for effect in effects:
            if isinstance(effect, StartJob):
                self.state.job_started(effect.job_id, mock_pid(effect.job_id), NOW)
            else:
                assert isinstance(effect, StopJob)
                self.stopped_pids.append(effect.pid)

    def all_jobs(self):
        return sorted(self.state.all_jobs(), key=lambda j: j.id)

    def jobs_running(self):
        return [j.id for j in self.all_jobs() if j.pid is not None]

    def jobs_stopped(self):
        return [j.id for j in self.all_jobs() if j.pid is None]

    def run_stop_count(self):
        return len(self.jobs_running()), len(self.jobs_stopped())

    def oneshot_run_stop_count(self):
        jobs = [j for j in self.all_jobs() if not j.rep.options.get("continuous", False)]
        return sum(j.pid is not None for j in jobs), sum(j.pid is None for j in jobs)

    def pending_jobs(self, count):
        return pending_jobs(self.state.all_jobs(), count, NOW)


def test_t_pending_jobs_simple():
    job1, job2 = oneshot(1), oneshot(2)
    h = Harness([job2, job1])
    assert h.pending_jobs(0) == []
    assert h.pending_jobs(1) == [job1]
    assert h.pending_jobs(2) == [job1, job2]
    assert h.pending_jobs(3) == [job1, job2]


def test_t_pending_jobs_skip_crashed():
    job = oneshot(1)
    job1 = Job(id=1, rep=job.rep, history=(crashed(NOW), started(NOW)) + job.history)
    job2, job3 = oneshot(2), oneshot(3)
    h = Harness([job2, job1, job3])
    assert h.pending_jobs(1) == [job2]
    assert h.pending_jobs(2) == [job2, job3]
    assert h.pending_jobs(3) == [job2, job3]


def test_t_one_job_starts():
    h = Harness([oneshot(1)])
    assert h.run_stop_count() == (0, 1)
    h.reschedule(DEFAULT_MAX_JOBS)
    assert h.run_stop_count() == (1, 0)


def test_t_no_jobs_start_if_max_is_0():
    h = Harness([oneshot(1)])
    h.reschedule(0)
    assert h.run_stop_count() == (0, 1)


def test_t_one_job_starts_if_max_is_1():
    h = Harness([oneshot(1), oneshot(2)])
    h.reschedule(1)
    assert h.run_stop_count() == (1, 1)


def test_t_max_churn_does_not_throttle_initial_start():
    h = Harness([oneshot(1), oneshot(2)])
    h.reschedule(DEFAULT_MAX_JOBS, 0)
    assert h.run_stop_count() == (2, 0)


@pytest.mark.parametrize("running", [oneshot_running, continuous_running], ids=["oneshot", "continuous"])
def test_t_excess_only_jobs(running):
    """The seed's t_excess_oneshot_only_jobs and t_excess_continuous_only_jobs."""
    h = Harness([running(1), running(2)])
    assert h.run_stop_count() == (2, 0)
    h.reschedule(1)
    assert h.run_stop_count() == (1, 1)
    h.reschedule(0)
    assert h.run_stop_count() == (0, 2)


def test_t_excess_prefer_continuous_first():
    h = Harness([continuous_running(1), oneshot_running(2), continuous_running(3)])
    assert h.run_stop_count() == (3, 0)
    assert h.oneshot_run_stop_count() == (1, 0)
    h.reschedule(2)
    assert h.run_stop_count() == (2, 1)
    assert h.oneshot_run_stop_count() == (1, 0)
    h.reschedule(1)
    assert h.oneshot_run_stop_count() == (1, 0)
    h.reschedule(0)
    assert h.oneshot_run_stop_count() == (0, 1)


def test_t_stop_oldest_first():
    h = Harness([continuous_running(7), continuous_running(4), continuous_running(5)])
    h.reschedule(2)
    assert h.run_stop_count() == (2, 1)
    assert h.jobs_stopped() == [4]
    h.reschedule(1)
    assert h.jobs_running() == [7]


def test_t_start_oldest_first():
    h = Harness([continuous(7), continuous(2), continuous(5)])
    h.reschedule(1)
    assert h.run_stop_count() == (1, 2)
    assert h.jobs_running() == [2]
    h.reschedule(2)
    assert h.jobs_stopped() == [7]


def test_t_dont_stop_if_nothing_pending():
    h = Harness([continuous_running(1), continuous_running(2)])
    h.reschedule(2)
    assert h.run_stop_count() == (2, 0)


def test_t_max_churn_limits_number_of_rotated_jobs():
    h = Harness([continuous(1), continuous_running(2), continuous(3), continuous_running(4)])
    h.reschedule(2, 1)
    assert h.jobs_stopped() == [2, 3]


def test_t_if_pending_less_than_running_start_all_pending():
    h = Harness([continuous(1), continuous_running(2), continuous(3), continuous_running(4), continuous_running(5)])
    h.reschedule(3)
    assert h.jobs_running() == [1, 2, 5]


def test_t_running_less_than_pending_swap_all_running():
    h = Harness([continuous(1), continuous(2), continuous(3), continuous_running(4), continuous_running(5)])
    h.reschedule(2)
    assert h.jobs_stopped() == [3, 4, 5]


def test_t_oneshot_dont_get_rotated():
    h = Harness([oneshot_running(1), continuous(2)])
    h.reschedule(1)
    assert h.jobs_running() == [1]


def test_t_rotate_continuous_only_if_mixed():
    h = Harness([continuous(1), oneshot_running(2), continuous_running(3)])
    h.reschedule(2)
    assert h.jobs_running() == [1, 2]


def test_t_oneshot_dont_get_starting_priority():
    h = Harness([continuous(1), oneshot(2), continuous_running(3)])
    h.reschedule(1)
    assert h.jobs_running() == [1]


def test_t_oneshot_will_hog_the_scheduler():
    # One-shot jobs can starve others once they hold every slot.
    h = Harness([oneshot_running(1), oneshot_running(2), oneshot(3), continuous(4)])
    h.reschedule(2)
    assert h.jobs_running() == [1, 2]


def test_t_if_excess_is_trimmed_rotation_doesnt_happen():
    h = Harness([continuous(1), continuous_running(2), continuous_running(3)])
    h.reschedule(1)
    assert h.jobs_running() == [3]


def test_t_if_transient_job_crashes_it_gets_removed():
    pid = mock_pid(1)
    job = Job(id="job1", rep=Rep(id="job1", db_name=None, options={"continuous": True}), history=(added(),), pid=pid)
    state = SchedulerState(Settings(max_history=3), Stats())
    state.load_jobs([job])
    assert state.total_jobs() == 1
    assert state.job_exited(pid, "failed", NOW) == []
    assert state.total_jobs() == 0


def test_t_if_permanent_job_crashes_it_stays_in_ets():
    pid = mock_pid(1)
    job = Job(id="job1", rep=Rep(id="job1", db_name="db1", options={"continuous": True}), history=(added(),), pid=pid)
    state = SchedulerState(Settings(max_jobs=1, max_history=3), Stats())
    state.load_jobs([job])
    assert state.total_jobs() == 1
    state.job_exited(pid, "failed", NOW)
    assert state.total_jobs() == 1
    latest = state.get_job("job1").history[0]
    assert latest[0] == ("crashed", "failed")
