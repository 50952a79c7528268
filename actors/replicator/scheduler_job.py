"""``couch_replicator_scheduler_job``: the process that runs one job.

The scheduler starts one `SchedulerJobServer` per running job under the
``simple_one_for_one`` job supervisor (`scheduler_sup`) and monitors it.  The
job's exit reason is what the scheduler acts on: ``normal`` means completed;
anything else is a crash, recorded in the job's history and backed off.

Two ways to drive a job class, chosen by what it is:

* the built-in `ReplicationJob` runs as the seed's job does: this process
  reads the source's changes feed in batches (the changes manager) and hands
  them to ``worker_processes`` `ReplicationWorker` actors it spawns and links;
  each worker copies its batch with its own SQLite handles and reports the
  batch's sequence back, and the job keeps the seed's bookkeeping (sequences
  in progress, highest done, through sequence);
* any other class meeting the `SchedulerJob` protocol (a host program's own
  job) is stepped: ``step`` repeatedly through this actor's mailbox, so a
  ``shutdown`` from the supervisor is never stuck behind a long loop.

In both, a checkpoint timer fires every ``checkpoint_interval`` ms; a
continuous job that has caught up polls the source again after a delay that
doubles from `POLL_MIN` up to ``changes_poll_interval`` ms (bounded, never a
busy loop); a one-shot job finishes (last checkpoint) and exits ``normal``.
The job traps exits so that when its supervisor shuts it down (``shutdown``)
``terminate`` runs and takes a final checkpoint.  A job whose start fails (its
source is missing, say) fails ``init``: the supervisor's ``start_child``
returns the reason and the scheduler records the crash.  A started job does
nothing until it gets ``"run"``: its starter monitors it first, so even a job
that finishes at once is reported with its real exit reason, never ``noproc``.

With leases (``[replicator] lease``, on by default with a PostgreSQL
``store``) the job runs only while it holds its lease (`lease.LeaseHolder`):
it asks for it in ``init`` and, while another node holds it, waits, asking
again every renewal interval, before it opens anything; it renews it on a
timer, on a thread of its own (`actors.leases.LeaseHolder.renew_in_background`:
a renewal hung on a dead socket never holds up this actor); it stops
(``("lease_lost", ...)``, no final checkpoint) as soon as a renewal says the
lease moved on or its own deadline passes without a renewal heard, and it
looks at the deadline first thing on every message (after a freeze too,
before any timer it missed) and before every batch, step and checkpoint; every checkpoint and batch it writes into the lease's store
carries the fencing token.  It releases the lease when it stops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from actors import Exit, GenServer, Stop, is_normal_exit
from actors import config as config_module
from actors.clock import WallClock
from actors.leases import Fence

from . import _names
from .lease import LeaseConfig, LeaseHolder, open_holder
from .records import MAX_BACKOFF, Rep
from .replication import (
    DEFAULT_CHECKPOINT_INTERVAL,
    Batch,
    BatchStats,
    ReplicationError,
    ReplicationJob,
    replicate_batch,
)
from .stores import open_db

__all__ = [
    "DEFAULT_POLL_INTERVAL",
    "POLL_MIN",
    "ReplicationWorker",
    "SchedulerJobServer",
    "start_error_reason",
]

log = logging.getLogger("actors.replicator.job")

#: Seconds: the first delay before a caught-up continuous job polls again.
POLL_MIN = 0.02
#: Milliseconds: the longest delay between two polls (option ``changes_poll_interval``).
DEFAULT_POLL_INTERVAL = 1000

JobFactory = Callable[[Rep], Any]


def start_error_reason(exc: BaseException) -> Any:
    """The exit reason of a job that could not start (``replication_start_error``).

    ``("db_not_found", "could not open <path>")`` for a missing database, the
    error's own reason for other replication errors; plain data either way, so
    it reads well in the scheduler's history and summaries.
    """
    if isinstance(exc, ReplicationError):
        reason = exc.reason
        if isinstance(reason, tuple) and reason and reason[0] == "db_not_found":
            return ("db_not_found", str(exc))
        return reason
    return ("start_error", f"{type(exc).__name__}: {exc}")


def _ms_option(rep: Rep, key: str, default: int) -> float:
    value = rep.options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"option {key} = {value!r}: must be a positive number of milliseconds")
    return value / 1000.0


class ReplicationWorker(GenServer):
    """``couch_replicator_worker``: copies the batches its job hands it.

    It opens its own handles on both databases, so batches really run in
    parallel with the job's changes reading and checkpoints.  It is linked to
    its job: when the job goes, so does the worker.
    """

    def init(self, job: Any, source: str, target: str, store: str | None = None) -> None:
        # Trapping makes the job's exit signal (normal completion included)
        # stop the worker with terminate, which closes its handles.
        self.trap_exit = True
        self.job = job
        self.source = open_db(source, store=store)
        try:
            self.target = open_db(target, store=store)
        except BaseException:
            self.source.close()
            raise

    def handle_cast(self, request: Any) -> None:
        kind, batch, *rest = request
        if kind != "batch" or not isinstance(batch, Batch):
            raise ValueError(f"worker got {request!r}, expected ('batch', Batch[, fence])")
        fence = rest[0] if rest and isinstance(rest[0], Fence) else None
        stats = replicate_batch(self.source, self.target, batch.changes, fence)
        self.job.send(("batch_done", self.ref, batch.report_seq, stats))

    def terminate(self, reason: Any) -> None:
        self.source.close()
        self.target.close()


class SchedulerJobServer(GenServer):
    """One running job.  Started as ``(job_factory, rep)`` by the job supervisor."""

    def init(self, job_factory: JobFactory, rep: Rep, clock: Any = None) -> Any:
        self.trap_exit = True
        self.clock = clock or WallClock()
        self.rep = rep
        leases = LeaseConfig.from_config(config_module.current())
        self.store = leases.store
        if self.store is not None and isinstance(job_factory, type) and issubclass(job_factory, ReplicationJob):
            self.job = job_factory(rep, store=self.store)
        else:
            self.job = job_factory(rep)
        self.continuous = rep.continuous
        self.checkpoint_every = _ms_option(rep, "checkpoint_interval", DEFAULT_CHECKPOINT_INTERVAL)
        self.poll_max = _ms_option(rep, "changes_poll_interval", DEFAULT_POLL_INTERVAL)
        self.poll_delay = POLL_MIN
        self.poll_timer: Any = None
        self.checkpoint_timer: Any = None
        self.idle_workers: list[Any] = []
        self.busy: dict[Any, tuple] = {}  # worker ref -> report seq of its batch
        self.finished = False
        self.running = False
        self.started = False
        self.batched = isinstance(self.job, ReplicationJob)
        self.lease: LeaseHolder | None = None
        self.lease_timer: Any = None
        self.deadline_timer: Any = None
        if leases.enabled:
            self.lease = open_holder(
                leases, str(rep.id), _names.node_name() or "nonode", _names.node_incarnation() or "0"
            )
            if not self.lease.try_acquire():
                holder = self.lease.holder
                log.info(
                    "replication %r waits for its lease (held by %s)",
                    rep.id,
                    holder.node if holder is not None else "an unreachable store",
                )
                self.lease_timer = self.send_after(self.lease.times.renew_every, "lease_retry")
                return None
        try:
            self._begin()
        except Exception as exc:
            self._give_back("start_failed")
            raise Exit(start_error_reason(exc), str(exc)) from exc
        return None

    def _begin(self) -> None:
        """Start the job (we hold its lease, if leases are on): open it, spawn its workers."""
        rep = self.rep
        if self.lease is not None:
            self._lease_granted()
        try:
            self.job.start(self.clock.now())
        except Exception as exc:
            log.warning("replication %r failed to start: %s", rep.id, exc)
            raise
        self.started = True
        if self.batched:
            for _ in range(self.job.workers):
                worker = self.spawn_link(ReplicationWorker, self.ref, str(rep.source), str(rep.target), self.store)
                self.idle_workers.append(worker)
        self.checkpoint_timer = self.send_after(self.checkpoint_every, "checkpoint")

    # -- the lease -------------------------------------------------------------------

    def _lease_granted(self) -> None:
        lease = self.lease
        assert lease is not None and lease.fence is not None
        if hasattr(self.job, "fence"):
            self.job.fence = lease.fence
            self.job.fence_store = lease.store_id
        self._arm_lease_timers()

    def _arm_lease_timers(self) -> None:
        lease = self.lease
        assert lease is not None
        for timer in (self.lease_timer, self.deadline_timer):
            if timer is not None:
                self.cancel_timer(timer)
        self.lease_timer = self.send_after(lease.times.renew_every, "lease_renew")
        self.deadline_timer = self.send_after(max(0.0, lease.deadline - lease.clock()), "lease_deadline")

    def _lease_message(self, message: str) -> Any:
        lease = self.lease
        if lease is None:
            return None
        if message == "lease_retry":
            self.lease_timer = None
            if not lease.try_acquire():
                self.lease_timer = self.send_after(lease.times.renew_every, "lease_retry")
                return None
            log.info(
                "replication %r got its lease (token %s)",
                self.rep.id,
                lease.fence.token if lease.fence is not None else "?",
            )
            try:
                self._begin()
            except Exception as exc:
                self._give_back("start_failed")
                return Stop(start_error_reason(exc))
            return self._run() if self.running else None
        if message == "lease_renew":
            me = self.ref
            lease.renew_in_background(lambda ok: me.send(("lease_renewed", ok)))
            self.lease_timer = self.send_after(lease.times.renew_every, "lease_renew")
            return None
        # "lease_deadline"
        self.deadline_timer = None
        return self._lease_expired() if lease.must_stop() else None

    def _lease_renewed(self, ok: bool | None) -> Any:
        """A background renewal's answer: True (the deadline moved), False (lost),
        None (the store did not answer: the deadline stands)."""
        lease = self.lease
        if lease is None:
            return None
        if ok is False:
            log.error("replication %r lost its lease: another node took it over", self.rep.id)
            return Stop(("lease_lost", "taken over"))
        if lease.must_stop():
            return self._lease_expired()
        if self.deadline_timer is not None:
            self.cancel_timer(self.deadline_timer)
        self.deadline_timer = self.send_after(max(0.0, lease.deadline - lease.clock()), "lease_deadline")
        return None

    def _lease_expired(self) -> Stop:
        log.error("replication %r: no lease renewal heard before its deadline; stopping", self.rep.id)
        return Stop(("lease_lost", "deadline passed without a renewal"))

    def _lease_void(self) -> bool:
        """Leases are on and ours is gone (or its deadline passed): do nothing more."""
        return self.lease is not None and self.started and self.lease.must_stop()

    def _give_back(self, reason: str) -> None:
        if self.lease is not None:
            self.lease.release(reason)
            self.lease.close()
            self.lease = None

    # -- driving ---------------------------------------------------------------------

    def _run(self) -> Any:
        if not self.started:  # waiting for the lease: runs once it is granted
            return None
        if self._lease_void():
            return self._lease_expired()
        return self._fill() if self.batched else self._step()

    def _fill(self) -> Any:
        """Hand a batch to every idle worker (the changes manager)."""
        job = self.job
        while self.idle_workers:
            batch = job.next_batch()
            if batch is None:
                break
            worker = self.idle_workers.pop()
            self.busy[worker] = batch.report_seq
            worker.cast(("batch", batch, job.fence_for(job.target)))
        if self.busy:
            self.poll_delay = POLL_MIN
            return None
        # Nothing in flight and nothing new on the source: caught up.
        if not self.continuous:
            return self._finish()
        self._schedule_poll()
        return None

    def _step(self) -> Any:
        if self._lease_void():
            return self._lease_expired()
        result = self.job.step(self.clock.now())
        if result == "progress":
            self.poll_delay = POLL_MIN
            self.ref.send("step")
        elif result == "idle":
            self._schedule_poll()
        elif result == "done":
            self.finished = True
            return Stop("normal")
        else:
            raise ValueError(
                f"{type(self.job).__name__}.step returned {result!r}, expected 'progress', 'idle' or 'done'"
            )
        return None

    def _finish(self) -> Any:
        self.job.finish(self.clock.now())
        self.finished = True
        return Stop("normal")

    def _schedule_poll(self) -> None:
        if self.poll_timer is None:
            self.poll_timer = self.send_after(self.poll_delay, "poll")
            self.poll_delay = min(self.poll_delay * 2, self.poll_max)

    # -- messages --------------------------------------------------------------------

    def handle_info(self, message: Any) -> Any:
        if self._lease_void():  # first thing, whatever the message: a thawed holder may be past its deadline
            return self._lease_expired()
        if type(message) is tuple and len(message) == 2 and message[0] == "lease_renewed":
            return self._lease_renewed(message[1])
        if message in ("lease_retry", "lease_renew", "lease_deadline"):
            return self._lease_message(message)
        if message == "run":
            # The starter monitors the job before sending "run" (see scheduler_sup.start_job).
            if self.running:
                return None
            self.running = True
            return self._run()
        if message == "step":
            return self._step()
        if message == "poll":
            self.poll_timer = None
            return self._run()
        if message == "checkpoint":
            if self._lease_void():
                return self._lease_expired()
            self.job.checkpoint(self.clock.now())
            self.checkpoint_timer = self.send_after(self.checkpoint_every, "checkpoint")
            return None
        if isinstance(message, tuple) and message and message[0] == "batch_done":
            _, worker, seq, stats = message
            if self.busy.pop(worker, None) is None:
                raise ValueError(f"batch done by unknown worker {worker!r}")
            self.job.report_seq_done(seq, stats if isinstance(stats, BatchStats) else None)
            self.idle_workers.append(worker)
            if self._lease_void():
                return self._lease_expired()
            self.job.maybe_checkpoint(self.clock.now())
            return self._fill()
        if isinstance(message, tuple) and message and message[0] == "EXIT":
            _, who, reason = message
            if who is not None and who == self.parent:
                return Stop(reason)
            if reason == "max_backoff" or reason == MAX_BACKOFF:
                # The seed's first EXIT clauses: any linked process giving up
                # on a rate-limited endpoint stops the job with
                # {shutdown, max_backoff}, the reason the scheduler lowers the
                # job's options for (not worker_died, nor ignored as normal).
                log.error("replication %r: max backoff reached by %r", self.rep.id, who)
                return Stop(MAX_BACKOFF)
            if who in self.busy or who in self.idle_workers:
                log.error("replication %r: worker %r died: %r", self.rep.id, who, reason)
                return Stop(("worker_died", repr(who), reason))
            if is_normal_exit(reason):
                return None
            return Stop(("unknown_process_died", repr(who), reason))
        return super().handle_info(message)

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "status":
            status = getattr(self.job, "status", None)
            return status() if status is not None else {"replication_id": str(self.rep.id)}
        if request == "checkpoint":
            return self.job.checkpoint(self.clock.now())
        return super().handle_call(request, from_)

    def terminate(self, reason: Any) -> None:
        for timer in (self.poll_timer, self.checkpoint_timer, self.lease_timer, self.deadline_timer):
            if timer is not None:
                self.cancel_timer(timer)
        for worker in [*self.idle_workers, *self.busy]:
            self.exit(worker, "shutdown")
        try:
            self._wind_down(reason)
        finally:
            self._give_back("completed" if self.finished else "stopped" if is_normal_exit(reason) else "crashed")

    def _wind_down(self, reason: Any) -> None:
        if self.finished or not self.started:
            return
        if is_normal_exit(reason) and reason != MAX_BACKOFF and not self._lease_void():
            # Stopped by the scheduler (through the supervisor): final checkpoint.
            self.job.stop(self.clock.now())
            return
        abort = getattr(self.job, "abort", None)
        if abort is not None:
            abort()
