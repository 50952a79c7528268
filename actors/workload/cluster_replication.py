"""Replications spread over the demo's nodes, placed by the controller by ownership.

The same continuous replications as `Replications` (SQLite files in one
directory every node of this machine can open), but each job runs in the
scheduler of its *owner*: ``clustering.owner("_replicator/<job id>",
live nodes)``, upstream's rule.  About once a second the controller
reconciles: it reads every live node's job table, adds each job its owner
lacks and removes it from any other node.  A SIGKILLed node's jobs thus
move to the survivors within a second (from their checkpoints), and move
back when it returns as a new incarnation.

This is the controller's view of the clustered replicator: the nodes' own
schedulers do not yet claim jobs by ownership themselves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from actors import CallTimeout, Exit, Node
from actors.replicator.clustering import job_key, owner
from actors.replicator.scheduler import READER, SCHEDULER

from .base import Check
from .replication import Replications

__all__ = ["ClusterReplications"]

CALL_TIMEOUT = 5.0


class ClusterReplications(Replications):
    """`Replications` whose jobs live on the nodes ``live()`` names, each on its owner."""

    def __init__(self, node: Node, directory: str, live: Callable[[], list[str]], **kw: Any) -> None:
        super().__init__(node, directory, **kw)
        self.live = live
        self.moves = 0
        self.placed: dict[str, str] = {}  # job id -> the node it was last given to

    def _ref(self, node: str, name: str) -> Any:
        ref = self.node.whereis(name, node=node, timeout=CALL_TIMEOUT)
        if ref is None:
            raise Exit("noproc", f"no {name} on {node}")
        return ref

    def _tables(self, live: list[str]) -> dict[str, set[str] | None]:
        """Per live node the ids of the jobs its scheduler has (None: could not ask)."""
        out: dict[str, set[str] | None] = {}
        for n in live:
            try:
                out[n] = {str(j["id"]) for j in self._ref(n, READER).call(("jobs",), timeout=CALL_TIMEOUT)}
            except (Exit, CallTimeout):
                out[n] = None
        return out

    def add_all(self) -> None:
        self.readd_missing()

    def readd_missing(self) -> int:
        """Reconcile: each job on its owner among the live nodes, and nowhere else."""
        live = self.live()
        if not live:
            return 0
        tables = self._tables(live)
        added = 0
        for rep in self.reps:
            want = owner(job_key("_replicator", rep.id) or rep.id, live)
            have = tables.get(want)
            if have is not None and rep.id not in have:
                try:
                    self._ref(want, SCHEDULER).call(("add_job", rep), timeout=CALL_TIMEOUT)
                except (Exit, CallTimeout):
                    continue
                added += 1
                with self.lock:
                    if rep.id in self.placed and self.placed[rep.id] != want:
                        self.moves += 1
                    self.placed[rep.id] = want
            for n, jobs in tables.items():
                if n != want and jobs is not None and rep.id in jobs:
                    try:
                        self._ref(n, SCHEDULER).call(("remove_job", rep.id), timeout=CALL_TIMEOUT)
                    except (Exit, CallTimeout):
                        pass
        with self.lock:
            self.readds += added
        return added

    def running(self) -> tuple[int, int]:
        running = total = 0
        for n in self.live():
            rows = self._ref(n, READER).call(("jobs",), timeout=1.0)
            running += sum(1 for j in rows if j.get("pid") is not None)
            total += len(rows)
        return running, total

    def per_node(self) -> Counter:
        with self.lock:
            return Counter(self.placed.values())

    def check(self) -> Check:
        gaps = self.missing()
        c = Check("replicator")
        total = sum(len(e) for e in self.expected)
        spread = ", ".join(f"{n} {k}" for n, k in sorted(self.per_node().items())) or "none"
        c.lines.append(f"replicator: {self.n_jobs} continuous jobs spread over the nodes by ownership "
                       f"(last placement: {spread}); {self.readds} placements, {self.moves} moves to another "
                       f"node after a node was lost or came back")
        c.lines.append(f"  {self.writes} writes, {total} documents: {total - sum(gaps)} present in their target "
                       f"at the latest revision, {sum(gaps)} missing")
        c.lost = sum(gaps)
        c.counted = f"{total} replicated documents ({self.writes} acknowledged source writes)"
        return c
