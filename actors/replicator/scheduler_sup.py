"""``couch_replicator_scheduler_sup``, the job supervisor.

`SchedulerSup` is the seed's job supervisor: ``simple_one_for_one`` over
`SchedulerJobServer`, restart ``temporary`` (a crashed job is not entitled to
an immediate restart: the scheduler decides, after its back-off), shutdown
5 s (the job's final checkpoint).  Only the scheduler starts and stops its
children (`start_job`, `terminate_job`), and it monitors each one.

Placement: every job runs in a host process of its own (``job_host="own"``,
the default).  A job is then as isolated as an Erlang process: a crash, a
runaway worker or a SIGKILL takes down that job and nothing else, its SQLite
handles die with it, and its workers run in parallel with other jobs on
other cores.  A host comes from a fork of the node's zygote, a few
milliseconds, small next to a job's lifetime.  ``job_host=None`` runs jobs
as threads of the supervisor's process (cheapest; for many tiny jobs), and any
other string names one shared host for all of them.

The replicator's tree above this supervisor and the scheduler is in `sup`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors import ActorRef
from supervision import (
    ChildSpec,
    NotFound,
    StartError,
    Supervisor,
    SupFlags,
    start_child,
    terminate_child,
)

from ._names import register_self
from .records import Rep
from .replication import ReplicationJob
from .scheduler_job import SchedulerJobServer

__all__ = [
    "JOB_SHUTDOWN",
    "JobFactory",
    "JobNotRunning",
    "JobStartError",
    "SCHEDULER_SUP",
    "SchedulerSup",
    "start_job",
    "terminate_job",
]

SCHEDULER_SUP = "couch_replicator_scheduler_sup"
#: Seconds a job gets for its final checkpoint before it is killed (seed: 5000 ms).
JOB_SHUTDOWN = 5.0

JobFactory = Callable[[Rep], Any]


class JobStartError(Exception):
    """A job failed to start; ``reason`` is its plain exit reason (e.g. ``db_not_found``)."""

    def __init__(self, reason: Any) -> None:
        super().__init__(f"job failed to start: {reason!r}")
        self.reason = reason


class JobNotRunning(LookupError):
    """`terminate_job` on a job that is no longer a child (it exited by itself)."""


class SchedulerSup(Supervisor):
    """``simple_one_for_one``, ``temporary`` children running `SchedulerJobServer`."""

    def init(
        self,
        job_factory: JobFactory = ReplicationJob,
        job_host: str | None = "own",
        shutdown: float = JOB_SHUTDOWN,
        name: str = SCHEDULER_SUP,
    ) -> tuple[SupFlags, list[ChildSpec]]:
        register_self(self, name)
        spec = ChildSpec(
            "couch_replicator_scheduler_job",
            start=(SchedulerJobServer, (job_factory,)),
            restart="temporary",
            shutdown=shutdown,
            type="worker",
            host=job_host,
        )
        return SupFlags("simple_one_for_one", intensity=10, period=3), [spec]


def start_job(sup: ActorRef, rep: Rep, timeout: float | None = 30.0) -> ActorRef:
    """Start the job for ``rep`` (its ``init`` opens both databases).

    The job then waits for a ``"run"`` message, so that the starter can
    monitor it first; `JobStartError` carries the reason of a failed start.
    """
    try:
        ref = start_child(sup, rep, timeout=timeout)
    except StartError as exc:
        raise JobStartError(exc.reason) from None
    if ref is None:
        raise JobStartError("ignore")
    return ref


def terminate_job(sup: ActorRef, ref: ActorRef, timeout: float | None = 30.0) -> None:
    """Stop a job with ``shutdown`` and wait until it is gone (final checkpoint taken)."""
    try:
        terminate_child(sup, ref, timeout=timeout)
    except NotFound:
        raise JobNotRunning(ref) from None
