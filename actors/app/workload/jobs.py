"""couch_jobs workers in several host processes, and the exactly-once check.

The host program adds jobs at a steady rate.  `JobWorker` actors, each in a
host process of its own (supervised by the workload tree), accept them and
finish them; each finish writes a row to ``demo_finished`` *in the same
SQLite transaction* as the finish, so a row exists if and only if the
finish committed.  A worker killed while it holds a job never commits; the
activity monitor gives the job back after the type's timeout and another
worker finishes it.  A worker whose lock was taken away gets `Halt` and its
transaction (row included) rolls back.  At the end every job added must be
``finished`` with exactly one row.

A worker handles one job per message and casts itself the next one, so a
kill or a shutdown takes effect between two jobs, and its ``accept`` waits
at most ``accept_timeout``.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import actors.couch_jobs as couch_jobs
from actors import Continue, GenServer, Node
from actors import stats as _stats
from actors.couch_jobs import Halt, NotFound, force_check_types, process
from supervision import ChildSpec

from .base import Check, Driver, wait_until

__all__ = ["JOB_TYPE", "JobWorker", "JobsDriver", "worker_specs"]

JOB_TYPE = "demo_job"
LOG_TABLE = "demo_finished"
_SHOWN = 20  # lost jobs described one by one in a failure's report


class JobWorker(GenServer):
    """Accepts and finishes ``job_type`` jobs, one per message, in whatever process it runs."""

    def init(self, job_type: Any, worker_no: int, accept_timeout: float = 0.5) -> Any:
        self.jobs = process.use(self)
        self.type = job_type
        self.no = worker_no
        self.accept_timeout = accept_timeout
        self.done = 0
        return Continue("work")

    def handle_continue(self, arg: Any) -> None:
        self._work()

    def handle_cast(self, request: Any) -> None:
        if request == "work":
            self._work()
        else:
            raise ValueError(f"JobWorker: unknown cast {request!r}")

    def _work(self) -> None:
        try:
            job, data = self.jobs.accept(self.type, timeout=self.accept_timeout)
        except NotFound:
            self.ref.cast("work")
            return
        digest = hashlib.sha256(job.id.encode() * 512).hexdigest()  # the "work"
        try:
            with self.jobs.transaction() as tx:
                p = getattr(tx, "param", "?")  # "%s" on PostgreSQL
                tx.execute(
                    f"INSERT INTO {LOG_TABLE} (job_id, worker, pid) VALUES ({p}, {p}, {p})",
                    (job.id, self.no, os.getpid()),
                )
                self.jobs.finish(tx, job, {**data, "by": self.no, "digest": digest[:8]})
            self.done += 1
            _stats.current().increment("demo.jobs.finished")
        except Halt:
            _stats.current().increment("demo.jobs.halted")
        self.ref.cast("work")

    def status(self) -> dict[str, Any]:
        return {"done": self.done}


def worker_specs(count: int, job_type: Any = JOB_TYPE) -> list[Any]:
    """One `JobWorker` per host process ``jobs<i>``."""
    return [ChildSpec(f"job_worker_{i}", (JobWorker, (job_type, i)), host=f"jobs{i}") for i in range(count)]


class JobsDriver(Driver):
    """Adds ``batch`` jobs every ``period`` seconds from the host program."""

    name = "jobs-adder"

    def __init__(
        self,
        node: Node,
        *,
        batch: int = 2,
        period: float = 0.1,
        type_timeout: float = 2.0,
        job_type: Any = JOB_TYPE,
        group: Callable[[int], str] | None = None,
    ) -> None:
        super().__init__(period)
        #: worker number -> where it runs (a node name), for a per-node count of finishes
        self.group = group
        self.node = node
        self.batch = batch
        self.type = job_type
        self.type_timeout = type_timeout
        self.added: list[str] = []
        #: job id -> seconds after the first tick when it was added (named in a failure's report)
        self.added_at: dict[str, float] = {}
        self._t0: float | None = None
        self._next = 0

    def setup(self) -> None:
        couch_jobs.set_type_timeout(self.type, self.type_timeout)
        with couch_jobs.transaction() as tx:
            tx.execute(
                f"CREATE TABLE IF NOT EXISTS {LOG_TABLE} "
                "(job_id TEXT NOT NULL, worker INTEGER NOT NULL, pid INTEGER NOT NULL)"
            )
        force_check_types()

    def tick(self, index: int) -> None:
        ids = [f"job-{self._next + k:06d}" for k in range(self.batch)]
        with couch_jobs.transaction() as tx:
            for n, job_id in enumerate(ids):
                couch_jobs.add(tx, self.type, job_id, {"n": self._next + n})
        self._next += self.batch
        now = time.monotonic()
        with self.lock:
            if self._t0 is None:
                self._t0 = now
            self.added.extend(ids)
            for job_id in ids:
                self.added_at[job_id] = now - self._t0

    def states(self) -> Counter:
        return Counter(str(state) for _t, _id, state, _d in couch_jobs.get_jobs(self.type))

    def settle(self, deadline: float) -> bool:
        """Wait (bounded) until every added job is finished."""
        return wait_until(lambda: self.states().get("finished", 0) >= len(self.added), deadline, 0.25)

    def check(self) -> Check:
        jobs = {job_id: (str(state), data) for _t, job_id, state, data in couch_jobs.get_jobs(self.type)}
        states = {job_id: state for job_id, (state, _d) in jobs.items()}
        with couch_jobs.transaction(write=False) as tx:
            rows = tx.execute(
                f"SELECT job_id, count(*), count(DISTINCT pid) FROM {LOG_TABLE} GROUP BY job_id"
            ).fetchall()
        finishes = {job_id: n for job_id, n, _ in rows}
        processes = {pid for (pid,) in _pids(couch_jobs)}
        added = set(self.added)
        unfinished = sorted(j for j in added if states.get(j) != "finished")
        twice = sorted(j for j in added if finishes.get(j, 0) > 1)
        never = sorted(j for j in added if finishes.get(j, 0) == 0)
        stray = sorted(set(finishes) - added)
        c = Check("couch_jobs")
        by_state = Counter(states.get(j, "missing") for j in added)
        c.lines.append(
            f"couch_jobs: {len(added)} jobs added, finished by workers in {len(processes)} OS processes; "
            f"states: {', '.join(f'{k} {v}' for k, v in sorted(by_state.items()))}"
        )
        c.lines.append(
            f"  finished exactly once: {sum(1 for j in added if finishes.get(j) == 1)}; "
            f"twice or more: {len(twice)}; never: {len(never)}; unknown ids logged: {len(stray)}"
        )
        if self.group is not None:
            with couch_jobs.transaction(write=False) as tx:
                per_worker = tx.execute(f"SELECT worker, count(*) FROM {LOG_TABLE} GROUP BY worker").fetchall()
            where: Counter = Counter()
            for worker, n in per_worker:
                where[self.group(int(worker))] += n
            c.lines.append("  finishes per node: " + ", ".join(f"{k} {v}" for k, v in sorted(where.items())))
        c.lost = len(set(unfinished) | set(twice) | set(never)) + len(stray)
        c.counted = f"{len(added)} jobs"
        if c.lost:
            sample = sorted(set(unfinished) | set(twice) | set(never) | set(stray))
            c.lines.append(f"  LOST or duplicated: {c.lost}; what was seen of each (at most {_SHOWN}):")
            c.lines.extend("    " + line for line in self.describe(sample[:_SHOWN], jobs))
        return c

    def describe(self, job_ids: list[str], jobs: dict[str, tuple[str, Any]]) -> list[str]:
        """One line per job: when it was added, its state and data in the store, and every finish row logged."""
        if not job_ids:
            return []
        with couch_jobs.transaction(write=False) as tx:
            p = getattr(tx, "param", "?")
            marks = ", ".join([p] * len(job_ids))
            rows = tx.execute(
                f"SELECT job_id, worker, pid FROM {LOG_TABLE} WHERE job_id IN ({marks})", tuple(job_ids)
            ).fetchall()
        logged: dict[str, list[str]] = {}
        for job_id, worker, pid in rows:
            logged.setdefault(job_id, []).append(f"worker {worker} pid {pid}")
        out = []
        for job_id in job_ids:
            with self.lock:
                at = self.added_at.get(job_id)
            state, data = jobs.get(job_id, ("missing from the store", None))
            when = f"added at t={at:.1f} s" if at is not None else "never added by this run"
            out.append(
                f"{job_id}: {when}; state {state}, data {data!r}; finish rows: "
                f"{'; '.join(logged.get(job_id, [])) or 'none'}"
            )
        return out

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"added": len(self.added)}


def _pids(couch_jobs: Any) -> list[tuple[int]]:
    with couch_jobs.transaction(write=False) as tx:
        return tx.execute(f"SELECT DISTINCT pid FROM {LOG_TABLE}").fetchall()
