"""``couch_replicator_scheduler``: the scheduler gen_server and its API.

`SchedulerServer` (registered as ``couch_replicator_scheduler``) owns a
`SchedulerState` and carries out the effects its methods return: it starts
jobs through the job supervisor (``couch_replicator_scheduler_sup``), monitors
them, stops them through the supervisor (``shutdown``: the job takes a final
checkpoint), and reschedules every ``interval``.  ``[replicator]`` changes
reach it from the config listener as casts; invalid values are rejected.

Reads never queue behind the scheduler.  The seed reads its ets table
directly; here the scheduler publishes, after every callback, the job
records that changed (frozen `Job` values, shared rather than copied) to a
small `SchedulerReader` actor it starts in its own OS process and links to
(registered as ``couch_replicator_scheduler_reader``).  `jobs`, `job`,
`job_summary`, `rep_state` and `find_jobs_by_*` are calls to the reader: one
round trip, answered while the scheduler is busy starting or stopping jobs.
A delta is O(changed jobs), so ``add_job`` stays O(1) at 100k jobs where a
full copy per event would not.  The reader is at most one scheduler callback
behind, and a caller that got a reply from the scheduler sees its effect in
the next read (the delta is queued at the reader before the reply is sent).

Module functions take where to find the actors: the `Node` (from the host
program), the calling actor (``self``), or None (any thread of a process of
the node: the name is looked up through that process's runtime).
"""

from __future__ import annotations

import logging
from typing import Any

from actors import ActorRef, CallTimeout, Exit, GenServer, Node
from actors import config as config_module
from actors.clock import WallClock

from . import _names, scheduler_sup
from .job_table import JobTable
from .records import Rep
from .scheduler_state import SchedulerState, StartJob, StopJob, rep_error_to_text
from .settings import SECTION, SHARES_SECTION, InvalidSetting, Settings

__all__ = [
    "READER",
    "SCHEDULER",
    "SchedulerReader",
    "SchedulerServer",
    "add_job",
    "backoffs",
    "find_jobs_by_dbname",
    "find_jobs_by_doc",
    "health_threshold",
    "job",
    "job_summary",
    "jobs",
    "remove_job",
    "rep_state",
    "reschedule",
    "subscribe",
]

log = logging.getLogger("actors.replicator.scheduler")

SCHEDULER = "couch_replicator_scheduler"
READER = "couch_replicator_scheduler_reader"
#: Seconds a scheduler call may take (a reschedule may stop and start many jobs).
CALL_TIMEOUT = 60.0
#: Seconds for one supervisor call (a start runs the job's init; a stop its final checkpoint).
SUP_TIMEOUT = 30.0


# -- the reader ------------------------------------------------------------------------


class SchedulerReader(GenServer):
    """Answers job table reads from the latest table the scheduler published."""

    def init(self, table: dict, version: int, node_name: str = "nonode@nohost") -> None:
        self.table = JobTable(node_name)
        self.table.reset(table, version)

    def handle_cast(self, request: Any) -> None:
        op, changes, version = request
        if op == "apply":
            self.table.apply(changes, version)
        elif op == "reset":
            self.table.reset(changes, version)
        else:
            raise ValueError(f"reader got unknown publish {op!r}")

    def handle_call(self, request: Any, from_: Any) -> Any:
        op, *args = request
        table = self.table
        if op == "jobs":
            return table.jobs()
        if op == "job":
            return table.job(args[0])
        if op == "job_summary":
            threshold = health_threshold() if args[1] is None else args[1]
            return table.job_summary(args[0], threshold)
        if op == "rep_state":
            return table.rep_state(args[0])
        if op == "find_jobs_by_dbname":
            return table.find_jobs_by_dbname(args[0])
        if op == "find_jobs_by_doc":
            return table.find_jobs_by_doc(args[0], args[1])
        if op == "version":
            return table.version
        if op == "count":
            return len(table)
        raise ValueError(f"unknown reader request {request!r}")


# -- the scheduler ---------------------------------------------------------------------

#: The scheduler's calls and how many arguments each takes; anything else is ignored.
_ARITY = {
    "add_job": 1,
    "remove_job": 1,
    "reschedule": 0,
    "subscribe": 1,
    "format_status": 0,
    "settings": 0,
    "backoffs": 0,
}


class SchedulerServer(GenServer):
    """The scheduler gen_server.  Its job supervisor must already be running."""

    def init(
        self, sup_name: str = scheduler_sup.SCHEDULER_SUP, node_name: str = "nonode@nohost", clock: Any = None
    ) -> None:
        _names.register_self(self, SCHEDULER)
        self.clock = clock or WallClock()
        cfg = config_module.current()
        self.state = SchedulerState.from_config(cfg, node=node_name)
        self.sup = self.whereis(sup_name)
        if self.sup is None:
            raise Exit(("noproc", sup_name), f"job supervisor {sup_name!r} is not running")
        self.version = 1
        self.reader = self.spawn_link(SchedulerReader, self.state.track_changes(), self.version, node_name, name=READER)
        self.subscribers: dict[Any, ActorRef] = {}
        ref = self.ref
        self._listener = cfg.listen(
            lambda section, key, value, _persist: (
                ref.cast(("config", section, key, value)) if section in (SECTION, SHARES_SECTION) else None
            )
        )
        self._config = cfg
        self.timer = self.send_after(self.state.interval_seconds(), "reschedule")

    # -- requests -----------------------------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        op, *args = request if isinstance(request, tuple) and request else (request,)
        if not isinstance(op, str) or _ARITY.get(op) != len(args) or (op == "add_job" and not isinstance(args[0], Rep)):
            # The seed's catch-all clause: a stray request must not crash the
            # scheduler, whose restart would forget every job.  (The seed does
            # not reply; an error reply spares the caller its timeout.)
            log.warning("scheduler ignored unknown call %r", request)
            return ("error", ("unknown_call", request))
        now = self.clock.now()
        if op == "add_job":
            rep = args[0]
            effects = self.state.add_job(rep, now)
            self._notify("added", rep.id)
            self._carry_out(effects)
        elif op == "remove_job":
            if self.state.get_job(args[0]) is not None:
                self._carry_out(self.state.remove_job(args[0], now))
                self._notify("removed", args[0])
        elif op == "reschedule":
            self._carry_out(self.state.reschedule(now))
        elif op == "subscribe":
            self.subscribers[self.monitor(args[0])] = args[0]
        elif op == "format_status":
            return self.state.format_status()
        elif op == "settings":
            return self.state.settings
        elif op == "backoffs":
            return self.state.backoffs()
        return "ok"

    def handle_cast(self, request: Any) -> None:
        if not (isinstance(request, tuple) and len(request) == 4 and request[0] == "config"):
            # The seed ignores any other cast (and a guard-failing setting).
            log.warning("scheduler ignored unknown cast %r", request)
            return None
        _, section, key, value = request
        applied = self.state.handle_config_change(section, key, value)
        if applied and key == "interval":
            # Apply a new interval now rather than after the old one runs out.
            self.cancel_timer(self.timer)
            self.timer = self.send_after(self.state.interval_seconds(), "reschedule")
        self._notify("config_applied" if applied else "config_rejected", (section, key), value)

    def handle_info(self, message: Any) -> None:
        if message == "reschedule":
            self._carry_out(self.state.reschedule(self.clock.now()))
            # As the seed: cancel the stored timer before arming the next, so
            # a reschedule message that is not the stored timer's (one that
            # fired while a new interval re-armed it, or a stray one) never
            # leaves two timer chains running.
            self.cancel_timer(self.timer)
            self.timer = self.send_after(self.state.interval_seconds(), "reschedule")
            return None
        if message == "refill":
            self._carry_out(self.state.refill_after_crash(self.clock.now()))
            return None
        if isinstance(message, tuple) and len(message) == 4 and message[0] == "DOWN":
            _, mref, ref, reason = message
            if mref in self.subscribers:
                del self.subscribers[mref]
                return None
            job_id = self._job_id_of(ref)
            effects = self.state.job_exited(ref, reason, self.clock.now())
            if job_id is not None:
                self._publish()
                self._notify("completed" if reason == "normal" else "crashed", job_id, reason)
            self._carry_out(effects)
            return None
        return super().handle_info(message)

    def terminate(self, reason: Any) -> None:
        self._config.unlisten(self._listener)

    # -- effects ------------------------------------------------------------------------

    def _carry_out(self, effects: list) -> None:
        """Carry out effects in order, publishing the table before each one.

        Readers thus see a job as starting (``pid`` STARTING) or stopped while
        the supervisor call for it is still in progress.
        """
        pending = list(effects)
        for _ in range(len(pending) + 10 * max(1, self.state.total_jobs())):
            self._publish()
            if not pending:
                return
            effect = pending.pop(0)
            if isinstance(effect, StopJob):
                self._stop(effect)
            elif isinstance(effect, StartJob):
                pending.extend(self._start(effect))
            else:
                raise TypeError(f"unknown scheduler effect {effect!r}")

    def _stop(self, effect: StopJob) -> None:
        if effect.monitor is not None:
            self.demonitor(effect.monitor)
        try:
            scheduler_sup.terminate_job(self.sup, effect.pid, timeout=SUP_TIMEOUT)
        except scheduler_sup.JobNotRunning:
            pass  # it exited on its own meanwhile; its DOWN was discarded with the monitor
        self._notify("stopped", effect.job_id)

    def _start(self, effect: StartJob) -> list:
        now = self.clock.now()
        try:
            ref = scheduler_sup.start_job(self.sup, effect.rep, timeout=SUP_TIMEOUT)
        except scheduler_sup.JobStartError as exc:
            return self._start_failed(effect, exc.reason, now)
        except (CallTimeout, Exit) as exc:
            return self._start_failed(effect, ("start_error", repr(exc)), now)
        mref = self.monitor(ref)
        self.state.job_started(effect.job_id, ref, now, mref)
        # Monitored first, then told to run: even a job that finishes at once
        # is reported with its real exit reason, never ``noproc``.
        ref.send("run")
        self._notify("started", effect.job_id, ref)
        return []

    def _start_failed(self, effect: StartJob, reason: Any, now: float) -> list:
        log.warning("job %r failed to start: %s", effect.job_id, rep_error_to_text(reason))
        self.state.job_start_failed(effect.job_id, reason, now)
        self._notify("crashed", effect.job_id, reason)
        if effect.rep.db_name is None:
            # As in the seed, where a failed start arrives as the job's exit:
            # a transient job is not retried.
            self._notify("removed", effect.job_id)
            return self.state.remove_job(effect.job_id, now)
        # A permanent job's crash refills free slots (the seed's
        # handle_crashed_job); a message of its own, as the seed's DOWN is,
        # so a job that fails at once cannot loop within this callback.
        self.ref.send("refill")
        return []

    def _job_id_of(self, ref: Any) -> Any:
        return self.state.job_id_of(ref)

    # -- publishing -----------------------------------------------------------------------

    def _publish(self) -> None:
        changes = self.state.drain_changes()
        if changes:
            self.version += 1
            self.reader.cast(("apply", changes, self.version))

    def _notify(self, event: str, job_id: Any, detail: Any = None) -> None:
        for ref in self.subscribers.values():
            ref.send((SCHEDULER, event, job_id, detail))


# -- the API ------------------------------------------------------------------------------


def _whereis(where: Node | GenServer | None, name: str) -> ActorRef:
    if where is None:
        ref = _names.whereis(name)
    elif isinstance(where, (Node, GenServer)):
        ref = where.whereis(name)
    else:
        raise TypeError(f"expected a Node, an actor or None, got {where!r}")
    if ref is None:
        raise Exit("noproc", f"no actor is registered as {name!r}")
    return ref


def _scheduler_call(where: Node | GenServer | None, request: tuple, timeout: float | None) -> Any:
    return _whereis(where, SCHEDULER).call(request, timeout=timeout)


def _read(where: Node | GenServer | None, request: tuple, timeout: float | None) -> Any:
    return _whereis(where, READER).call(request, timeout=timeout)


def add_job(where: Node | GenServer | None, rep: Rep, timeout: float | None = CALL_TIMEOUT) -> str:
    """Add (or replace) a job; it starts at once if a slot is free, else at a reschedule."""
    if not isinstance(rep, Rep):
        raise TypeError(f"add_job expects a Rep, got {type(rep).__name__}")
    return _scheduler_call(where, ("add_job", rep), timeout)


def remove_job(where: Node | GenServer | None, job_id: Any, timeout: float | None = CALL_TIMEOUT) -> str:
    """Stop (with a final checkpoint) and forget a job; unknown ids are ignored."""
    return _scheduler_call(where, ("remove_job", job_id), timeout)


def reschedule(where: Node | GenServer | None, timeout: float | None = CALL_TIMEOUT) -> str:
    """Run one scheduling cycle now (for tests and operators)."""
    return _scheduler_call(where, ("reschedule",), timeout)


def subscribe(where: Node | GenServer | None, ref: ActorRef, timeout: float | None = CALL_TIMEOUT) -> str:
    """Send ``("couch_replicator_scheduler", event, job_id, detail)`` to ``ref``.

    Events: ``added``, ``started`` (detail: the job's ref), ``stopped``,
    ``completed``, ``crashed`` (detail: the reason), ``removed``, and
    ``config_applied``/``config_rejected`` (job_id: ``(section, key)``,
    detail: the value).  The job table is published to the reader before an
    event about it is sent.  The
    subscription ends when ``ref`` dies.
    """
    return _scheduler_call(where, ("subscribe", ref), timeout)


def jobs(where: Node | GenServer | None, timeout: float | None = 5.0) -> list[dict]:
    """Every job as plain data (the seed's ``jobs/0``)."""
    return _read(where, ("jobs",), timeout)


def backoffs(where: Node | GenServer | None, timeout: float | None = 5.0) -> list[dict]:
    """Jobs held back by their crashes: ``{"id", "crashes", "backoff", "retry_at"}`` each
    (`SchedulerState.backoffs`); asked of the scheduler, which alone knows the settings."""
    return _scheduler_call(where, ("backoffs",), timeout)


def job(where: Node | GenServer | None, job_id: Any, timeout: float | None = 5.0) -> dict | None:
    return _read(where, ("job", job_id), timeout)


def job_summary(
    where: Node | GenServer | None, job_id: Any, threshold: float | None = None, timeout: float | None = 5.0
) -> dict | None:
    """``running``/``pending``/``crashing``, error count and last error; None if unknown."""
    return _read(where, ("job_summary", job_id, threshold), timeout)


def rep_state(where: Node | GenServer | None, job_id: Any, timeout: float | None = 5.0) -> Rep | None:
    return _read(where, ("rep_state", job_id), timeout)


def find_jobs_by_dbname(where: Node | GenServer | None, db_name: str, timeout: float | None = 5.0) -> list:
    return _read(where, ("find_jobs_by_dbname", db_name), timeout)


def find_jobs_by_doc(where: Node | GenServer | None, db_name: str, doc_id: str, timeout: float | None = 5.0) -> list:
    return _read(where, ("find_jobs_by_doc", db_name, doc_id), timeout)


def health_threshold() -> float:
    """``[replicator] health_threshold`` from this process's config (no actor involved)."""
    raw = config_module.current().get(SECTION, "health_threshold")
    if raw is None:
        return Settings().health_threshold
    try:
        return Settings().with_value("health_threshold", raw).health_threshold
    except InvalidSetting:
        return Settings().health_threshold
