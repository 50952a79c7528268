"""Replication leases on PostgreSQL: what a renewal costs, and job throughput with and without leases.

Measures, against a throwaway PostgreSQL server (pgserver, unix socket) or
``--url``:

- **renewals**: ``N`` leases renewed round-robin (each renewal one
  transaction: lock the row, read the store's clock, update the lease and
  its run) for a bounded time, by 1 client and by 8 clients each with its
  own connection (as job processes on several nodes renew their own
  leases): renewals per second, and the median and p99 latency of one.  Beside it,
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
import threading
import time
from typing import Any

from _common import environment, percentile, write_json

from actors import GenServer, Node
from actors.couch_jobs.local_postgres import local_postgres
from actors.replicator import Doc, LeaseConfig, LeaseHolder, Rep, open_db, overlapping_runs, read_runs
from actors.replicator import scheduler as sched
from actors.replicator.sup import start_replicator

TTL = 15.0


class Collector(GenServer):
    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q

    def handle_info(self, message: Any) -> None:
        self.q.put(message)


def bench_renewals(url: str, n: int, seconds: float, clients: int) -> dict[str, Any]:
    """``n`` leases split over ``clients`` threads (one connection each), renewed round-robin
    for ``seconds`` (bounded in count too)."""
    times = LeaseConfig(url, True, TTL).times
    stores = [open_db("_replicator", store=url, create=True) for _ in range(clients)]
    holders = [
        [LeaseHolder(stores[c], f"bench-renew-{n}-{c}-{i}", "bench", "1", times) for i in range(c, n, clients)]
        for c in range(clients)
    ]
    lats: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    start = threading.Barrier(clients + 1)

    def renew_loop(c: int, deadline_box: list[float]) -> None:
        mine = holders[c]
        start.wait(timeout=60)
        for i in range(2_000_000):
            if time.perf_counter() >= deadline_box[0]:
                return
            a = time.perf_counter()
            if mine[i % len(mine)].renew() is not True:
                errors.append(f"a renewal of {mine[i % len(mine)].job} failed")
                return
            lats[c].append(time.perf_counter() - a)

    try:
        for group in holders:
            for h in group:
                if not h.try_acquire():
                    raise RuntimeError(f"could not acquire {h.job}")
        deadline_box = [float("inf")]
        threads = [threading.Thread(target=renew_loop, args=(c, deadline_box)) for c in range(clients)]
        for t in threads:
            t.start()
        deadline_box[0] = time.perf_counter() + seconds
        t0 = time.perf_counter()
        start.wait(timeout=60)
        for t in threads:
            t.join(timeout=seconds + 60)
        elapsed = time.perf_counter() - t0
        if errors:
            raise RuntimeError(errors[0])
        for group in holders:
            for h in group:
                h.release()
    finally:
        for store in stores:
            store.close()
    lat = [x for per in lats for x in per]
    rate = len(lat) / elapsed
    needed = n / (TTL / 4.0)
    return {
        "leases": n,
        "clients": clients,
        "renewals": len(lat),
        "seconds": elapsed,
        "renewals_per_s": rate,
        "median_ms": percentile(lat, 50) * 1000,
        "p99_ms": percentile(lat, 99) * 1000,
        "needed_per_s_at_ttl": needed,
        "ttl_s": TTL,
        "capacity_over_needed": rate / needed,
    }


def bench_throughput(url: str, lease: bool, tag: str, jobs: int, docs: int, deadline_s: float) -> dict[str, Any]:
    reps = []
    for i in range(jobs):
        source = f"{tag}_s{i}"
        with open_db(source, store=url, create=True) as db:
            db.bulk_docs([_doc(k) for k in range(docs)])
        reps.append(
            Rep(
                id=f"{tag}-job{i}",
                source=source,
                target=f"{tag}_t{i}",
                options={"create_target": True, "worker_batch_size": 100, "worker_processes": 2},
                db_name="_replicator",
            )
        )
    config = {
        "replicator": {
            "max_jobs": "8",
            "interval": "100",
            "store": url,
            "lease": str(lease).lower(),
            "lease_ttl": str(TTL),
        }
    }
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
    return {
        "leases": lease,
        "jobs": jobs,
        "docs_per_job": docs,
        "completed": completed,
        "seconds": elapsed,
        "jobs_per_s": completed / elapsed,
        "docs_per_s": completed * docs / elapsed,
    }


def _doc(k: int) -> Doc:
    return Doc(f"d{k:05d}", f"1-{k:032x}", {"n": k, "pad": "x" * 64})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller run, about 30 s")
    parser.add_argument(
        "--url",
        help="a postgresql:// URL to use instead of a throwaway server (its tables are created in that database)",
    )
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
                for clients in (1, 8):
                    renew.append(bench_renewals(url, n, seconds, clients))
                    print(f"  renewals measured for {n} leases, {clients} client(s)", file=sys.stderr)
            runs: list[dict[str, Any]] = []
            for r in range(rounds):
                order = (False, True) if r % 2 == 0 else (True, False)
                for lease in order:
                    runs.append(
                        bench_throughput(
                            url, lease, f"r{r}{'l' if lease else 'n'}", jobs, docs, deadline_s=60 if args.quick else 240
                        )
                    )
                    print(f"  throughput round {r} leases={lease} done", file=sys.stderr)
            audit = [x for x in read_runs(url) if not x.job.startswith("bench-renew")]
            overlaps = len(overlapping_runs(audit))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"{'leases':>7} {'clients':>8} {'renewals/s':>11} {'median ms':>10} {'p99 ms':>8} "
        f"{'needed/s (TTL 15 s)':>20} {'capacity/needed':>16}"
    )
    for row in renew:
        print(
            f"{row['leases']:>7} {row['clients']:>8} {row['renewals_per_s']:>11.0f} {row['median_ms']:>10.3f} "
            f"{row['p99_ms']:>8.3f} "
            f"{row['needed_per_s_at_ttl']:>20.1f} {row['capacity_over_needed']:>16.1f}"
        )
    without = [x for x in runs if not x["leases"]]
    with_ = [x for x in runs if x["leases"]]

    def mean(rows: list[dict[str, Any]], key: str) -> float:
        return sum(x[key] for x in rows) / len(rows)

    ratio = mean(with_, "jobs_per_s") / mean(without, "jobs_per_s")
    print(f"\nthroughput, {jobs} one-shot jobs of {docs} docs, max_jobs 8, jobs as threads, {rounds} round(s):")
    for x in runs:
        print(
            f"  leases {'on ' if x['leases'] else 'off'}: {x['completed']}/{x['jobs']} jobs in {x['seconds']:.2f} s: "
            f"{x['jobs_per_s']:.2f} jobs/s, {x['docs_per_s']:.0f} docs/s"
        )
    print(f"ratio with/without leases (jobs/s): {ratio:.3f}; runs in the audit: {len(audit)}, overlapping: {overlaps}")
    path = write_json(
        "replicator_lease",
        {
            "quick": args.quick,
            "environment": environment(),
            "store": "given URL" if args.url else "pgserver (unix socket)",
            "renewals": renew,
            "throughput": runs,
            "throughput_ratio_with_over_without": ratio,
            "audit_runs": len(audit),
            "audit_overlaps": overlaps,
        },
    )
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
