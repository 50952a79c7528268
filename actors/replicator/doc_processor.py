"""``couch_replicator_doc_processor``: replication documents in, this node's jobs out.

Upstream the doc processor reads every ``_replicator`` database's changes,
turns documents into jobs, and adds to the local scheduler only the jobs
this node owns (``couch_replicator_clustering:owner/2``), re-checking
ownership whenever the cluster turns stable.  Here it polls the
``_replicator`` file (`ReplicatorDb`) every ``doc_poll_interval`` seconds,
gets `ClusterView` updates from the clustering server, and after each one
carries out `clustering.plan`:

1. stop the jobs this node must give up (``remove_job``: the scheduler stops
   the job, which takes a final checkpoint), then report the smaller running
   set to the cluster, so the new owner only starts after the stop;
2. report the larger running set (the claim), then add the jobs it now owns
   to the scheduler.

The jobs "in this node's scheduler" count as running here whether or not the
scheduler has a slot for them right now: a job only ever sits in one node's
scheduler.  A job whose document is deleted is removed at once, stable or
not; while the cluster is unstable nothing is claimed or released.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any

from actors import ActorRef, Exit, GenServer, Node

from . import _names, scheduler
from .cluster_state import ClusterView
from .clustering import job_key, owner, plan
from .clustering_server import CLUSTERING
from .records import Rep
from .replicator_db import DB_NAME, BadReplicationDoc, ReplicatorDb, rep_from_doc

__all__ = ["DOC_PROCESSOR", "DocProcessor", "cluster_status"]

log = logging.getLogger("actors.replicator.doc_processor")

DOC_PROCESSOR = "couch_replicator_doc_processor"


class DocProcessor(GenServer):
    """This node's share of the replications in the ``_replicator`` file."""

    def init(self, me: str, db_path: str, poll_interval: float = 1.0) -> None:
        _names.register_self(self, DOC_PROCESSOR)
        self.me = me
        self.db = ReplicatorDb(db_path)
        self.poll_interval = float(poll_interval)
        self.docs: dict[str, Rep] = {}
        self.bad: dict[str, str] = {}
        self.local: dict[Hashable, Rep] = {}
        self.cluster = self.whereis(CLUSTERING)
        if self.cluster is None:
            raise Exit(("noproc", CLUSTERING), "the clustering server is not running")
        self.view: ClusterView = self.cluster.call(("subscribe", self.ref))
        self.reachable = True
        self.timer = self.send_after(0.0, "poll")

    # -- events --------------------------------------------------------------------

    def handle_info(self, message: Any) -> None:
        if message == "poll":
            self._poll()
            self._act()
            self.timer = self.send_after(self.poll_interval, "poll")
            return None
        if isinstance(message, tuple) and len(message) == 2 and message[0] == "couch_replicator_clustering":
            self.view = message[1]
            self._act()
            return None
        return super().handle_info(message)

    def handle_call(self, request: Any, from_: Any) -> Any:
        op = request[0] if isinstance(request, tuple) else request
        if op == "status":
            return self._status()
        if op == "poll":  # read the _replicator file now (tests, operators)
            self._poll()
            self._act()
            return "ok"
        raise ValueError(f"unknown doc processor request {request!r}")

    def terminate(self, reason: Any) -> None:
        self.db.close()

    # -- logic ---------------------------------------------------------------------

    def _poll(self) -> None:
        changed = self.db.poll()
        reachable = self.db.unreachable is None
        if reachable != self.reachable:
            # A node cut off from the shared store cannot run jobs (no lease): it
            # withdraws from the members so the others take its jobs over.
            self.reachable = reachable
            self.cluster.call(("store_reachable", reachable))
        for doc_id, body in changed.items():
            self.docs.pop(doc_id, None)
            self.bad.pop(doc_id, None)
            if body is None:
                continue
            try:
                self.docs[doc_id] = rep_from_doc(doc_id, body, DB_NAME)
            except BadReplicationDoc as exc:
                self.bad[doc_id] = str(exc)
                log.warning("%s: %s", self.me, exc)

    def _jobs(self) -> dict[Hashable, Rep]:
        """Job id -> Rep; two documents describing the same replication give one job
        (the lower document id's, on every node alike)."""
        jobs: dict[Hashable, Rep] = {}
        for doc_id in sorted(self.docs):
            rep = self.docs[doc_id]
            jobs.setdefault(rep.id, rep)
        return jobs

    def _act(self) -> None:
        jobs = self._jobs()
        keys = {job_id: job_key(rep.db_name, rep.doc_id) for job_id, rep in jobs.items()}
        view = self.view
        decided = plan(keys, self.local.keys(), self.me, view.live, view.stable, view.elsewhere)
        if decided.stop:
            for job_id in sorted(decided.stop, key=str):
                scheduler.remove_job(self, job_id)
                del self.local[job_id]
                log.info("%s: released %s", self.me, job_id)
            self.cluster.call(("running", tuple(self.local)))
        if decided.start:
            for job_id in decided.start:
                self.local[job_id] = jobs[job_id]
            self.cluster.call(("running", tuple(self.local)))
            for job_id in sorted(decided.start, key=str):
                scheduler.add_job(self, jobs[job_id])
                log.info("%s: runs %s (%s)", self.me, job_id, jobs[job_id].doc_id)
        for job_id, rep in list(self.local.items()):
            if job_id in jobs and jobs[job_id] != rep and job_id not in decided.start:
                self.local[job_id] = jobs[job_id]  # same replication, other tuning options
                scheduler.add_job(self, jobs[job_id])

    def _status(self) -> dict[str, Any]:
        jobs = self._jobs()
        view = self.view
        owners = {job_id: owner(job_key(rep.db_name, rep.doc_id) or "", view.live) for job_id, rep in jobs.items()}
        return {
            "node": self.me,
            "live": list(view.live),
            "stable": view.stable,
            "quiet": view.quiet,
            "disagree": list(view.disagree),
            "docs": {doc_id: rep.id for doc_id, rep in self.docs.items()},
            "bad_docs": dict(self.bad),
            "owned": sorted((j for j, node in owners.items() if node == self.me), key=str),
            "running": sorted(self.local, key=str),
            "elsewhere": dict(view.elsewhere),
            "store_reachable": self.reachable,
        }


def cluster_status(where: Node | GenServer | None, node: str | None = None, timeout: float | None = 10.0) -> dict:
    """The doc processor's status on this node (or on the connected ``node``):
    ``node``, ``live`` (the members it sees), ``stable``, ``running`` (job ids
    in its scheduler), ``owned``, ``elsewhere`` (job id -> member running it),
    ``docs`` (doc id -> job id), ``bad_docs``."""
    ref: ActorRef | None
    if where is None:
        ref = _names.whereis(DOC_PROCESSOR)
    elif isinstance(where, (Node, GenServer)):
        ref = where.whereis(DOC_PROCESSOR, node=node) if node is not None else where.whereis(DOC_PROCESSOR)
    else:
        raise TypeError(f"expected a Node, an actor or None, got {where!r}")
    if ref is None:
        raise Exit("noproc", f"no doc processor on {node or 'this node'}")
    return ref.call(("status",), timeout=timeout)
