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
dict that is only ever rebound per key, so another thread may call them
while the scheduler works (the seed's ets table with ``read_concurrency``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from actors import stats as stats_module

from . import policy
from .fair_share import FairShare
from .records import (
    ADDED,
    MAX_BACKOFF,
    STARTED,
    STARTING,
    STOPPED,
    Job,
    Rep,
    crashed,
    is_crash,
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


def rep_error_to_text(reason: Any) -> str:
    """A crash reason as text for summaries (``couch_replicator_utils:rep_error_to_binary``)."""
    if isinstance(reason, bytes):
        return reason.decode("utf-8", "replace")
    if isinstance(reason, str):
        return reason
    if isinstance(reason, BaseException):
        return f"{type(reason).__name__}: {reason}"
    if isinstance(reason, tuple) and len(reason) == 2 and isinstance(reason[1], (str, bytes)):
        return f"{reason[0]}: {rep_error_to_text(reason[1])}"
    return repr(reason)


def iso8601(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


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


_PENDING, _RUNNING, _CRASHED = "pending", "running", "crashed"


class SchedulerState:
    """The job table, settings and statistics of one replicator scheduler."""

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
        self._jobs: dict[Any, Job] = {}
        self._by_pid: dict[Any, Any] = {}
        self._running: set[Any] = set()
        # Incremental state statistics: category -> [count, sum of since-times].
        self._category: dict[Any, tuple[str, float]] = {}
        self._agg: dict[str, list[float]] = {_PENDING: [0, 0.0], _RUNNING: [0, 0.0], _CRASHED: [0, 0.0]}
        self.fair_share = FairShare(
            shares, interval=self.settings.interval / 1000.0, usage_coeff=self.settings.usage_coeff
        )
        # id -> latest record (None: deleted) since the last `drain_changes`;
        # None while nobody asked to track (no cost for plain users).
        self._changes: dict[Any, Job | None] | None = None

    # -- construction helpers -------------------------------------------------

    @classmethod
    def from_config(cls, config: Any, stats: Any = None, **kwargs: Any) -> "SchedulerState":
        """Settings from ``[replicator]`` and shares from ``[replicator.shares]``."""
        shares = config.section(SHARES_SECTION)
        return cls(Settings.from_config(config), stats, shares=shares, **kwargs)

    def load_jobs(self, jobs: Iterable[Job], now: float = 0.0) -> None:
        """Put records into the table as they are (tests, and restoring a table)."""
        for job in jobs:
            if job.id in self._jobs:
                raise ValueError(f"duplicate job id {job.id!r}")
            self._put(job, now)

    def track_changes(self) -> dict[Any, Job]:
        """Start recording changed records; returns the whole table as it is now.

        The actor layer publishes the table to readers in other threads and
        processes as deltas (`drain_changes`) rather than copying it on every
        event, which would make each ``add_job`` O(jobs).
        """
        self._changes = {}
        return dict(self._jobs)

    def drain_changes(self) -> dict[Any, Job | None]:
        """Records changed since the last drain (``None`` for a removed job)."""
        if self._changes is None:
            raise RuntimeError("drain_changes() called before track_changes()")
        changes, self._changes = self._changes, {}
        return changes

    # -- table bookkeeping ------------------------------------------------------

    def _classify(self, job: Job, now: float) -> tuple[str, float]:
        head = job.history[0] if job.history else (ADDED, now)
        if job.pid is not None:
            return _RUNNING, head[1] if head[0] == STARTED else now
        if is_crash(head[0]):
            return _CRASHED, head[1]
        return _PENDING, head[1]

    def _put(self, job: Job, now: float) -> None:
        old = self._jobs.get(job.id)
        if old is not None:
            self._forget_indexes(old)
        self._jobs[job.id] = job
        if self._changes is not None:
            self._changes[job.id] = job
        if job.pid is not None:
            self._running.add(job.id)
            if job.pid is not STARTING:
                self._by_pid[job.pid] = job.id
        category = self._classify(job, now)
        self._category[job.id] = category
        agg = self._agg[category[0]]
        agg[0] += 1
        agg[1] += category[1]

    def _forget_indexes(self, job: Job) -> None:
        self._running.discard(job.id)
        if job.pid is not None and self._by_pid.get(job.pid) == job.id:
            del self._by_pid[job.pid]
        category = self._category.pop(job.id, None)
        if category is not None:
            agg = self._agg[category[0]]
            agg[0] -= 1
            agg[1] -= category[1]

    def _delete(self, job: Job) -> None:
        self._forget_indexes(job)
        self._jobs.pop(job.id, None)
        if self._changes is not None:
            self._changes[job.id] = None

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

    def job_id_of(self, pid: Any) -> Any:
        """The id of the job running as ``pid``, or None."""
        return self._by_pid.get(pid)

    def get_job(self, job_id: Any) -> Job | None:
        """The raw record (not the JSON view of `job`)."""
        return self._jobs.get(job_id)

    def all_jobs(self) -> list[Job]:
        return list(self._jobs.values())

    def rep_state(self, job_id: Any) -> Rep | None:
        job = self._jobs.get(job_id)
        return None if job is None else job.rep

    def find_jobs_by_dbname(self, db_name: str) -> list:
        return [j.id for j in list(self._jobs.values()) if j.rep.db_name == db_name]

    def find_jobs_by_doc(self, db_name: str, doc_id: str) -> list:
        return [
            j.id for j in list(self._jobs.values()) if j.rep.db_name == db_name and j.rep.doc_id == doc_id
        ]

    def running_job_count(self) -> int:
        return len(self._running)

    def pending_job_count(self) -> int:
        return len(self._jobs) - len(self._running)

    def total_jobs(self) -> int:
        return len(self._jobs)

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
        for category in (_PENDING, _RUNNING, _CRASHED):
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
                out.append({"id": job_id_text(job.id),
                            "crashes": crashes, "backoff": wait, "retry_at": retry_at})
        return out

    def format_status(self) -> dict:
        return {
            "max_jobs": self.settings.max_jobs,
            "running_jobs": self.running_job_count(),
            "pending_jobs": self.pending_job_count(),
        }


def summarize_job(job: Job, health_threshold: float) -> dict:
    """The seed's ``job_summary/2`` for one record: running, pending or crashing."""
    errors = policy.consecutive_crashes(job.history, health_threshold)
    if job.pid is not None:
        state, info = "running", None
    elif errors == 0:
        state, info = "pending", None
    else:
        reason = next((e[0][1] for e in job.history if is_crash(e[0])), None)
        state, info = "crashing", rep_error_to_text(reason)
    rep = job.rep
    return {
        "source": _endpoint(rep.source),
        "target": _endpoint(rep.target),
        "state": state,
        "info": info,
        "error_count": errors,
        "last_updated": iso8601(job.history[0][1]) if job.history else None,
        "start_time": iso8601(rep.start_time),
        "proxy": None,
    }


def job_id_text(job_id: Any) -> str:
    """A job id as text: the seed's ``{BaseId, Ext}`` id reads ``BaseId ++ Ext``.

    ``job_ejson/1`` joins the two parts (``"abc+continuous"``), the form
    replication ids are shown in everywhere; a string id is itself and any
    other id its ``repr``.
    """
    if isinstance(job_id, str):
        return job_id
    if isinstance(job_id, tuple) and len(job_id) == 2 and all(isinstance(p, str) for p in job_id):
        return job_id[0] + job_id[1]
    return repr(job_id)


def job_to_json(job: Job, node: str) -> dict:
    """The seed's ``job_ejson/1``: plain data, safe to send anywhere."""
    history = []
    for etype, when in job.history:
        event: dict[str, Any] = {"timestamp": iso8601(when)}
        if is_crash(etype):
            event.update(type="crashed", reason=rep_error_to_text(etype[1]))
        else:
            event["type"] = etype
        history.append(event)
    rep = job.rep
    return {
        "id": job_id_text(job.id),
        "pid": None if job.pid is None else repr(job.pid),
        "source": _endpoint(rep.source),
        "target": _endpoint(rep.target),
        "database": rep.db_name,
        "user": rep.user,
        "doc_id": rep.doc_id,
        "history": history,
        "node": node,
        "start_time": iso8601(rep.start_time),
    }


def _endpoint(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float)):
        return value
    return str(value)
