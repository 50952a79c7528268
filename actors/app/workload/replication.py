"""Continuous replications rotating through the scheduler while their sources grow.

``jobs`` continuous replications (SQLite source -> SQLite target) are added
to the scheduler, more than ``[replicator] max_jobs``, so the scheduler
rotates them every ``interval``.  Meanwhile the driver writes new documents
and new revisions of existing ones into the sources, remembering each
document's latest revision.

The replicator tree restarts ``one_for_all`` when its scheduler dies and
comes back empty; as CouchDB's document processor does, the owner of the
jobs adds them again -- the driver compares the scheduler's job list with
its own every second and re-adds what is missing (counted).  At the end
every document must be in its target at its latest revision.

With ``store`` (a PostgreSQL URL, ``[replicator] store``) the sources and
targets are databases of that store, named ``source<i>``/``target<i>``,
instead of files in ``directory``.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from actors import CallTimeout, Exit, Node
from actors.replicator import DatabaseNotFound, Rep, open_db
from actors.replicator import scheduler as sched

from .base import Check, Driver

__all__ = ["Replications"]


class Replications(Driver):
    name = "replication-writer"

    def __init__(
        self,
        node: Node,
        directory: str,
        *,
        jobs: int = 8,
        initial_docs: int = 20,
        period: float = 0.05,
        readd_every: float = 1.0,
        seed: int | None = None,
        store: str | None = None,
    ) -> None:
        super().__init__(period)
        self.node = node
        self.directory = directory
        self.store = store
        self.n_jobs = jobs
        self.initial_docs = initial_docs
        self.readd_every = readd_every
        self.rng = random.Random(seed)
        self.expected: list[dict[str, str]] = [{} for _ in range(jobs)]
        self.sources: list[Any] = []
        self.reps: list[Any] = []
        self.readds = 0
        self.writes = 0
        self._last_readd = 0.0
        self._doc_no = 0

    def setup(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        for i in range(self.n_jobs):
            source, target = self._names(i)
            self.sources.append(open_db(source, store=self.store, create=True))
            for _ in range(self.initial_docs):
                self._write(i)
            self.reps.append(
                Rep(
                    id=f"repl{i}",
                    source=source,
                    target=target,
                    options={
                        "continuous": True,
                        "create_target": True,
                        "worker_batch_size": 25,
                        "worker_processes": 2,
                        "checkpoint_interval": 500,
                        "changes_poll_interval": 200,
                    },
                    db_name="_replicator",
                )
            )
        self.add_all()
        self._last_readd = time.monotonic()

    def _names(self, i: int) -> tuple[str, str]:
        """Job ``i``'s source and target: names in the store, or file paths."""
        if self.store is not None:
            return f"source{i}", f"target{i}"
        return os.path.join(self.directory, f"source{i}.db"), os.path.join(self.directory, f"target{i}.db")

    def add_all(self) -> None:
        """Give every job to the scheduler (subclasses place them on other nodes)."""

        for rep in self.reps:
            sched.add_job(self.node, rep)

    def _write(self, i: int) -> None:
        docs = self.expected[i]
        if docs and self.rng.random() < 0.25:
            doc_id = self.rng.choice(list(docs))
            rev = self.sources[i].put(doc_id, {"v": self.rng.random()}, rev=docs[doc_id])
        else:
            self._doc_no += 1
            doc_id = f"doc{self._doc_no:06d}"
            rev = self.sources[i].put(doc_id, {"n": self._doc_no})
        with self.lock:
            docs[doc_id] = rev
            self.writes += 1

    def tick(self, index: int) -> None:
        self._write(self.rng.randrange(self.n_jobs))
        if time.monotonic() - self._last_readd >= self.readd_every:
            self._last_readd = time.monotonic()
            self.readd_missing()

    def readd_missing(self) -> int:
        """Add again the jobs the scheduler no longer has (it restarted empty)."""

        try:
            known = {j["id"] for j in sched.jobs(self.node, timeout=5.0)}
        except (Exit, CallTimeout):
            return 0
        added = 0
        for rep in self.reps:
            if rep.id not in known:
                try:
                    sched.add_job(self.node, rep)
                except (Exit, CallTimeout):
                    break
                added += 1
        with self.lock:
            self.readds += added
        return added

    def missing(self) -> list[int]:
        """Per job, how many documents its target lacks (or holds at an older revision)."""
        return [len(gone) for gone in self.missing_docs()]

    def missing_docs(self) -> list[list[str]]:
        """Per job, the documents its target lacks or holds at an older revision: "id want rev, has rev"."""

        out = []
        for i, rep in enumerate(self.reps):
            with self.lock:
                want = dict(self.expected[i])
            try:
                with open_db(rep.target, store=self.store) as target:
                    have = {d.id: d.rev for d in target.open_docs(list(want))}
            except DatabaseNotFound:
                have = {}
            out.append(
                [
                    f"{doc_id} want {rev}, has {have.get(doc_id)}"
                    for doc_id, rev in sorted(want.items())
                    if have.get(doc_id) != rev
                ]
            )
        return out

    def settle(self, deadline: float) -> bool:
        """Wait (bounded) until every target has caught up, re-adding lost jobs as we go."""
        while True:
            if sum(self.missing()) == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            self.readd_missing()
            time.sleep(0.3)  # polling targets on disk until a deadline, not synchronising actors

    def running(self) -> tuple[int, int]:
        rows = sched.jobs(self.node, timeout=1.0)
        return sum(1 for j in rows if j.get("pid") is not None), len(rows)

    def check(self) -> Check:
        docs = self.missing_docs()
        gaps = [len(gone) for gone in docs]
        c = Check("replicator")
        total = sum(len(e) for e in self.expected)
        try:
            stats = self.node.stats()["counters"]
        except Exception:
            stats = {}
        c.lines.append(
            f"replicator: {self.n_jobs} continuous jobs rotating through the scheduler "
            f"({stats.get('couch_replicator.jobs.starts', 0)} starts, "
            f"{stats.get('couch_replicator.jobs.stops', 0)} stops, "
            f"{stats.get('couch_replicator.jobs.crashes', 0)} crashes); "
            f"{self.readds} re-added after a scheduler restart"
        )
        c.lines.append(
            f"  {self.writes} writes, {total} documents: {total - sum(gaps)} present in their target "
            f"at the latest revision, {sum(gaps)} missing"
        )
        c.lost = sum(gaps)
        c.counted = f"{total} replicated documents ({self.writes} acknowledged source writes)"
        for rep, gone in zip(self.reps, docs):
            if gone:
                c.lines.append(f"  LOST in {rep.id} ({rep.target}): {len(gone)} documents, e.g. " + "; ".join(gone[:8]))
        return c

    def close(self) -> None:
        for store in self.sources:
            store.close()

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"writes": self.writes, "readds": self.readds}
