"""The replicator scheduler's decisions as pure functions over `Job` records.

Ported from ``couch_replicator_scheduler`` (seed 001): crash counting,
exponential back-off, the "pending" selection and the reschedule decision
(stop excess jobs, continuous first; start pending jobs, oldest first; rotate
at most ``max_churn`` continuous jobs; one-shot jobs are never rotated out).
Time comes in as ``now`` (seconds); nothing here reads a clock or touches a
process, so the seed's eunit tables port one to one.

The reschedule decision is returned as a `Decision`: the ids to stop, then the
ids to start.  The seed carries out each step as it goes; the decision here
simulates the same steps, so applying "all stops, then all starts" reproduces
the seed's end state exactly (a job may be both stopped and started: the seed
restarts a rotated job when it is still among the oldest).

One deliberate difference: the seed's ``pending_jobs`` folds over every job,
running ones included, and ``start_job_int`` then ignores a running job, so
an old running job could waste a start slot.  Here running jobs are never
pending candidates.  None of the seed's cases depends on the difference.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .records import ADDED, STARTED, STOPPED, Job, is_crash

__all__ = [
    "DEFAULT_BACKOFF_INTERVAL",
    "DEFAULT_HEALTH_THRESHOLD",
    "DEFAULT_MAX_BACKOFF_EXPONENT",
    "DEFAULT_MAX_CHURN",
    "DEFAULT_MAX_HISTORY",
    "DEFAULT_MAX_JOBS",
    "DEFAULT_SCHEDULER_INTERVAL",
    "Decision",
    "Selector",
    "backoff_micros",
    "backoff_until",
    "consecutive_crashes",
    "is_continuous",
    "last_started",
    "latest_crash_timestamp",
    "not_recently_crashed",
    "oldest_job_first",
    "pending_jobs",
    "reschedule",
    "sort_oldest_first",
    "start_pending_jobs",
    "update_history",
]

#: Seconds; the seed's ``BACKOFF_INTERVAL_MICROS`` (30 s).
DEFAULT_BACKOFF_INTERVAL = 30.0
#: The seed's ``MAX_BACKOFF_EXPONENT``: back-off stops doubling after 2**10 units.
DEFAULT_MAX_BACKOFF_EXPONENT = 10
#: Seconds; the seed's ``DEFAULT_HEALTH_THRESHOLD_SEC``.
DEFAULT_HEALTH_THRESHOLD = 2 * 60
DEFAULT_MAX_JOBS = 500
DEFAULT_MAX_CHURN = 20
DEFAULT_MAX_HISTORY = 20
#: Milliseconds between reschedules, as in the seed.
DEFAULT_SCHEDULER_INTERVAL = 60000


# -- crash history ------------------------------------------------------------


def consecutive_crashes(history: Sequence[tuple], health_threshold: float) -> int:
    """Count crashes that each followed the previous event within ``health_threshold`` s.

    A crash shortly after any other event (``started``, ``added``, another
    crash, ``stopped``) counts; the run ends at a crash that came more than
    the threshold after its predecessor (the job was healthy before it), or at
    a ``stopped`` right after ``started`` (the job was rotated out healthy).
    """
    count = 0
    size = len(history)
    i = 0
    while i < size:
        etype, when = history[i]
        if i + 1 < size:
            prev_type, prev_when = history[i + 1]
            if is_crash(etype):
                if when - prev_when > health_threshold:
                    return count
                count += 1
                i += 1
                continue
            if etype == STOPPED and prev_type == STARTED:
                return count
        i += 1
    return count


def latest_crash_timestamp(history: Sequence[tuple]) -> float:
    """Time of the newest crash, 0 when there is none (so "now - it" is never special)."""
    for etype, when in history:
        if is_crash(etype):
            return when
    return 0


def backoff_micros(
    crash_count: int,
    interval_micros: int = int(DEFAULT_BACKOFF_INTERVAL * 1_000_000),
    max_exponent: int = DEFAULT_MAX_BACKOFF_EXPONENT,
) -> int:
    """Back-off after ``crash_count`` consecutive crashes: ``2**(n-1)`` units, capped.

    ``backoff_micros(0) == 0`` as in the seed (Erlang's ``1 bsl -1`` is 0): a
    job that never crashed is never held back.
    """
    exponent = min(crash_count - 1, max_exponent)
    if exponent < 0:
        return 0
    return (1 << exponent) * interval_micros


def last_started(job: Job) -> float:
    """Time of the newest ``started`` event, 0 when the job never started."""
    for etype, when in job.history:
        if etype == STARTED:
            return when
    return 0


def oldest_job_first(a: Job, b: Job) -> bool:
    """The seed's sort predicate: ``a`` goes before ``b`` when it started no later."""
    return last_started(a) <= last_started(b)


def sort_oldest_first(jobs: Iterable[Job]) -> list[Job]:
    """Jobs by `oldest_job_first` (stable: equal start times keep their order)."""
    return sorted(jobs, key=last_started)


def is_continuous(job: Job) -> bool:
    return bool(job.rep.options.get("continuous", False))


def update_history(job: Job, event_type: Any, when: float, max_history: int) -> Job:
    """Prepend an event and keep at most ``max_history`` of them."""
    if max_history <= 0:
        raise ValueError(f"max_history must be > 0, got {max_history!r}")
    history = ((event_type, when),) + tuple(job.history[: max_history - 1])
    return replace(job, history=history)


def not_recently_crashed(
    job: Job,
    now: float,
    health_threshold: float = DEFAULT_HEALTH_THRESHOLD,
    backoff_interval: float = DEFAULT_BACKOFF_INTERVAL,
    max_backoff_exponent: int = DEFAULT_MAX_BACKOFF_EXPONENT,
) -> bool:
    """True when the job's back-off since its latest crash has run out."""
    history = job.history
    if history:
        head = history[0][0]
        if head == STOPPED or (head == ADDED and len(history) == 1):
            return True
    crash_t = latest_crash_timestamp(history)
    count = consecutive_crashes(history, health_threshold)
    wait = backoff_micros(count, int(backoff_interval * 1_000_000), max_backoff_exponent)
    return (now - crash_t) * 1_000_000 >= wait


def backoff_until(
    job: Job,
    health_threshold: float = DEFAULT_HEALTH_THRESHOLD,
    backoff_interval: float = DEFAULT_BACKOFF_INTERVAL,
    max_backoff_exponent: int = DEFAULT_MAX_BACKOFF_EXPONENT,
) -> tuple[int, float, float]:
    """``(consecutive crashes, back-off seconds, earliest start time)`` of a job.

    The same reckoning as `not_recently_crashed`, turned into a time so an
    operator (the observer page) sees when a crashing job may run again
    instead of re-deriving the scheduler's rule: the earliest start is 0 for
    a job that is not held back.
    """
    history = job.history
    if history:
        head = history[0][0]
        if head == STOPPED or (head == ADDED and len(history) == 1):
            return 0, 0.0, 0.0
    count = consecutive_crashes(history, health_threshold)
    wait = backoff_micros(count, int(backoff_interval * 1_000_000), max_backoff_exponent) / 1_000_000
    if wait == 0:
        return count, 0.0, 0.0
    return count, wait, latest_crash_timestamp(history) + wait


# -- choosing jobs --------------------------------------------------------------


def _healthy_pending(
    jobs: Iterable[Job],
    now: float,
    health_threshold: float,
    backoff_interval: float,
    max_backoff_exponent: int,
) -> Iterable[Job]:
    for job in jobs:
        if job.pid is None and not_recently_crashed(job, now, health_threshold, backoff_interval, max_backoff_exponent):
            yield job


def pending_jobs(
    jobs: Iterable[Job],
    count: int,
    now: float,
    health_threshold: float = DEFAULT_HEALTH_THRESHOLD,
    backoff_interval: float = DEFAULT_BACKOFF_INTERVAL,
    max_backoff_exponent: int = DEFAULT_MAX_BACKOFF_EXPONENT,
) -> list[Job]:
    """Up to ``count`` oldest-started jobs that are not running and not backing off.

    One pass with a bounded heap, like the seed's ``gb_sets`` fold, so the
    cost is O(n log count) and memory O(count).
    """
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be a non-negative integer, got {count!r}")
    if count == 0:
        return []
    healthy = _healthy_pending(jobs, now, health_threshold, backoff_interval, max_backoff_exponent)
    return heapq.nsmallest(count, healthy, key=last_started)


class Selector(Protocol):
    """How the decision orders candidates; the default is the seed's oldest first.

    `actors.replicator.fair_share.FairShare` implements it to order by the
    owner database's accumulated usage instead.
    """

    def select_to_start(self, candidates: list[Job], running: list[Job], count: int) -> list[Job]:
        """Pick up to ``count`` of the (healthy, not running) candidates to start."""
        ...

    def select_to_stop(self, candidates: list[Job], running: list[Job], count: int) -> list[Job]:
        """Pick up to ``count`` of the running candidates to stop."""
        ...


@dataclass
class Decision:
    """What a reschedule decided: stop these (in order), then start these."""

    stop: list = field(default_factory=list)
    start: list = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.stop or self.start)


class _Simulation:
    """The seed's reschedule steps replayed on a private view of the table."""

    def __init__(
        self,
        jobs: Iterable[Job],
        now: float,
        health_threshold: float,
        backoff_interval: float,
        max_backoff_exponent: int,
        selector: Selector | None,
    ) -> None:
        self.table = jobs if isinstance(jobs, list) else list(jobs)
        self.now = now
        self.health = (health_threshold, backoff_interval, max_backoff_exponent)
        self.selector = selector
        self.running = {job.id: job for job in self.table if job.pid is not None}
        self.stopped: dict[Any, Job] = {}
        self.decision = Decision()

    def stop_jobs(self, count: int, continuous: bool) -> int:
        if count <= 0:
            return 0
        candidates = [j for j in self.running.values() if is_continuous(j) == continuous]
        if self.selector is None:
            chosen = sort_oldest_first(candidates)[:count]
        else:
            chosen = self.selector.select_to_stop(candidates, list(self.running.values()), count)[:count]
        for job in chosen:
            del self.running[job.id]
            self.stopped[job.id] = replace(
                job, pid=None, monitor=None, history=((STOPPED, self.now),) + tuple(job.history)
            )
            self.decision.stop.append(job.id)
        return len(chosen)

    def _candidates(self) -> Iterable[Job]:
        for job in self.table:
            if job.pid is None:
                yield job
        yield from self.stopped.values()

    def start_jobs(self, count: int) -> int:
        if count <= 0:
            return 0
        if self.selector is None:
            chosen = pending_jobs(self._candidates(), count, self.now, *self.health)
        else:
            healthy = list(_healthy_pending(self._candidates(), self.now, *self.health))
            chosen = self.selector.select_to_start(healthy, list(self.running.values()), count)[:count]
        for job in chosen:
            self.running[job.id] = job
            self.decision.start.append(job.id)
        return len(chosen)


def reschedule(
    jobs: Iterable[Job],
    now: float,
    *,
    max_jobs: int,
    max_churn: int,
    health_threshold: float = DEFAULT_HEALTH_THRESHOLD,
    backoff_interval: float = DEFAULT_BACKOFF_INTERVAL,
    max_backoff_exponent: int = DEFAULT_MAX_BACKOFF_EXPONENT,
    selector: Selector | None = None,
) -> Decision:
    """The seed's ``reschedule/1``: stop excess, start pending, rotate.

    The running and pending counts are taken once, before any step, exactly
    as the seed does; that is why trimming excess jobs never also rotates
    (``t_if_excess_is_trimmed_rotation_doesnt_happen``).
    """
    sim = _Simulation(jobs, now, health_threshold, backoff_interval, max_backoff_exponent, selector)
    running = len(sim.running)
    pending = len(sim.table) - running
    # stop_excess_jobs: continuous first, then one-shot.
    stop_count = running - max_jobs
    if stop_count > 0:
        stopped = sim.stop_jobs(stop_count, True)
        if stop_count - stopped > 0:
            sim.stop_jobs(stop_count - stopped, False)
    # start_pending_jobs
    if running < max_jobs and pending > 0:
        sim.start_jobs(max_jobs - running)
    # rotate_jobs: only continuous jobs are rotated out.
    if running == max_jobs and pending > 0:
        rotate = min(pending, running, max_churn)
        stopped = sim.stop_jobs(rotate, True)
        sim.start_jobs(stopped)
    return sim.decision


def start_pending_jobs(
    jobs: Iterable[Job],
    now: float,
    *,
    max_jobs: int,
    health_threshold: float = DEFAULT_HEALTH_THRESHOLD,
    backoff_interval: float = DEFAULT_BACKOFF_INTERVAL,
    max_backoff_exponent: int = DEFAULT_MAX_BACKOFF_EXPONENT,
    selector: Selector | None = None,
) -> list:
    """Ids to start to fill free slots (the seed's ``start_pending_jobs/1``)."""
    sim = _Simulation(jobs, now, health_threshold, backoff_interval, max_backoff_exponent, selector)
    running = len(sim.running)
    if running < max_jobs and len(sim.table) - running > 0:
        sim.start_jobs(max_jobs - running)
    return sim.decision.start
