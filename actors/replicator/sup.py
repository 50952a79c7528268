"""``couch_replicator_sup``: the replicator's supervision tree.

It stands above both of its children's modules, the job supervisor
(`scheduler_sup`) and the scheduler (`scheduler`, which calls the job
supervisor), so neither of those imports it.

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

from actors import ActorRef, GenServer, Node
from supervision import ChildSpec, SupFlags, Supervisor

from ._names import register_self
from .replication import ReplicationJob
from .scheduler import SchedulerServer
from .scheduler_sup import SCHEDULER_SUP, JobFactory, SchedulerSup

__all__ = ["REPLICATOR_SUP", "ReplicatorSup", "replicator_children", "start_replicator"]

REPLICATOR_SUP = "couch_replicator_sup"


def replicator_children(job_factory: JobFactory = ReplicationJob, job_host: str | None = "own",
                        node_name: str = "nonode@nohost") -> list[ChildSpec]:
    """The tree's children, in start order: the job supervisor, then the scheduler."""
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
