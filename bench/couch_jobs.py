"""couch_jobs throughput and wake-up latency, with workers in separate host processes.

Measures, on one node running the real ``couch_jobs_sup`` tree, first over
one SQLite file (WAL), then over a PostgreSQL database (a throwaway cluster
from the ``pgserver`` wheel, over a unix socket) in the same run:

- **add**: jobs added per second by the host program, one transaction per
  job and 100 jobs per transaction;
- **accept+finish**: jobs per second drained by 1, 2 and 4 worker actors,
  each in its own host process, from a queue filled beforehand (each job is
  accepted and finished in its own write transactions);
- **wake-up**: latency from an ``add`` in the host program to the return of
  ``accept`` in a worker blocked in another process (p50/p99).  Blocked
  callers re-check the store only every 60 s in this run, so the figure is
  the cross-process wake-up path plus the accept itself: on SQLite commit
  listener -> ``couch_jobs_wakeups`` hub -> the worker process's agent -> its
  waker; on PostgreSQL ``pg_notify`` at commit -> the worker process's
  ``LISTEN`` thread -> its waker.

Prints a table and writes ``bench/results/couch_jobs.json``.  ``--quick``
runs in about a minute.  Without pgserver/psycopg the PostgreSQL column
says how to get them.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import tempfile
import time
from typing import Any

from _common import environment, percentile, take_first, write_json

from actors import GenServer, Node
from actors.couch_jobs.local_postgres import HOW_TO_GET, LocalPostgres, find_bindir


class Collector(GenServer):
    """In the host program: every info message goes into a queue."""

    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q

    def handle_info(self, message: Any) -> None:
        self.q.put(message)


class BenchWorker(GenServer):
    """A worker actor in a host process; reports timings, not every job."""

    def init(self, job_type: Any) -> None:
        from actors.couch_jobs import process

        self.jobs = process.use(self)
        self.type = job_type

    def handle_cast(self, request: Any) -> None:
        from actors.couch_jobs import NotFound

        op = request[0]
        if op == "drain":
            _, collector, max_jobs, idle = request
            done, first, last = 0, time.monotonic(), None
            for _ in range(max_jobs):
                try:
                    job, _data = self.jobs.accept(self.type, timeout=idle)
                except NotFound:
                    break
                self.jobs.finish(None, job)
                done += 1
                last = time.monotonic()
            collector.send(("drained", done, first, last))
        elif op == "accept_once":
            _, collector, timeout = request
            collector.send(("accepting",))
            job, _data = self.jobs.accept(self.type, timeout=timeout)
            t = time.monotonic()
            # Finish before reporting, so the next add never queues behind it
            # for SQLite's write lock (that wait would count as wake-up latency).
            self.jobs.finish(None, job)
            collector.send(("accepted", job.id, t))


def _expect(q: "queue.Queue[Any]", tag: str, timeout: float) -> tuple[Any, ...]:
    message = take_first(q, lambda m: m[0] == tag, timeout)
    if message is None:
        raise TimeoutError(f"no {tag!r} message within {timeout}s")
    return message


def bench_add(jobs: Any, n: int) -> dict[str, float]:
    jobs.set_type_timeout("bench_add", 60)
    t0 = time.monotonic()
    for i in range(n):
        jobs.add(None, "bench_add", f"single-{i}", {"i": i})
    single = n / (time.monotonic() - t0)
    t0 = time.monotonic()
    for batch in range(0, n, 100):
        with jobs.transaction() as tx:
            for i in range(batch, min(n, batch + 100)):
                jobs.add(tx, "bench_add", f"batched-{i}", {"i": i})
    batched = n / (time.monotonic() - t0)
    return {"jobs": n, "per_tx_1_jobs_per_s": round(single, 1), "per_tx_100_jobs_per_s": round(batched, 1)}


def bench_drain(node: Node, jobs: Any, q: "queue.Queue[Any]", collector: Any, workers: int, n: int) -> dict[str, float]:
    job_type = f"bench_drain_{workers}"
    jobs.set_type_timeout(job_type, 60)
    for batch in range(0, n, 100):
        with jobs.transaction() as tx:
            for i in range(batch, min(n, batch + 100)):
                jobs.add(tx, job_type, f"j{i}", {"i": i})
    refs = [node.spawn(BenchWorker, job_type, host=f"drain{workers}-{k}") for k in range(workers)]
    for ref in refs:
        ref.cast(("drain", collector, n + 1, 0.5))
    reports = [_expect(q, "drained", 600) for _ in refs]
    total = sum(r[1] for r in reports)
    if total != n:
        raise AssertionError(f"{workers} workers finished {total} of {n} jobs")
    start = min(r[2] for r in reports)
    end = max(r[3] for r in reports if r[3] is not None)
    for ref in refs:
        node.stop(ref)
    return {
        "workers": workers,
        "jobs": n,
        "seconds": round(end - start, 3),
        "jobs_per_s": round(n / (end - start), 1),
        "per_worker": [r[1] for r in reports],
    }


def bench_wakeup(node: Node, jobs: Any, q: "queue.Queue[Any]", collector: Any, samples: int) -> dict[str, float]:
    jobs.set_type_timeout("bench_wake", 60)
    worker = node.spawn(BenchWorker, "bench_wake", host="wake")
    lat_ms = []
    for i in range(samples):
        worker.cast(("accept_once", collector, 30.0))
        _expect(q, "accepting", 30)
        time.sleep(0.003)  # let it block in accept: we measure a wake-up, not a lucky first read
        t0 = time.monotonic()
        jobs.add(None, "bench_wake", f"w{i}", {})
        _, job_id, t_accepted = _expect(q, "accepted", 30)
        assert job_id == f"w{i}"
        lat_ms.append((t_accepted - t0) * 1000.0)
    node.stop(worker)
    return {
        "samples": samples,
        "p50_ms": round(percentile(lat_ms, 50), 3),
        "p99_ms": round(percentile(lat_ms, 99), 3),
        "max_ms": round(max(lat_ms), 3),
    }


def run_store(label: str, location: str, n_add: int, n_drain: int, n_wake: int) -> dict[str, Any]:
    """Every measure on one store, on a fresh node."""
    from actors.couch_jobs import app, process

    config = {"couch_jobs": {"wakeup_recheck_msec": "60000", "type_check_period_msec": "60000"}}
    out: dict[str, Any] = {}
    with Node(config) as node:
        app.start(node, location)
        jobs = process.local_jobs()
        q: "queue.Queue[Any]" = queue.Queue()
        collector = node.spawn(Collector, q)
        try:
            out["add"] = bench_add(jobs, n_add)
            print(f"{label} add: {out['add']}", file=sys.stderr)
            out["accept_finish"] = []
            for workers in (1, 2, 4):
                row = bench_drain(node, jobs, q, collector, workers, n_drain)
                out["accept_finish"].append(row)
                print(f"{label} accept+finish: {row}", file=sys.stderr)
            out["wakeup"] = bench_wakeup(node, jobs, q, collector, n_wake)
            print(f"{label} wake-up: {out['wakeup']}", file=sys.stderr)
        finally:
            app.stop(node)  # stops the tree, then closes the store start opened
    return out


def postgres_cluster(root: str) -> Any:
    """A throwaway PostgreSQL cluster under ``root`` (`LocalPostgres`), or None when none can run here."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return None
    if find_bindir() is None:
        return None
    return LocalPostgres(os.path.join(root, "data"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts, about a minute")
    args = parser.parse_args(argv)
    n_add = 2000 if args.quick else 10000
    n_drain = 1000 if args.quick else 5000
    n_wake = 100 if args.quick else 500

    results: dict[str, Any] = {"quick": args.quick, "environment": environment()}
    with tempfile.TemporaryDirectory(prefix="couch_jobs_bench_") as tmp:
        results["sqlite"] = run_store("sqlite", os.path.join(tmp, "jobs.db"), n_add, n_drain, n_wake)
        server = postgres_cluster(tmp)
        if server is None:
            results["postgres"] = {"skipped": HOW_TO_GET}
        else:
            try:
                results["postgres"] = run_store("postgres", server.url(), n_add, n_drain, n_wake)
            finally:
                server.close()

    stores = [k for k in ("sqlite", "postgres") if "add" in results[k]]
    print()
    print("couch_jobs, workers in separate host processes (SQLite WAL file; PostgreSQL over a unix socket)")
    print(f"{'measure':<42}" + "".join(f"{k:>14}" for k in stores))

    def row(label: str, get: Any, fmt: str = ".1f") -> None:
        print(f"{label:<42}" + "".join(f"{get(results[k]):>14{fmt}}" for k in stores))

    row("add, 1 job/tx (jobs/s)", lambda r: r["add"]["per_tx_1_jobs_per_s"])
    row("add, 100 jobs/tx (jobs/s)", lambda r: r["add"]["per_tx_100_jobs_per_s"])
    for i, workers in enumerate((1, 2, 4)):
        row(f"accept+finish, {workers} worker proc(s) (jobs/s)", lambda r, i=i: r["accept_finish"][i]["jobs_per_s"])
    row("accept wake-up after add, p50 (ms)", lambda r: r["wakeup"]["p50_ms"], ".3f")
    row("accept wake-up after add, p99 (ms)", lambda r: r["wakeup"]["p99_ms"], ".3f")
    if "skipped" in results["postgres"]:
        print(f"postgres: not measured ({results['postgres']['skipped']})")
    print(f"written to {write_json('couch_jobs', results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
