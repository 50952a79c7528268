"""``couch_replicator_scheduler``'s gen_server logic as a plain class.

`SchedulerState` owns the job table and the settings.  Every mutating method
takes its input (a job description, an exit reason, ``now`` in wall-clock
seconds) and returns a list of effects for the actor layer to carry out, in
order:

* `StartJob` (``job_id``, ``rep``): start the job under the job supervisor,
  monitor it, then report back with `job_started` (or `job_start_failed`);
* `StopJob` (``job_id``, ``pid``, ``monitor``): demonitor and terminate the
  child with reason ``shutdown`` (the job takes a final checkpoint).

The state never blocks and never touches a process, so the seed's scheduler
cases run against it directly.  Reads (`jobs`, `job`, `rep_state`,
`job_summary`, `find_jobs_by_*`) work on immutable `Job` records held in a
dict that is only ever rebound per key (`job_index`), so another thread may
call them while the scheduler works (the seed's ets table with
``read_concurrency``); the JSON views of a job are `job_views`'.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from actors import stats as stats_module

from . import policy
from .fair_share import FairShare
from .job_index import CATEGORIES, JobIndex
from .job_views import job_id_text, job_to_json, rep_error_to_text, summarize_job
from .records import (
    ADDED,
    MAX_BACKOFF,
    STARTED,
    STARTING,
    STOPPED,
    Job,
    Rep,
    crashed,
)
from .settings import SECTION, SHARES_SECTION, InvalidSetting, Settings

__all__ = [
    "Effect",
    "StartJob",
    "StopJob",
    "SchedulerState",
    "rep_error_to_text",
    "RATE_LIMIT_OPTIONS",
    "job_id_text",
    "job_to_json",
    "summarize_job",
]

log = logging.getLogger("actors.replicator.scheduler")

#: Options lowered on a restart after a ``max_backoff`` crash (the seed's
#: ``maybe_optimize_job_for_rate_limiting``): only ever lowered, never raised.
RATE_LIMIT_OPTIONS = (
    ("checkpoint_interval", 5000),
    ("worker_processes", 2),
    ("worker_batch_size", 100),
    ("http_connections", 5),
)


@dataclass(frozen=True)
class StartJob:
    job_id: Any
    rep: Rep


@dataclass(frozen=True)
class StopJob:
    job_id: Any
    pid: Any
    monitor: Any = None


Effect = StartJob | StopJob


def _optimize_for_rate_limiting(job: Job) -> Job:
    if not job.history or job.history[0][0] != crashed(MAX_BACKOFF):
        return job
    options = dict(job.rep.options)
    changed = False
    for key, value in RATE_LIMIT_OPTIONS:
        current = options.get(key)
        if isinstance(current, int) and not isinstance(current, bool) and current > value:
            log.warning("replication %r: setting %s = %s due to rate limiting", job.id, key, value)
            options[key] = value
            changed = True
    if not changed:
        return job
    return replace(job, rep=replace(job.rep, options=options))


class SchedulerState(JobIndex):
    """The job table, settings and statistics of one replicator scheduler.

    The table's bookkeeping and plain reads are `JobIndex`'s; this adds the
    settings and every decision that changes the table.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        stats: Any = None,
        *,
        shares: dict[Any, Any] | None = None,
        node: str = "nonode@nohost",
    ) -> None:
        if stats is None:
            stats = stats_module.current()
        self.settings = settings or Settings()
        self.stats = stats
        self.node = node
        super().__init__()
        self.fair_share = FairShare(
            shares, interval=self.settings.interval / 1000.0, usage_coeff=self.settings.usage_coeff
        )

    # -- construction helpers -------------------------------------------------

    @classmethod
    def from_config(cls, config: Any, stats: Any = None, **kwargs: Any) -> "SchedulerState":
        """Settings from ``[replicator]`` and shares from ``[replicator.shares]``."""
        shares = config.section(SHARES_SECTION)
        return cls(Settings.from_config(config), stats, shares=shares, **kwargs)

    def _history(self, job: Job, event: Any, now: float) -> Job:
        return policy.update_history(job, event, now, self.settings.max_history)

    def _policy_kwargs(self) -> dict[str, Any]:
        s = self.settings
        return {
            "health_threshold": s.health_threshold,
            "backoff_interval": s.backoff_interval,
            "max_backoff_exponent": s.max_backoff_exponent,
            "selector": self.fair_share if s.fair_share else None,
        }

    # -- state transitions (seed: update_state_*) ------------------------------

    def _stop_job(self, job: Job, now: float) -> list[Effect]:
        if job.pid is None:
            return []
        if self.settings.fair_share:
            self.fair_share.charge_job(job, now)
        stopped = self._history(replace(job, pid=None, monitor=None), STOPPED, now)
        self._put(stopped, now)
        self.stats.increment("couch_replicator.jobs.stops")
        log.info("job %r stopped as %r", job.id, job.pid)
        if job.pid is STARTING:
            return []
        return [StopJob(job.id, job.pid, job.monitor)]

    def _start_job(self, job: Job, now: float) -> list[Effect]:
        if job.pid is not None:
            return []
        job = _optimize_for_rate_limiting(job)
        self._put(replace(job, pid=STARTING, monitor=None), now)
        return [StartJob(job.id, job.rep)]

    def _crash(self, job: Job, reason: Any, now: float) -> None:
        if job.pid is not None and self.settings.fair_share:
            self.fair_share.charge_job(job, now)
        crashed_job = self._history(replace(job, pid=None, monitor=None), crashed(reason), now)
        self._put(crashed_job, now)
        self.stats.increment("couch_replicator.jobs.crashes")

    def _remove(self, job: Job, now: float) -> list[Effect]:
        effects = self._stop_job(job, now)
        self._delete(job)
        self.stats.increment("couch_replicator.jobs.removes")
        self.stats.update_gauge("couch_replicator.jobs.total", len(self._jobs))
        self.update_running_jobs_stats(now)
        return effects

    # -- API: mutations -----------------------------------------------------------

    def add_job(self, rep: Rep, now: float) -> list[Effect]:
        """Add (or replace) the job for ``rep``; start it at once if a slot is free."""
        if not isinstance(rep, Rep):
            raise TypeError(f"add_job expects a Rep, got {type(rep).__name__}")
        effects: list[Effect] = []
        existing = self._jobs.get(rep.id)
        if existing is not None:
            effects += self._remove(existing, now)
        job = Job(id=rep.id, rep=rep, history=((ADDED, now),))
        self._put(job, now)
        max_jobs = self.settings.max_jobs
        if len(self._jobs) < max_jobs and len(self._running) < max_jobs:
            effects += self._start_job(job, now)
            self.update_running_jobs_stats(now)
        self.stats.increment("couch_replicator.jobs.adds")
        self.stats.update_gauge("couch_replicator.jobs.total", len(self._jobs))
        return effects

    def remove_job(self, job_id: Any, now: float) -> list[Effect]:
        """Stop (if running) and forget a job; unknown ids are ignored."""
        job = self._jobs.get(job_id)
        if job is None:
            return []
        return self._remove(job, now)

    def reschedule(self, now: float) -> list[Effect]:
        """One scheduling cycle (the seed's ``reschedule/1``)."""
        if self.settings.fair_share:
            running = [self._jobs[i] for i in self._running]
            self.fair_share.update(running, now, self.settings.interval / 1000.0)
        decision = policy.reschedule(
            list(self._jobs.values()),
            now,
            max_jobs=self.settings.max_jobs,
            max_churn=self.settings.max_churn,
            **self._policy_kwargs(),
        )
        effects: list[Effect] = []
        for job_id in decision.stop:
            effects += self._stop_job(self._jobs[job_id], now)
        for job_id in decision.start:
            effects += self._start_job(self._jobs[job_id], now)
        self.update_running_jobs_stats(now)
        return effects

    def job_started(self, job_id: Any, pid: Any, now: float, monitor: Any = None) -> None:
        """The actor layer started the job's process (``update_state_started``)."""
        if pid is None or pid is STARTING:
            raise ValueError(f"job_started needs a real process handle, got {pid!r}")
        job = self._jobs.get(job_id)
        if job is None or job.pid is not STARTING:
            raise KeyError(f"job {job_id!r} is not waiting to start")
        started = self._history(replace(job, pid=pid, monitor=monitor), STARTED, now)
        self._put(started, now)
        self.stats.increment("couch_replicator.jobs.starts")
        log.info("job %r started as %r", job_id, pid)
        self.update_running_jobs_stats(now)

    def job_start_failed(self, job_id: Any, reason: Any, now: float) -> None:
        """The job could not be started: it is recorded as started, then crashed.

        The seed's job always starts (``update_state_started``) and fails in
        its init timeout, so the failure reaches the scheduler as a crash
        exit: history ``[crashed, started, ...]``.  Both events matter.  The
        ``started`` makes each failed start count as a consecutive crash (a
        crash right after its start), so a job that keeps failing backs off
        exponentially; without it, crash-after-crash gaps grow past the health
        threshold and the back-off falls back to zero.  It also makes the job
        the youngest, so it goes to the back of the pending queue.  The seed
        then refills free slots as for any crash: the caller does that with
        `refill_after_crash` in a later callback (the seed's crash arrives as
        a message of its own), and removes a transient job.
        """
        job = self._jobs.get(job_id)
        if job is None or job.pid is not STARTING:
            raise KeyError(f"job {job_id!r} is not waiting to start")
        log.warning("job %r failed to start: %s", job_id, rep_error_to_text(reason))
        self.stats.increment("couch_replicator.jobs.starts")
        self._crash(self._history(job, STARTED, now), reason, now)
        self.update_running_jobs_stats(now)

    def refill_after_crash(self, now: float) -> list[Effect]:
        """Start pending jobs into freed slots, only while the table is small.

        Starting pending jobs is O(total jobs); only worth it while the table
        is small, so a cascade of crashes cannot stall the scheduler.
        """
        effects: list[Effect] = []
        if len(self._jobs) < self.settings.max_jobs:
            ids = policy.start_pending_jobs(
                list(self._jobs.values()), now, max_jobs=self.settings.max_jobs, **self._policy_kwargs()
            )
            for start_id in ids:
                effects += self._start_job(self._jobs[start_id], now)
        return effects

    def job_exited(self, pid: Any, reason: Any, now: float) -> list[Effect]:
        """A monitored job process went down (the seed's ``'DOWN'`` clauses).

        ``normal``: the job completed and is removed.  Otherwise a transient
        job (no owner database) is removed and a permanent one stays with the
        crash in its history, to be retried after its back-off; if the table
        is small, pending jobs are started into the freed slot at once.
        An unknown ``pid`` (e.g. the DOWN of a job already stopped) is ignored.
        """
        job_id = self._by_pid.get(pid)
        if job_id is None:
            return []
        job = self._jobs[job_id]
        if reason == "normal":
            log.info("job %r completed normally", job_id)
            if self.settings.fair_share:
                self.fair_share.charge_job(job, now)
            self._delete(job)
            self.stats.update_gauge("couch_replicator.jobs.total", len(self._jobs))
            self.update_running_jobs_stats(now)
            return []
        if job.rep.db_name is None:
            log.error("transient job %r failed, removing. Error: %s", job_id, rep_error_to_text(reason))
            if self.settings.fair_share:
                self.fair_share.charge_job(job, now)
            self._delete(job)
            self.stats.update_gauge("couch_replicator.jobs.total", len(self._jobs))
            self.update_running_jobs_stats(now)
            return []
        self._crash(job, reason, now)
        effects = self.refill_after_crash(now)
        # The gauges are kept incrementally (O(1)), so unlike the seed they are
        # refreshed on every crash, not only when the table is small.
        self.update_running_jobs_stats(now)
        return effects

    # -- API: settings ------------------------------------------------------------

    def set_setting(self, key: str, value: Any) -> None:
        """Apply one validated setting; raises `InvalidSetting` and keeps the old value."""
        self.settings = self.settings.with_value(key, value)
        if key == "usage_coeff":
            self.fair_share.usage_coeff = self.settings.usage_coeff
        elif key == "interval":
            self.fair_share.interval = self.settings.interval / 1000.0
        log.info("%s set to %r", key, getattr(self.settings, key))

    def set_max_jobs(self, value: int) -> None:
        self.set_setting("max_jobs", value)

    def set_max_churn(self, value: int) -> None:
        self.set_setting("max_churn", value)

    def set_max_history(self, value: int) -> None:
        self.set_setting("max_history", value)

    def set_interval(self, value: int) -> None:
        self.set_setting("interval", value)

    def handle_config_change(self, section: str, key: str, value: str | None) -> bool:
        """A config listener's change; True when applied, False when ignored or rejected.

        Invalid values are logged and not applied (the seed's guards on
        ``set_max_jobs`` & co.).  A deleted key returns to its default.
        """
        if section == SHARES_SECTION:
            try:
                if value is None:
                    self.fair_share.reset_shares(key)
                else:
                    self.fair_share.set_shares(key, value)
            except ValueError as exc:
                log.warning("rejected [%s] %s: %s", section, key, exc)
                return False
            return True
        if section != SECTION or key not in Settings.keys():
            return False
        if value is None:
            value = getattr(Settings(), key)
        try:
            self.set_setting(key, value)
        except InvalidSetting as exc:
            log.warning("rejected %s", exc)
            return False
        return True

    # -- API: reads -----------------------------------------------------------------

    def health_threshold(self) -> float:
        return self.settings.health_threshold

    def interval_seconds(self) -> float:
        return self.settings.interval / 1000.0

    def job_summary(self, job_id: Any, health_threshold: float | None = None) -> dict | None:
        """State, error count and last error of a job; None if unknown (it may have completed)."""
        job = self._jobs.get(job_id)
        if job is None:
            return None
        threshold = self.settings.health_threshold if health_threshold is None else health_threshold
        return summarize_job(job, threshold)

    def job(self, job_id: Any) -> dict | None:
        """The JSON view of one job (the seed's ``job/1``), None if unknown."""
        job = self._jobs.get(job_id)
        return None if job is None else job_to_json(job, self.node)

    def jobs(self) -> list[dict]:
        return [job_to_json(j, self.node) for j in list(self._jobs.values())]

    # -- statistics ------------------------------------------------------------------

    def update_running_jobs_stats(self, now: float) -> None:
        """The seed's gauges: counts and average age of pending/running/crashed jobs."""
        for category in CATEGORIES:
            count, total = self._agg[category]
            avg = 0 if count == 0 else max(0, round(now - total / count))
            self.stats.update_gauge(f"couch_replicator.jobs.{category}", count)
            self.stats.update_gauge(f"couch_replicator.jobs.avg_{category}", avg)

    def backoffs(self) -> list[dict]:
        """Every job held back by its crashes: text id, crashes, back-off seconds, ``retry_at``.

        ``retry_at`` is the scheduler clock's time (seconds since the epoch)
        before which a reschedule will not start the job; running jobs and
        jobs never held back are left out, so the reply stays small.
        """
        s = self.settings
        out = []
        for job in list(self._jobs.values()):
            if job.pid is not None:
                continue
            crashes, wait, retry_at = policy.backoff_until(
                job, s.health_threshold, s.backoff_interval, s.max_backoff_exponent
            )
            if crashes:
                out.append({"id": job_id_text(job.id), "crashes": crashes, "backoff": wait, "retry_at": retry_at})
        return out

    def format_status(self) -> dict:
        return {
            "max_jobs": self.settings.max_jobs,
            "running_jobs": self.running_job_count(),
            "pending_jobs": self.pending_job_count(),
        }
