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

With ``[replicator] cluster = true`` (`ClusterOptions`) the tree has two more
children and becomes the clustered replicator (docs/replicator.md, "Across
nodes"): the clustering server first, so it is the last to stop (the other
members see this node leave only after its jobs stopped), and the doc
processor last, since it drives the scheduler.  Still ``one_for_all``: a
doc processor that restarts must find an empty scheduler, not jobs it no
longer knows it claimed.
"""

from __future__ import annotations

from actors import ActorRef, GenServer, Node
from actors import config as config_module
from supervision import ChildSpec, Supervisor, SupFlags

from . import _names
from ._names import register_self
from .cluster_options import ClusterOptions
from .clustering_server import CLUSTERING, ClusteringServer
from .doc_processor import DOC_PROCESSOR, DocProcessor
from .replication import ReplicationJob
from .scheduler import SchedulerServer
from .scheduler_sup import SCHEDULER_SUP, JobFactory, SchedulerSup

__all__ = ["REPLICATOR_SUP", "ReplicatorSup", "replicator_children", "start_replicator"]

REPLICATOR_SUP = "couch_replicator_sup"


def replicator_children(
    job_factory: JobFactory = ReplicationJob,
    job_host: str | None = "own",
    node_name: str = "nonode@nohost",
    cluster: ClusterOptions | None = None,
) -> list[ChildSpec]:
    """The tree's children, in start order: the job supervisor, then the scheduler
    (and, clustered, the clustering server before them and the doc processor after)."""
    children = [
        ChildSpec(SCHEDULER_SUP, start=(SchedulerSup, (job_factory, job_host)), type="supervisor"),
        ChildSpec("couch_replicator_scheduler", start=(SchedulerServer, (SCHEDULER_SUP, node_name)), shutdown=30.0),
    ]
    if cluster is None or not cluster.enabled:
        return children
    return [
        ChildSpec(CLUSTERING, start=(ClusteringServer, (node_name,)), shutdown=10.0),
        *children,
        ChildSpec(
            DOC_PROCESSOR,
            start=(DocProcessor, (node_name, cluster.replicator_db, cluster.doc_poll_interval)),
            shutdown=30.0,
        ),
    ]


class ReplicatorSup(Supervisor):
    """``couch_replicator_sup``: ``one_for_all`` over the job supervisor and the scheduler."""

    def init(
        self,
        job_factory: JobFactory = ReplicationJob,
        job_host: str | None = "own",
        node_name: str = "nonode@nohost",
        cluster: ClusterOptions | None = None,
    ) -> tuple[SupFlags, list[ChildSpec]]:
        register_self(self, REPLICATOR_SUP)
        if cluster is None:  # started by a tree that passes no options (couch_sup): the config decides
            cluster = ClusterOptions.from_config(config_module.current())
        if cluster.enabled and node_name == "nonode@nohost":
            node_name = _names.node_name() or node_name
        return (
            SupFlags("one_for_all", intensity=10, period=60),
            replicator_children(job_factory, job_host, node_name, cluster),
        )


def start_replicator(
    node_or_actor: Node | GenServer,
    job_factory: JobFactory = ReplicationJob,
    *,
    job_host: str | None = "own",
    host: str | None = None,
    node_name: str | None = None,
    cluster: ClusterOptions | bool | None = None,
    replicator_db: str | None = None,
    doc_poll_interval: float | None = None,
) -> ActorRef:
    """Start the replicator tree; returns the ``couch_replicator_sup`` ref.

    ``host`` places the tree (scheduler, job supervisor, reader) as `Node.spawn`
    does; ``job_host`` places the jobs (see the module docstring).  A host
    program's own job class goes in ``job_factory`` (see `SchedulerJob`).
    From inside an actor, pass ``self``: the tree is then linked to it.

    Clustered (``cluster=True``, or ``[replicator] cluster = true``): this node
    runs its share of the replications in the ``_replicator`` file
    ``replicator_db`` (or ``[replicator] replicator_db``); ``node_name``
    defaults to the `Node`'s name and must be given from inside an actor.
    """
    if isinstance(cluster, ClusterOptions):
        options = cluster
    else:
        cfg = node_or_actor.config if isinstance(node_or_actor, Node) else config_module.current()
        options = ClusterOptions.from_config(cfg)
    if isinstance(cluster, bool) or replicator_db is not None or doc_poll_interval is not None:
        options = ClusterOptions(
            options.enabled if cluster is None else bool(cluster),
            replicator_db if replicator_db is not None else options.replicator_db,
            doc_poll_interval if doc_poll_interval is not None else options.doc_poll_interval,
        )
    if node_name is None:
        node_name = (node_or_actor.name if isinstance(node_or_actor, Node) else None) or "nonode@nohost"
    if options.enabled and node_name == "nonode@nohost":
        raise ValueError("the clustered replicator needs a distributed node (Node(name=..., listen=...)) or node_name=")
    args = (job_factory, job_host, node_name, options)
    if isinstance(node_or_actor, Node):
        return node_or_actor.spawn(ReplicatorSup, *args, name=REPLICATOR_SUP, host=host)
    if isinstance(node_or_actor, GenServer):
        return node_or_actor.spawn_link(ReplicatorSup, *args, name=REPLICATOR_SUP, host=host)
    raise TypeError(f"start_replicator needs a Node or an actor, got {node_or_actor!r}")
