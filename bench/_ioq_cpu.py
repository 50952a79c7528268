"""Where an IOQ2 request's CPU goes, against bypass (the small-read gap).

Sets up `bench/ioq.py`'s bench (k cores, co-located files, ``fd_hash``)
and alternates short runs of the small-read mix through IOQ2 and through
bypass.  Around each run it reads, from ``/proc``, the CPU time of every
thread of every process of the node (utime + stime) and the clients'
calling threads' own CPU time, and divides by the requests served.  Rows:
microseconds of CPU per request per group of threads (the client hosts'
and the IOQ hosts' Python threads and ZeroMQ threads), for each mode and
the difference; then the throughput ratio IOQ2/bypass of each adjacent
pair of runs and their median.

Throughput on a 2-core machine is CPU-bound, so a ratio is the inverse
ratio of the totals; the rows say which threads pay the difference.

Run: PYTHONPATH=$PWD python bench/_ioq_cpu.py [--cores 2] [--seconds 1.5] [--pairs 8]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import ioq as harness  # bench/ioq.py

from actors import Node

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pids: dict[str, int]) -> dict[tuple[str, str], tuple[str, float]]:
    """(process label, tid) -> (thread name, CPU seconds so far), for every thread of ``pids``."""
    out: dict[tuple[str, str], tuple[str, float]] = {}
    for label, pid in pids.items():
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                    stat = fh.read()
                with open(f"/proc/{pid}/task/{tid}/comm") as fh:
                    comm = fh.read().strip()
            except OSError:  # ended meanwhile
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            out[(label, tid)] = (comm, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def group_of(label: str, comm: str) -> str:
    """``client:python``, ``ioq:ZMQbg/IO``...: hosts by role, threads by kind."""
    role = label.rstrip("0123456789")
    kind = "zmq" if comm.startswith("ZMQ") else "python"
    return f"{role}:{kind}"


class TimedClient(harness.Client):
    """The harness's client, reporting its calling thread's CPU time too."""

    def run(self, *args: Any) -> dict[str, Any]:
        start = time.thread_time()
        result = super().run(*args)
        result["cpu"] = time.thread_time() - start
        return result


def measure(bench: harness.Bench, node: Node, mode: str, seconds: float) -> tuple[float, dict[str, float]]:
    """One run: requests/second and CPU microseconds per request by group."""
    pids = {(h["label"] or h["proc"]): h["pid"] for h in node.hosts()}
    pids["node"] = os.getpid()
    before = thread_cpu(pids)
    futures = [
        bench.pool.submit(
            c.call,
            ("run", mode, "small", bench.files, bench.small_blocks, seconds, "interactive", i * 7919 + 1),
            seconds + 60.0,
        )
        for i, c in enumerate(bench.clients)
    ]
    t0 = time.perf_counter()
    results = [f.result(timeout=seconds + 90.0) for f in futures]
    wall = time.perf_counter() - t0
    after = thread_cpu(pids)
    n = max(1, sum(r["n"] for r in results))
    per: collections.Counter[str] = collections.Counter()
    for key, (comm, cpu) in after.items():
        per[group_of(key[0], comm)] += cpu - before.get(key, (comm, 0.0))[1]
    groups = {g: t / n * 1e6 for g, t in per.items()}
    groups["client calling threads"] = sum(r["cpu"] for r in results) / n * 1e6
    return n / wall, groups


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cores", type=int, default=min(2, len(os.sched_getaffinity(0))))
    p.add_argument("--seconds", type=float, default=1.5, help="one run")
    p.add_argument("--pairs", type=int, default=8, help="IOQ2/bypass pairs of runs")
    args = p.parse_args(argv)
    if not 1 <= args.pairs <= 200 or not 0.1 <= args.seconds <= 60:
        p.error("--pairs must be 1..200 and --seconds 0.1..60")
    opts = argparse.Namespace(
        seconds=args.seconds,
        warmup=0.3,
        reps=1,
        clients_per_core=6,
        files_per_core=4,
        blocks=200,
        big_mib=1,
        concurrency=8,
        ioq1_concurrency=20,
        dispatch="fd_hash",
        colocate=True,
    )
    harness.Client = TimedClient  # the bench spawns `harness.Client`
    rps: dict[str, list[float]] = {"ioq2": [], "bypass": []}
    cpu: dict[str, dict[str, list[float]]] = {
        "ioq2": collections.defaultdict(list),
        "bypass": collections.defaultdict(list),
    }
    with tempfile.TemporaryDirectory(prefix="ioq-cpu-") as workdir, Node() as node:
        bench = harness.Bench(node, args.cores, opts, workdir)
        try:
            for i in range(args.pairs):
                for mode in ("ioq2", "bypass"):
                    bench.set_mode(mode)
                    bench.run(mode, "small", 0.2)  # warm-up, not measured
                    rate, groups = measure(bench, node, mode, args.seconds)
                    rps[mode].append(rate)
                    for g, us in groups.items():
                        cpu[mode][g].append(us)
                print(
                    f"pair {i + 1}/{args.pairs}: ioq2 {rps['ioq2'][-1]:.0f} req/s, bypass {rps['bypass'][-1]:.0f} "
                    f"req/s",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            bench.close()
    print(f"{'CPU us per request (medians)':<32} {'ioq2':>8} {'bypass':>8} {'diff':>8}")
    for g in sorted(set(cpu["ioq2"]) | set(cpu["bypass"])):
        a = statistics.median(cpu["ioq2"].get(g) or [0.0])
        b = statistics.median(cpu["bypass"].get(g) or [0.0])
        if a >= 0.05 or b >= 0.05:  # groups that did nothing measurable are left out
            print(f"{g:<32} {a:8.1f} {b:8.1f} {a - b:+8.1f}")
    totals = {m: sum(statistics.median(v) for g, v in cpu[m].items() if g != "client calling threads") for m in cpu}
    print(
        f"{'all threads':<32} {totals['ioq2']:8.1f} {totals['bypass']:8.1f} {totals['ioq2'] - totals['bypass']:+8.1f}"
    )
    pairs = [a / b for a, b in zip(rps["ioq2"], rps["bypass"])]
    print(
        f"IOQ2/bypass throughput per pair: {' '.join(f'{x:.2f}' for x in pairs)}; median {statistics.median(pairs):.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
