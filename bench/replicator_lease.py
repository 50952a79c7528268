"""Replication leases on PostgreSQL: what a renewal costs, and job throughput with and without leases.

Measures, against a throwaway PostgreSQL server (pgserver, unix socket) or
``--url``:

- **renewals**: ``N`` leases held by one process, renewed one after another
  (each renewal one transaction: lock the row, read the store's clock,
  update the lease and its run) for a bounded time: renewals per second one
  client sustains, and the median and p99 latency of a renewal.  Beside it,
  the rate a cluster *needs* for ``N`` jobs at the given TTL (a renewal
  every TTL/4 per running job) and the ratio capacity/needed.
- **throughput**: the real replicator tree (scheduler, job supervisor, jobs
  as threads of one process) running ``--jobs`` one-shot replications of
  ``--docs`` documents between databases of the store, ``max_jobs`` 8,
  once with ``[replicator] lease = false`` and once with leases on, in the
  same run, alternating the order: jobs/s and docs/s for each, and the ratio
  with/without.  With leases each job also acquires its lease before it
  opens anything, carries the fencing token on every batch and checkpoint,
  and releases it at the end.

Prints a table and writes ``bench/results/replicator_lease.json``.
``--quick`` runs in about 30 s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import shutil
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from _common import environment, percentile, write_json  # noqa: E402

from actors import GenServer, Node  # noqa: E402
from actors.couch_jobs.local_postgres import local_postgres  # noqa: E402
from actors.replicator import Doc, LeaseConfig, LeaseHolder, Rep, open_db, overlapping_runs, read_runs  # noqa: E402
from actors.replicator import scheduler as sched  # noqa: E402
from actors.replicator.sup import start_replicator  # noqa: E402

TTL = 15.0


class Collector(GenServer):
    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q

    def handle_info(self, message: Any) -> None:
        self.q.put(message)


def bench_renewals(url: str, n: int, seconds: float) -> dict[str, Any]:
    """``n`` leases in one process, renewed round-robin for ``seconds`` (bounded in count too)."""
    times = LeaseConfig(url, True, TTL).times
    store = open_db("_replicator", store=url, create=True)  # one connection, as one job process has
    holders = [LeaseHolder(store, f"bench-renew-{n}-{i}", "bench", "1", times) for i in range(n)]
    try:
        for h in holders:
            if not h.try_acquire():
                raise RuntimeError(f"could not acquire {h.job}")
        lat: list[float] = []
        t0 = time.perf_counter()
        deadline = t0 + seconds
        for i in range(2_000_000):
            if time.perf_counter() >= deadline:
                break
            a = time.perf_counter()
            if holders[i % n].renew() is not True:
                raise RuntimeError("a renewal failed")
            lat.append(time.perf_counter() - a)
        elapsed = time.perf_counter() - t0
        for h in holders:
            h.release()
    finally:
        store.close()
    rate = len(lat) / elapsed
    needed = n / (TTL / 4.0)
    return {"leases": n, "renewals": len(lat), "seconds": elapsed, "renewals_per_s": rate,
            "median_ms": percentile(lat, 50) * 1000, "p99_ms": percentile(lat, 99) * 1000,
            "needed_per_s_at_ttl": needed, "ttl_s": TTL, "capacity_over_needed": rate / needed}


def bench_throughput(url: str, lease: bool, tag: str, jobs: int, docs: int, deadline_s: float) -> dict[str, Any]:
    reps = []
    for i in range(jobs):
        source = f"{tag}_s{i}"
        with open_db(source, store=url, create=True) as db:
            db.bulk_docs([_doc(k) for k in range(docs)])
        reps.append(Rep(id=f"{tag}-job{i}", source=source, target=f"{tag}_t{i}",
                        options={"create_target": True, "worker_batch_size": 100, "worker_processes": 2},
                        db_name="_replicator"))
    config = {"replicator": {"max_jobs": "8", "interval": "100", "store": url, "lease": str(lease).lower(),
                             "lease_ttl": str(TTL)}}
    with Node(config, name=f"bench{tag}", listen="tcp://127.0.0.1:0") as node:
        start_replicator(node, job_host=None)
        q: queue.Queue = queue.Queue()
        sched.subscribe(node, node.spawn(Collector, q))
        t0 = time.perf_counter()
        for r in reps:
            sched.add_job(node, r)
        completed = 0
        deadline = time.monotonic() + deadline_s
        for _ in range(jobs * 50):
            if completed == jobs or time.monotonic() > deadline:
                break
            try:
                event = q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if event[1] == "completed":
                completed += 1
            elif event[1] == "crashed":
                print(f"  job {event[2]} crashed: {event[3]!r}", file=sys.stderr)
        elapsed = time.perf_counter() - t0
    return {"leases": lease, "jobs": jobs, "docs_per_job": docs, "completed": completed, "seconds": elapsed,
            "jobs_per_s": completed / elapsed, "docs_per_s": completed * docs / elapsed}


def _doc(k: int) -> Doc:
    return Doc(f"d{k:05d}", f"1-{k:032x}", {"n": k, "pad": "x" * 64})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller run, about 30 s")
    parser.add_argument("--url", help="a postgresql:// URL to use instead of a throwaway server (its tables are "
                                      "created in that database)")
    parser.add_argument("--rounds", type=int, default=None, help="throughput rounds (each: without, then with)")
    args = parser.parse_args()
    seconds = 2.0 if args.quick else 5.0
    sizes = [10, 100] if args.quick else [10, 100, 1000]
    jobs, docs = (16, 200) if args.quick else (48, 500)
    rounds = args.rounds or (1 if args.quick else 2)
    tmp = tempfile.mkdtemp(prefix="replicator-lease-bench-")
    os.chmod(tmp, 0o755)
    try:
        with contextlib.ExitStack() as stack:
            url = args.url or stack.enter_context(local_postgres(os.path.join(tmp, "pg")))
            renew = []
            for n in sizes:
                renew.append(bench_renewals(url, n, seconds))
                print(f"  renewals measured for {n} leases", file=sys.stderr)
            runs: list[dict[str, Any]] = []
            for r in range(rounds):
                order = (False, True) if r % 2 == 0 else (True, False)
                for lease in order:
                    runs.append(bench_throughput(url, lease, f"r{r}{'l' if lease else 'n'}", jobs, docs,
                                                 deadline_s=60 if args.quick else 240))
                    print(f"  throughput round {r} leases={lease} done", file=sys.stderr)
            audit = [x for x in read_runs(url) if not x.job.startswith("bench-renew")]
            overlaps = len(overlapping_runs(audit))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'leases':>7} {'renewals/s':>11} {'median ms':>10} {'p99 ms':>8} {'needed/s (TTL 15 s)':>20} "
          f"{'capacity/needed':>16}")
    for row in renew:
        print(f"{row['leases']:>7} {row['renewals_per_s']:>11.0f} {row['median_ms']:>10.3f} {row['p99_ms']:>8.3f} "
              f"{row['needed_per_s_at_ttl']:>20.1f} {row['capacity_over_needed']:>16.1f}")
    without = [x for x in runs if not x["leases"]]
    with_ = [x for x in runs if x["leases"]]

    def mean(rows: list[dict[str, Any]], key: str) -> float:
        return sum(x[key] for x in rows) / len(rows)

    ratio = mean(with_, "jobs_per_s") / mean(without, "jobs_per_s")
    print(f"\nthroughput, {jobs} one-shot jobs of {docs} docs, max_jobs 8, jobs as threads, {rounds} round(s):")
    for x in runs:
        print(f"  leases {'on ' if x['leases'] else 'off'}: {x['completed']}/{x['jobs']} jobs in {x['seconds']:.2f} s: "
              f"{x['jobs_per_s']:.2f} jobs/s, {x['docs_per_s']:.0f} docs/s")
    print(f"ratio with/without leases (jobs/s): {ratio:.3f}; runs in the audit: {len(audit)}, overlapping: {overlaps}")
    path = write_json("replicator_lease", {
        "quick": args.quick, "environment": environment(), "store": "given URL" if args.url else "pgserver (unix socket)",
        "renewals": renew, "throughput": runs,
        "throughput_ratio_with_over_without": ratio,
        "audit_runs": len(audit), "audit_overlaps": overlaps})
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
