"""Replicator scheduler: cost of a reschedule and of add_job, and job throughput.

Measures:

- **reschedule**: one scheduling cycle over a table of 1k, 10k and 100k jobs
  (500 running, the rest pending, 5% backing off after crashes, half of
  them continuous), median ms over several cycles.  Two figures: the pure
  decision (`policy.reschedule`, which jobs to stop and start) and a whole
  `SchedulerState.reschedule` (decision, table updates, stats gauges), the
  latter also with fair share on.  Each cycle rotates ``max_churn`` (20) jobs
  and the next cycle starts from the rotated table.  Target: < 100 ms at 100k.
- **add_job**: `SchedulerState.add_job` into a table of that size (median ms
  per call over a bounded number of adds), and the same through the running
  scheduler actor (a call round trip from the host program).
- **end to end**: the real tree (job supervisor, scheduler, reader), one host
  process per job, one-shot replications of ``--docs`` documents between
  SQLite files, ``max_jobs`` 8: jobs completed per second and documents
  replicated per second, plus the median latency of a ``jobs()`` read while
  it runs.

Prints a table and writes ``bench/results/replicator.json``.  ``--quick``
runs in about 20 s.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from _common import environment, write_json

from actors import GenServer, Node
from actors.replicator import DocStore, Job, Rep, SchedulerState, Settings, StartJob, policy
from actors.replicator import scheduler as sched
from actors.replicator.records import ADDED, STARTED, crashed
from actors.replicator.sup import start_replicator
from actors.stats import Stats

NOW = 1_000_000.0
RUNNING = 500


class Collector(GenServer):
    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q

    def handle_info(self, message: Any) -> None:
        self.q.put(message)


def build_table(n: int, fair_share: bool = False) -> SchedulerState:
    """``n`` jobs: `RUNNING` running, 5% crashed recently, the rest pending."""
    settings = Settings(max_jobs=RUNNING, max_churn=20, fair_share=fair_share)
    state = SchedulerState(settings, Stats())
    jobs = []
    for i in range(n):
        rep = Rep(
            id=f"job{i:06d}",
            source=f"s{i}",
            target=f"t{i}",
            options={"continuous": i % 2 == 0},
            db_name=f"db{i % 10}/_replicator",
        )
        added = NOW - 10_000 + i * 0.001
        if i < RUNNING:
            history = ((STARTED, added + 1), (ADDED, added))
            jobs.append(Job(id=rep.id, rep=rep, history=history, pid=f"pid{i}"))
        elif i % 20 == 0:
            history = ((crashed("boom"), NOW - 5), (STARTED, NOW - 6), (ADDED, added))
            jobs.append(Job(id=rep.id, rep=rep, history=history))
        else:
            jobs.append(Job(id=rep.id, rep=rep, history=((ADDED, added),)))
    state.load_jobs(jobs, NOW)
    return state


def apply(state: SchedulerState, effects: list, now: float) -> None:
    for effect in effects:
        if isinstance(effect, StartJob):
            state.job_started(effect.job_id, f"pid-{effect.job_id}-{now}", now)


def bench_reschedule(n: int, cycles: int, fair_share: bool) -> dict[str, float]:
    state = build_table(n, fair_share)
    decision_ms, cycle_ms = [], []
    kwargs = dict(
        max_jobs=RUNNING, max_churn=20, health_threshold=120.0, backoff_interval=30.0, max_backoff_exponent=10
    )
    now = NOW
    for _ in range(cycles):
        now += 60.0
        if not fair_share:
            jobs = state.all_jobs()
            t0 = time.perf_counter()
            policy.reschedule(jobs, now, **kwargs)
            decision_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        effects = state.reschedule(now)
        cycle_ms.append((time.perf_counter() - t0) * 1000)
        apply(state, effects, now)
    out = {"cycle_ms": statistics.median(cycle_ms)}
    if decision_ms:
        out["decision_ms"] = statistics.median(decision_ms)
    return out


def bench_add_job(n: int, adds: int) -> float:
    state = build_table(n)
    state.set_max_jobs(0)  # no start on add: measure the table insert and stats
    samples = []
    for i in range(adds):
        rep = Rep(id=f"new{i}", source="s", target="t", db_name="db/_replicator")
        t0 = time.perf_counter()
        state.add_job(rep, NOW)
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def bench_end_to_end(jobs: int, docs: int, deadline_s: float) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="replicator-bench-")
    try:
        return _end_to_end(tmp, jobs, docs, deadline_s)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _end_to_end(tmp: str, jobs: int, docs: int, deadline_s: float) -> dict[str, Any]:
    reps = []
    for i in range(jobs):
        source = os.path.join(tmp, f"s{i}.db")
        with DocStore(source, create=True) as store:
            for k in range(docs):
                store.put(f"d{k:05d}", {"n": k, "pad": "x" * 64})
        reps.append(
            Rep(
                id=f"job{i}",
                source=source,
                target=os.path.join(tmp, f"t{i}.db"),
                options={"create_target": True, "worker_batch_size": 100, "worker_processes": 2},
                db_name="_replicator",
            )
        )
    config = {"replicator": {"max_jobs": "8", "interval": "100"}}
    with Node(config) as node:
        start_replicator(node)
        q: queue.Queue = queue.Queue()
        sched.subscribe(node, node.spawn(Collector, q))
        add_ms = []
        t0 = time.perf_counter()
        for r in reps:
            a = time.perf_counter()
            sched.add_job(node, r)
            add_ms.append((time.perf_counter() - a) * 1000)
        completed, read_ms = 0, []
        deadline = time.monotonic() + deadline_s
        for _ in range(jobs * 20):
            if completed == jobs or time.monotonic() > deadline:
                break
            try:
                event = q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if event[1] == "completed":
                completed += 1
                a = time.perf_counter()
                sched.jobs(node)
                read_ms.append((time.perf_counter() - a) * 1000)
        elapsed = time.perf_counter() - t0
    return {
        "jobs": jobs,
        "docs_per_job": docs,
        "completed": completed,
        "seconds": elapsed,
        "jobs_per_s": completed / elapsed,
        "docs_per_s": completed * docs / elapsed,
        "actor_add_job_ms": statistics.median(add_ms),
        "jobs_read_ms": statistics.median(read_ms) if read_ms else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller run, about 20 s")
    parser.add_argument("--docs", type=int, default=None, help="documents per job in the end-to-end run")
    args = parser.parse_args()
    sizes = [1_000, 10_000, 100_000]
    cycles = {1_000: 20, 10_000: 10, 100_000: 5 if args.quick else 10}
    adds = 300 if args.quick else 2000
    rows = []
    for n in sizes:
        plain = bench_reschedule(n, cycles[n], fair_share=False)
        fair = bench_reschedule(n, max(3, cycles[n] // 2), fair_share=True)
        add = bench_add_job(n, adds)
        rows.append(
            {
                "jobs": n,
                "decision_ms": plain["decision_ms"],
                "reschedule_ms": plain["cycle_ms"],
                "reschedule_fair_share_ms": fair["cycle_ms"],
                "add_job_ms": add,
            }
        )
        print(f"  measured {n} jobs", file=sys.stderr)
    e2e = bench_end_to_end(
        jobs=24 if args.quick else 120,
        docs=args.docs or (200 if args.quick else 500),
        deadline_s=20 if args.quick else 120,
    )
    print(f"{'jobs':>8} {'decision ms':>12} {'reschedule ms':>14} {'fair share ms':>14} {'add_job ms':>11}")
    for row in rows:
        print(
            f"{row['jobs']:>8} {row['decision_ms']:>12.2f} {row['reschedule_ms']:>14.2f} "
            f"{row['reschedule_fair_share_ms']:>14.2f} {row['add_job_ms']:>11.4f}"
        )
    print(
        f"\nend to end: {e2e['completed']}/{e2e['jobs']} one-shot jobs of {e2e['docs_per_job']} docs "
        f"in {e2e['seconds']:.2f} s: {e2e['jobs_per_s']:.1f} jobs/s, {e2e['docs_per_s']:.0f} docs/s; "
        f"add_job through the actor {e2e['actor_add_job_ms']:.2f} ms, "
        f"jobs() read {e2e['jobs_read_ms'] or float('nan'):.2f} ms (median)"
    )
    target_ok = rows[-1]["reschedule_ms"] < 100.0
    print(f"target: reschedule at 100k jobs < 100 ms: {'met' if target_ok else 'NOT met'}")
    path = write_json(
        "replicator",
        {
            "quick": args.quick,
            "environment": environment(),
            "scheduler": rows,
            "end_to_end": e2e,
            "target_reschedule_100k_under_100ms": target_ok,
        },
    )
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
