"""The seed's eunit tables for the scheduler's pure functions, plus properties."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.replicator.policy import (
    DEFAULT_HEALTH_THRESHOLD,
    backoff_micros,
    backoff_until,
    consecutive_crashes,
    is_continuous,
    last_started,
    latest_crash_timestamp,
    not_recently_crashed,
    oldest_job_first,
    pending_jobs,
    reschedule,
    sort_oldest_first,
    update_history,
)
from actors.replicator.records import Job, Rep

pytestmark = pytest.mark.timeout(30)

BASE_INTERVAL = 30 * 1000 * 1000  # the seed's BACKOFF_INTERVAL_MICROS


def crashed(when: float = 0):
    return (("crashed", "some_reason"), when)


def started(when: float = 0):
    return ("started", when)


def stopped(when: float = 0):
    return ("stopped", when)


def added():
    return ("added", 0)


def _testjob(history) -> Job:
    return Job(id=None, rep=Rep(id="r"), history=tuple(history))


@pytest.mark.parametrize(
    "r, n",
    [(1, 1), (2, 2), (4, 3), (8, 4), (16, 5), (32, 6), (64, 7), (128, 8), (256, 9), (512, 10), (1024, 11), (1024, 12)],
)
def test_backoff_micros_test_(r, n):
    assert backoff_micros(n) == r * BASE_INTERVAL


def test_backoff_micros_zero_is_zero():
    assert backoff_micros(0) == 0


def test_backoff_micros_parameters_are_the_seed_constants_by_default():
    assert backoff_micros(3, interval_micros=1000, max_exponent=1) == 2000
    assert backoff_micros(12, interval_micros=BASE_INTERVAL, max_exponent=10) == backoff_micros(12)


@pytest.mark.parametrize(
    "r, h",
    [
        (0, []),
        (0, [added()]),
        (0, [stopped()]),
        (0, [crashed()]),
        (1, [crashed(), added()]),
        (1, [crashed(), crashed()]),
        (1, [crashed(), stopped()]),
        (3, [crashed(), crashed(), crashed(), added()]),
        (2, [crashed(), crashed(), stopped()]),
        (1, [crashed(), started(), added()]),
        (2, [crashed(3), started(2), crashed(1), started(0)]),
        (0, [stopped(3), started(2), crashed(1), started(0)]),
        (1, [crashed(3), started(2), stopped(1), started(0)]),
        (0, [crashed(999), started(0)]),
        (1, [crashed(999), started(998), crashed(997), started(0)]),
    ],
)
def test_consecutive_crashes_test_(r, h):
    assert consecutive_crashes(h, DEFAULT_HEALTH_THRESHOLD) == r


@pytest.mark.parametrize("r, h, t", [(0, [crashed(11), started(0)], 10), (1, [crashed(10), started(0)], 10)])
def test_consecutive_crashes_non_default_threshold_test_(r, h, t):
    assert consecutive_crashes(h, t) == r


@pytest.mark.parametrize(
    "r, h",
    [
        (0, [added()]),
        (1, [crashed(1)]),
        (3, [crashed(3), started(2), crashed(1), started(0)]),
        (1, [started(3), stopped(2), crashed(1), started(0)]),
    ],
)
def test_latest_crash_timestamp_test_(r, h):
    assert latest_crash_timestamp(h) == r


@pytest.mark.parametrize(
    "r, h",
    [
        (0, [added()]),
        (0, [crashed(1)]),
        (1, [started(1)]),
        (1, [added(), started(1)]),
        (2, [started(2), started(1)]),
        (2, [crashed(3), started(2), started(1)]),
    ],
)
def test_last_started_test_(r, h):
    assert last_started(_testjob(h)) == r


def test_oldest_job_first_test():
    j0 = _testjob([crashed()])
    j1 = _testjob([started(1)])
    j2 = _testjob([started(2)])

    def seed_sort(jobs):
        cmp = lambda a, b: -1 if oldest_job_first(a, b) else 1  # noqa: E731
        return sorted(jobs, key=functools.cmp_to_key(cmp))

    for sort in (seed_sort, sort_oldest_first):
        assert sort([]) == []
        assert sort([j1]) == [j1]
        assert sort([j2, j1]) == [j1, j2]
        assert sort([j2, j1, j0]) == [j0, j1, j2]


def test_update_history_trims_to_max_history():
    job = _testjob([started(i) for i in range(5, 0, -1)])
    trimmed = update_history(job, "stopped", 10, 3)
    assert trimmed.history == (stopped(10), started(5), started(4))
    with pytest.raises(ValueError, match="max_history"):
        update_history(job, "stopped", 10, 0)


def test_not_recently_crashed_waits_out_the_backoff():
    job = _testjob([crashed(100), started(99), added()])
    # one consecutive crash -> one unit of back-off
    assert not not_recently_crashed(job, 100 + 29, backoff_interval=30)
    assert not_recently_crashed(job, 100 + 30, backoff_interval=30)
    assert not_recently_crashed(job, 100.5, backoff_interval=0.5)


def test_backoff_until_says_when_a_crashing_job_may_start():
    job = _testjob([crashed(100), crashed(90), started(89), added()])
    # two consecutive crashes -> two units of back-off from the newest crash
    assert backoff_until(job, backoff_interval=30) == (2, 60.0, 160.0)
    assert backoff_until(_testjob([stopped(5), crashed(4), started(3)])) == (0, 0.0, 0.0)
    assert backoff_until(_testjob([started(5), added()])) == (0, 0.0, 0.0)


def test_pending_jobs_rejects_bad_count():
    with pytest.raises(ValueError, match="count"):
        pending_jobs([], -1, 0)


def test_pending_jobs_never_offers_running_jobs():
    old_running = Job(id=1, rep=Rep(id=1), history=(started(0),), pid="p1")
    waiting = Job(id=2, rep=Rep(id=2), history=(stopped(6), started(5)))
    assert pending_jobs([old_running, waiting], 2, now=100) == [waiting]


# -- properties -------------------------------------------------------------------

_event = st.one_of(st.just("added"), st.just("started"), st.just("stopped"), st.just(("crashed", "x")))


@st.composite
def histories(draw):
    n = draw(st.integers(min_value=0, max_value=8))
    times = sorted(draw(st.lists(st.integers(0, 2000), min_size=n, max_size=n)), reverse=True)
    return [(draw(_event), t) for t in times]


@settings(max_examples=200, deadline=None)
@given(histories(), st.integers(0, 500))
def test_consecutive_crashes_never_exceeds_crash_events(history, threshold):
    crashes = sum(1 for etype, _ in history if isinstance(etype, tuple))
    assert 0 <= consecutive_crashes(history, threshold) <= crashes


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 40))
def test_backoff_is_monotone_and_capped(n):
    assert backoff_micros(n) <= backoff_micros(n + 1) <= 1024 * BASE_INTERVAL


@settings(max_examples=200, deadline=None)
@given(histories(), st.integers(0, 3000), st.sampled_from([0.5, 1.0, 30.0]), st.integers(0, 500))
def test_backoff_until_agrees_with_not_recently_crashed(history, after, interval, threshold):
    job = Job(id=1, rep=Rep(id=1), history=tuple(history))
    now = (history[0][1] if history else 0) + after
    _, _, retry_at = backoff_until(job, threshold, interval)
    assert not_recently_crashed(job, now, threshold, interval) == (now >= retry_at)


@st.composite
def tables(draw):
    size = draw(st.integers(0, 12))
    jobs = []
    for i in range(size):
        cont = draw(st.booleans())
        running = draw(st.booleans())
        start = draw(st.integers(1, 50))
        history = (started(start), added()) if running else (stopped(start + 1), started(start), added())
        jobs.append(
            Job(id=i, rep=Rep(id=i, options={"continuous": cont}), history=history, pid=f"p{i}" if running else None)
        )
    return jobs


@settings(max_examples=300, deadline=None)
@given(tables(), st.integers(0, 10), st.integers(0, 5))
def test_reschedule_invariants(jobs, max_jobs, max_churn):
    decision = reschedule(jobs, 1000.0, max_jobs=max_jobs, max_churn=max_churn)
    by_id = {j.id: j for j in jobs}
    running = {j.id for j in jobs if j.pid is not None}
    assert len(set(decision.stop)) == len(decision.stop)
    assert len(set(decision.start)) == len(decision.start)
    assert set(decision.stop) <= running
    # a started job is pending, or one just stopped (the seed restarts it)
    assert all(i not in running or i in decision.stop for i in decision.start)
    after = (running - set(decision.stop)) | set(decision.start)
    assert len(after) <= max_jobs
    # one-shot jobs are only stopped to trim an excess
    if len(running) <= max_jobs:
        assert all(is_continuous(by_id[i]) for i in decision.stop)
    # rotation never exceeds max_churn
    if len(running) == max_jobs:
        assert len(decision.stop) <= max_churn
