"""``couch_replicator_scheduler_sup`` and the replicator's supervision tree.

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

The tree (`ReplicatorSup`, ``couch_replicator_sup``) is ``one_for_all`` over
the job supervisor and then the scheduler, both in the tree's own process.
One-for-all because the two only make sense together: if the scheduler dies,
its table of which job runs where is gone, and the jobs still running under
the job supervisor would run unscheduled (and could be started a second
time); if the job supervisor dies, every pid in the table is stale.
Restarting both gives a clean, empty scheduler; the owner of the jobs (the
host program) adds them again, as CouchDB's document processor does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors import ActorRef, GenServer, Node
from supervision import (
    ChildSpec,
    NotFound,
    StartError,
    SupFlags,
    Supervisor,
    start_child,
    terminate_child,
)

from ._names import register_self
from .records import Rep
from .replication import ReplicationJob
from .scheduler_job import SchedulerJobServer

__all__ = [
    "JOB_SHUTDOWN",
    "JobNotRunning",
    "JobStartError",
    "REPLICATOR_SUP",
    "ReplicatorSup",
    "SCHEDULER_SUP",
    "SchedulerSup",
    "replicator_children",
    "start_job",
    "start_replicator",
    "terminate_job",
]

SCHEDULER_SUP = "couch_replicator_scheduler_sup"
REPLICATOR_SUP = "couch_replicator_sup"
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

    def init(self, job_factory: JobFactory = ReplicationJob, job_host: str | None = "own",
             shutdown: float = JOB_SHUTDOWN, name: str = SCHEDULER_SUP) -> tuple[SupFlags, list[ChildSpec]]:
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


def replicator_children(job_factory: JobFactory = ReplicationJob, job_host: str | None = "own",
                        node_name: str = "nonode@nohost") -> list[ChildSpec]:
    """The tree's children, in start order: the job supervisor, then the scheduler."""
    from .scheduler import SchedulerServer

    return [
        ChildSpec(SCHEDULER_SUP, start=(SchedulerSup, (job_factory, job_host)), type="supervisor"),
        ChildSpec("couch_replicator_scheduler", start=(SchedulerServer, (SCHEDULER_SUP, node_name)),
                  shutdown=30.0),
    ]


class ReplicatorSup(Supervisor):
    """``couch_replicator_sup``: ``one_for_all`` over the job supervisor and the scheduler."""

    def init(self, job_factory: JobFactory = ReplicationJob, job_host: str | None = "own",
             node_name: str = "nonode@nohost") -> tuple[SupFlags, list[ChildSpec]]:
        register_self(self, REPLICATOR_SUP)
        return (SupFlags("one_for_all", intensity=10, period=60),
                replicator_children(job_factory, job_host, node_name))


def start_replicator(node_or_actor: Node | GenServer, job_factory: JobFactory = ReplicationJob, *,
                     job_host: str | None = "own", host: str | None = None,
                     node_name: str = "nonode@nohost") -> ActorRef:
    """Start the replicator tree; returns the ``couch_replicator_sup`` ref.

    ``host`` places the tree (scheduler, job supervisor, reader) as `Node.spawn`
    does; ``job_host`` places the jobs (see the module docstring).  A host
    program's own job class goes in ``job_factory`` (see `SchedulerJob`).
    From inside an actor, pass ``self``: the tree is then linked to it.
    """
    args = (job_factory, job_host, node_name)
    if isinstance(node_or_actor, Node):
        return node_or_actor.spawn(ReplicatorSup, *args, name=REPLICATOR_SUP, host=host)
    if isinstance(node_or_actor, GenServer):
        return node_or_actor.spawn_link(ReplicatorSup, *args, name=REPLICATOR_SUP, host=host)
    raise TypeError(f"start_replicator needs a Node or an actor, got {node_or_actor!r}")
