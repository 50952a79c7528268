"""Replications spread over the demo's nodes by the clustered replicator.

The same continuous replications as `Replications` (SQLite files in one
directory every node of this machine can open), but defined the way a
CouchDB cluster defines them: as documents in the ``_replicator`` file
(`put_replication`) that every node's replicator reads (``[replicator]
cluster = true``).  Each node's doc processor runs the jobs it owns
(``sorted(live)[crc32("_replicator/<doc id>") % n]``, upstream's rule),
once membership has been quiet for ``cluster_quiet_period``; a SIGKILLed
node's jobs start on the survivors from their checkpoints, and move back
when it returns as a new incarnation.  The driver only writes the sources
and watches: about once a second it asks every node's doc processor
(`cluster_status`) which jobs it runs and which members it sees, and
counts the moves and any job seen on two nodes at once.

On the PostgreSQL store (``store``: the ``_replicator`` documents, sources,
targets and leases all there) the nodes run a job only while they hold its
lease, and the verdict reads the store's audit of runs: every run of every
job, with its node, token and interval, checked for two runs of one job that
overlap (`overlapping_runs`); any overlap fails the run.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from actors import CallTimeout, Exit, Node
from actors.replicator import cluster_status, overlapping_runs, put_replication, read_runs
from actors.replicator.replicator_db import rep_from_doc
from actors.replicator.scheduler import READER

from .base import Check
from .replication import Replications

__all__ = ["ClusterReplications"]

CALL_TIMEOUT = 5.0


class ClusterReplications(Replications):
    """`Replications` defined in the ``_replicator`` file ``replicator_db``, run by the nodes ``live()`` names."""

    def __init__(
        self, node: Node, directory: str, live: Callable[[], list[str]], replicator_db: str, **kw: Any
    ) -> None:
        super().__init__(node, directory, **kw)
        if self.store is not None:
            replicator_db = self.store  # the store's own _replicator database
        self.live = live
        self.replicator_db = replicator_db
        self.job_ids: dict[str, str] = {}  # replication job id -> document id
        self.placed: dict[str, str] = {}  # document id -> the node last seen running it
        self.moves = 0
        self.overlaps = 0  # a job seen in two nodes' schedulers in one look (not atomic: a move can show)
        self.members: dict[str, list[str]] = {}  # node -> the members its replicator sees

    def add_all(self) -> None:
        """Write one replication document per job; the nodes' doc processors do the rest."""
        for rep in self.reps:
            options = {k: v for k, v in rep.options.items() if k != "continuous"}
            body = {"source": rep.source, "target": rep.target, "continuous": True, **options}
            self.job_ids[rep_from_doc(rep.id, body).id] = rep.id
            put_replication(self.replicator_db, rep.id, rep.source, rep.target, continuous=True, **options)

    def readd_missing(self) -> int:
        """Nothing to add (the doc processors own that); look where each job runs now."""
        self._look()
        return 0

    def settle(self, deadline: float) -> bool:
        """Wait (bounded) until every target has caught up and then until the
        placement has settled: every node sees the same members and calls
        them stable, and runs exactly the jobs it owns, each job on one node.
        Right after a node returns its jobs are on their way back to it (a
        membership change waits ``cluster_quiet_period`` before jobs move),
        and the summary's placement would be a moment of that move, not where
        the cluster runs its jobs."""
        caught_up = super().settle(deadline)
        while time.monotonic() < deadline:
            seen, members, settled = self._look()
            views = {tuple(m) for m in members.values()}
            if settled and len(views) == 1 and len(seen) == len(self.job_ids):
                break
            time.sleep(0.3)  # polling the nodes' schedulers until a deadline, not synchronising actors
        return caught_up

    def _look(self) -> tuple[dict[str, list[str]], dict[str, list[str]], bool]:
        """Ask every live node which jobs it runs and whom it sees; noted in the
        counts; returns (document id -> nodes running it, node -> members it
        sees, whether every node answered stable and runs exactly what it owns)."""
        seen: dict[str, list[str]] = {}
        members: dict[str, list[str]] = {}
        settled = True
        ours = set(self.job_ids)
        for n in self.live():
            try:
                status = cluster_status(self.node, node=n, timeout=CALL_TIMEOUT)
            except (Exit, CallTimeout):
                settled = False
                continue
            members[n] = sorted(status.get("live") or [])
            running = {str(j) for j in status.get("running") or []} & ours
            owned = {str(j) for j in status.get("owned") or []} & ours
            settled = settled and bool(status.get("stable")) and running == owned
            for job_id in running:
                seen.setdefault(self.job_ids[job_id], []).append(n)
        with self.lock:
            self.members.update(members)
            for doc_id, where in seen.items():
                if len(where) > 1:
                    self.overlaps += 1
                before = self.placed.get(doc_id)
                if before is not None and before not in where:
                    self.moves += 1
                self.placed[doc_id] = where[0]
        settled = settled and all(len(where) == 1 for where in seen.values())
        return seen, members, settled

    def running(self) -> tuple[int, int]:
        running = total = 0
        for n in self.live():
            rows = self.node.whereis(READER, node=n, timeout=1.0).call(("jobs",), timeout=1.0)
            running += sum(1 for j in rows if j.get("pid") is not None)
            total += len(rows)
        return running, total

    def per_node(self) -> Counter:
        with self.lock:
            return Counter(self.placed.values())

    def check(self) -> Check:
        self.readd_missing()
        gaps = self.missing()
        c = Check("replicator")
        total = sum(len(e) for e in self.expected)
        spread = ", ".join(f"{n} {k}" for n, k in sorted(self.per_node().items())) or "none"
        with self.lock:
            views = {n: ",".join(m) for n, m in sorted(self.members.items())}
            moves, overlaps = self.moves, self.overlaps
        agreed = len(set(views.values())) == 1
        where = "the _replicator database of the PostgreSQL store" if self.store else "the _replicator file"
        c.lines.append(
            f"replicator: {self.n_jobs} continuous jobs from {where}, run by the clustered "
            f"replicator of every node (each on its owner; last placement: {spread}); {moves} moves to "
            f"another node seen after a node was lost or came back; {overlaps} looks saw a job in two "
            f"nodes' schedulers (nodes are asked one after another: a move between two asks counts)"
        )
        c.lines.append(
            "  members seen: "
            + (
                "all agree on " + next(iter(views.values()))
                if agreed and views
                else "; ".join(f"{n} sees {v}" for n, v in views.items()) or "?"
            )
        )
        c.lines.append(
            f"  {self.writes} writes, {total} documents: {total - sum(gaps)} present in their target "
            f"at the latest revision, {sum(gaps)} missing"
        )
        c.lost = sum(gaps)
        c.counted = f"{total} replicated documents ({self.writes} acknowledged source writes)"
        if self.store is not None:
            self._audit(c)
        return c

    def _audit(self, c: Check) -> None:
        """The store's audit of runs: no job may have run on two nodes at once."""
        runs = [r for r in read_runs(self.store) if r.job in self.job_ids]
        bad = overlapping_runs(runs)
        per_job: Counter = Counter(r.job for r in runs)
        handovers = sum(
            1
            for job in per_job
            for a, b in zip(
                *(lambda rs: (rs, rs[1:]))(sorted((r for r in runs if r.job == job), key=lambda r: r.start))
            )
            if a.node != b.node
        )
        nodes = Counter(r.node for r in runs)
        c.lines.append(
            f"  leases (audit in the store): {len(runs)} runs of {len(per_job)} jobs "
            f"(by node: {', '.join(f'{n} {k}' for n, k in sorted(nodes.items())) or 'none'}), "
            f"{handovers} handed to another node, highest fencing token "
            f"{max((r.token for r in runs), default=0)}; overlapping runs of one job: {len(bad)} "
            + ("-- no replication job ran on two nodes at once" if not bad else "-- A JOB RAN TWICE")
        )
        for x, y in bad[:5]:
            c.lines.append(
                f"    {x.job[:12]}: {x.node} token {x.token} [{x.start:.3f}, {x.end:.3f}) and "
                f"{y.node} token {y.token} [{y.start:.3f}, {y.end:.3f})"
            )
        c.lost += len(bad)
