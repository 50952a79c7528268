"""IOQ benchmark: IOQ2 vs IOQ1 vs bypass, per core count, and prioritisation under backlog.

For each core count k (``--cores 1,2,...``; default 1..the CPUs available) one
node runs everything on cores 0..k-1: k IOQ2 servers (one per core, pinned),
the IOQ1 server, the file actors (hosts ``file<c>``) and the client actors
(hosts ``client<c>``), spread over those cores.  By default each file actor
lives in the host of an IOQ2 server and the strategy is ``fd_hash``, which
sends a file's requests to the server it lives with, so a submission never
leaves that process (``--no-colocate`` puts files in hosts ``file<c>``).  The clients issue requests
back to back for a fixed time through

* ``ioq2``   -- `actors.ioq.call` with ``[ioq2] enabled = true``;
* ``ioq1``   -- `actors.ioq.call` with ``[ioq2] enabled = false``;
* ``bypass`` -- direct calls to the file actors (the baseline),

with the same files and the same request mix, in two mixes:

* ``small`` -- small cached reads (``pread_iolist`` of 100-byte blocks): a
  queued request crosses processes as often as a bypassed one here, because
  a co-located server does the read on its own thread (`FileServer.try_read`);
  what it adds is the queue's own work on one server thread per core;
* ``heavy`` -- 64 KiB reads and fsync'd 4 KiB appends (3:1).

Reported per (k, mix, mode): requests/second (median of ``--reps`` runs),
p50/p99 latency, and the ratios IOQ2/bypass and IOQ2/IOQ1, each the median
of the ratios within one rep: a rep runs every mode once, back to back, in
an order that rotates from rep to rep, so drift on a shared machine lands
on all modes of a rep alike.

Then prioritisation: half the clients issue ``interactive`` reads, half
``db_compact`` reads, through IOQ2 with concurrency 1 and the
``server_per_scheduler`` strategy (a server then submits to files in other
processes, slow enough for a backlog to form: IOQ can only prioritise a
backlog; with co-located files the servers keep up with the clients and
there is little to prioritise), and the share of compaction requests served is measured with the
``db_compact`` class priority at its default (0.0001), 1.0 and 10000.

Output: a table on stdout, ``ioq.json`` and (if matplotlib is importable)
``ioq.png`` in ``--out``.  Every loop is bounded by time and by count;
``--quick`` finishes in about 20 seconds.

    python bench/ioq.py --quick
    python bench/ioq.py --cores 1,2 --seconds 3 --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from actors import GenServer, Node
from actors import config as _config
from actors.ioq import api
from actors.ioq.file_server import FileServer, file_call
from actors.ioq.ioq_config import ioq2_enabled
from actors.ioq.sup import start_ioq

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

MODES = ("ioq2", "ioq1", "bypass")
MIXES = ("small", "heavy")
SMALL_BLOCK = 100
BIG_READ = 64 * 1024
APPEND_SIZE = 4096
MAX_REQUESTS_PER_RUN = 2_000_000
SHARD = "shards/00000000-ffffffff/bench/db{}.1503945430"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Client(GenServer):
    """Issues requests back to back for a fixed time; returns counts and latencies."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        op = request[0]
        if op == "sync":
            cfg = _config.current()
            return [ioq2_enabled(cfg), cfg.get("ioq2.classes", "db_compact", "default")]
        if op == "run":
            return self.run(*request[1:])
        raise ValueError(f"unknown request {request!r}")

    def run(
        self, mode: str, mix: str, files: list, blocks: list, duration: float, io_class: str, seed: int
    ) -> dict[str, Any]:
        rng = random.Random(seed)
        direct = mode == "bypass"
        call = api.call
        perf = time.perf_counter
        append = (b"a" * APPEND_SIZE,)
        lat: list[float] = []
        nfiles = len(files)
        dims = [(io_class, SHARD.format(i)) for i in range(nfiles)]  # built once, as a caller keeps its shard's
        deadline = perf() + duration
        n = 0
        while n < MAX_REQUESTS_PER_RUN:
            i = rng.randrange(nfiles)
            fd = files[i]
            if mix == "small":
                msg = ("pread_iolist", rng.choice(blocks[i]))
            elif rng.random() < 0.25:
                msg = ("append", append[0], True)
            else:
                msg = ("pread", rng.randrange(blocks[i][-1] // BIG_READ) * BIG_READ, BIG_READ)
            t = perf()
            if direct:
                file_call(fd, msg)
            else:
                call(fd, msg, dims[i])
            now = perf()
            lat.append(now - t)
            n += 1
            if now >= deadline:
                break
        return {"n": n, "lat": lat}


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    idx = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[idx]


def _wait(check, what: str, tries: int = 2000) -> None:
    for _ in range(tries):
        if check():
            return
    raise RuntimeError(f"timed out waiting for {what}")


class Bench:
    def __init__(self, node: Node, k: int, args: argparse.Namespace, workdir: str) -> None:
        self.node = node
        self.k = k
        self.args = args
        cpus = sorted(os.sched_getaffinity(0))[:k]
        self.cpus = cpus
        node.config.set("ioq2", "enabled", "true")
        node.config.set("ioq2", "servers", str(k))
        node.config.set("ioq2", "concurrency", str(args.concurrency))
        node.config.set("ioq2", "dispatch_strategy", args.dispatch)
        node.config.set("ioq", "concurrency", str(args.ioq1_concurrency))
        self.sup = start_ioq(node, count=k)
        nfiles = args.files_per_core * k
        self.files = []
        self.small_blocks: list[list[int]] = []
        self.big_sizes: list[list[int]] = []
        payload = os.urandom(SMALL_BLOCK)
        big = os.urandom(1 << 20)
        for j in range(nfiles):
            cpu = cpus[j % k]
            f = node.spawn(FileServer, os.path.join(workdir, f"k{k}_f{j}.couch"), host=self.file_host(j), cpus={cpu})
            positions = [f.call(("append_bin", payload)) for _ in range(args.blocks)]
            self.small_blocks.append(positions)
            self.files.append(f)
        self.big_files = []
        for j in range(nfiles):
            cpu = cpus[j % k]
            f = node.spawn(FileServer, os.path.join(workdir, f"k{k}_big{j}.couch"), host=self.file_host(j), cpus={cpu})
            for _ in range(args.big_mib):
                f.call(("append", big))
            f.call(("sync",))
            self.big_files.append(f)
            self.big_sizes.append([0, f.call(("size",))])
        self.clients = []
        for j in range(args.clients_per_core * k):
            cpu = cpus[j % k]
            self.clients.append(node.spawn(Client, host=f"client{cpu}", cpus={cpu}))
        self.pool = ThreadPoolExecutor(len(self.clients))

    def file_host(self, j: int) -> str:
        """Files live in the IOQ2 server hosts (``ioq<i>``) when co-located, else apart."""
        i = j % self.k
        return f"ioq{i + 1}" if self.args.colocate else f"file{self.cpus[i]}"

    def close(self) -> None:
        self.pool.shutdown()

    def _sync(self, enabled: bool, compact: str = "default") -> None:
        _wait(lambda: all(c.call(("sync",)) == [enabled, compact] for c in self.clients), "config in clients")

    def run(self, mode: str, mix: str, duration: float, classes: list[str] | None = None) -> dict[str, Any]:
        files = self.files if mix == "small" else self.big_files
        blocks = self.small_blocks if mix == "small" else self.big_sizes
        classes = classes or ["interactive"] * len(self.clients)
        futures = [
            self.pool.submit(
                c.call, ("run", mode, mix, files, blocks, duration, classes[i], i * 7919 + 1), duration + 60.0
            )
            for i, c in enumerate(self.clients)
        ]
        t0 = time.perf_counter()
        results = [f.result(timeout=duration + 90.0) for f in futures]
        wall = time.perf_counter() - t0
        lat = sorted(x for r in results for x in r["lat"])
        n = sum(r["n"] for r in results)
        per_class: dict[str, int] = {}
        for cls, r in zip(classes, results):
            per_class[cls] = per_class.get(cls, 0) + r["n"]
        return {
            "rps": n / wall,
            "n": n,
            "p50_ms": _percentile(lat, 0.50) * 1000.0,
            "p99_ms": _percentile(lat, 0.99) * 1000.0,
            "per_class": per_class,
        }

    def set_mode(self, mode: str) -> None:
        enabled = mode != "ioq1"
        self.node.config.set("ioq2", "enabled", "true" if enabled else "false")
        self._sync(enabled)

    def throughput(self) -> dict[str, Any]:
        """Every mode once per rep, in an order that rotates from rep to rep, and the ratios as the median
        of the per-rep ratios: the machine's drift then lands inside a rep, on all modes alike, instead of
        between one mode's reps and the next mode's (a shared machine drifts by more than the gap measured)."""
        args = self.args
        out: dict[str, Any] = {}
        for mix in MIXES:
            runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
            for rep in range(args.reps):
                for mode in MODES[rep % len(MODES) :] + MODES[: rep % len(MODES)]:
                    self.set_mode(mode)
                    self.run(mode, mix, args.warmup)
                    runs[mode].append(self.run(mode, mix, args.seconds))
                    r = runs[mode][-1]
                    log(
                        f"  k={self.k} {mix:5s} {mode:6s} rep {rep + 1}/{args.reps}: "
                        f"{r['rps']:8.0f} req/s  p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms"
                    )
            m: dict[str, Any] = {}
            for mode in MODES:
                ordered = sorted(runs[mode], key=lambda r: r["rps"])
                med = ordered[len(ordered) // 2]
                m[mode] = {
                    "rps": statistics.median(r["rps"] for r in ordered),
                    "p50_ms": med["p50_ms"],
                    "p99_ms": med["p99_ms"],
                    "runs": [round(r["rps"], 1) for r in runs[mode]],  # in rep order
                }
            for other in ("bypass", "ioq1"):
                per_rep = [a["rps"] / b["rps"] for a, b in zip(runs["ioq2"], runs[other])]
                m[f"ioq2_vs_{other}"] = statistics.median(per_rep)
                m[f"ioq2_vs_{other}_per_rep"] = [round(x, 3) for x in per_rep]
            out[mix] = m
        return out

    def prioritisation(self) -> dict[str, Any]:
        args = self.args
        self.set_mode("ioq2")
        self.node.config.set("ioq2", "dispatch_strategy", args.prio_dispatch)
        self.node.config.set("ioq2", "concurrency", "1")
        _wait(lambda: api.get_concurrency() == self.k, "concurrency 1")
        half = len(self.clients) // 2
        classes = ["interactive"] * (len(self.clients) - half) + ["db_compact"] * half
        out: dict[str, Any] = {}
        for setting in ("default", "1.0", "10000"):
            if setting == "default":
                self.node.config.delete("ioq2.classes", "db_compact")
            else:
                self.node.config.set("ioq2.classes", "db_compact", setting)
            self._sync(True, setting)
            _wait(
                lambda: all(
                    dict(api.get_state(f"ioq_server_{i}")["class_p"])["db_compact"]
                    == (0.0001 if setting == "default" else float(setting))
                    for i in range(1, self.k + 1)
                ),
                "class priority in servers",
            )
            r = self.run("ioq2", args.prio_mix, args.prio_seconds, classes)
            share = r["per_class"].get("db_compact", 0) / max(1, r["n"])
            out[setting] = {"compaction_share": share, "rps": r["rps"], "per_class": r["per_class"]}
            log(f"  k={self.k} prioritisation db_compact={setting:7s}: compaction share {share:.3f} ({r['per_class']})")
        self.node.config.delete("ioq2.classes", "db_compact")
        self.node.config.set("ioq2", "concurrency", str(args.concurrency))
        self.node.config.set("ioq2", "dispatch_strategy", args.dispatch)
        return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ncpu = len(os.sched_getaffinity(0))
    p.add_argument(
        "--cores",
        default=",".join(str(i) for i in range(1, ncpu + 1)),
        help="core counts to measure, e.g. 1,2,4 (default: 1..%(default)s)",
    )
    p.add_argument("--seconds", type=float, default=3.0, help="duration of one measured run")
    p.add_argument("--warmup", type=float, default=0.5, help="unmeasured run before each measured one")
    p.add_argument("--reps", type=int, default=3, help="measured runs per (cores, mix, mode); the median is reported")
    p.add_argument("--clients-per-core", type=int, default=8)
    p.add_argument("--files-per-core", type=int, default=4)
    p.add_argument("--blocks", type=int, default=500, help="small blocks per file")
    p.add_argument("--big-mib", type=int, default=4, help="MiB per file for the 64 KiB reads")
    p.add_argument("--concurrency", type=int, default=8, help="[ioq2] concurrency per server for throughput runs")
    p.add_argument("--ioq1-concurrency", type=int, default=20, help="[ioq] concurrency (IOQ1 default 20)")
    p.add_argument(
        "--dispatch",
        default="fd_hash",
        help="[ioq2] dispatch_strategy (fd_hash sends each file to the server it lives with)",
    )
    p.add_argument(
        "--no-colocate",
        dest="colocate",
        action="store_false",
        help="put the file actors in hosts of their own instead of the IOQ2 server hosts",
    )
    p.add_argument("--prio-seconds", type=float, default=3.0)
    p.add_argument(
        "--prio-dispatch",
        default="server_per_scheduler",
        help="dispatch strategy for the prioritisation runs (see the module docstring)",
    )
    p.add_argument(
        "--prio-mix",
        default="small",
        choices=MIXES,
        help="mix for the prioritisation runs (the IO must be slow enough to build a backlog)",
    )
    p.add_argument("--out", default=RESULTS_DIR, help="folder for ioq.json and ioq.png (default bench/results)")
    p.add_argument("--quick", action="store_true", help="short runs (about 20 s in all)")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup, args.reps, args.prio_seconds = 0.6, 0.15, 1, 0.8
        args.blocks, args.big_mib, args.clients_per_core = 200, 2, 6
    cores = [int(c) for c in args.cores.split(",") if c.strip()]
    if not cores or any(c < 1 or c > ncpu for c in cores):
        p.error(f"--cores must be between 1 and {ncpu}, got {args.cores!r}")
    os.makedirs(args.out, exist_ok=True)
    per_run = args.reps * (args.warmup + args.seconds)
    estimate = len(cores) * (len(MIXES) * len(MODES) * per_run + 3 * args.prio_seconds)
    log(f"ioq bench: cores {cores}, about {estimate:.0f} s of measurement (+ setup)")
    started = time.perf_counter()
    results: dict[str, Any] = {"config": {k: v for k, v in vars(args).items()}, "cores": {}}
    with tempfile.TemporaryDirectory(prefix="ioq-bench-") as workdir:
        for k in cores:
            log(f"== {k} core(s)")
            with Node() as node:
                bench = Bench(node, k, args, workdir)
                try:
                    entry = bench.throughput()
                    entry["prioritisation"] = bench.prioritisation()
                finally:
                    bench.close()
            results["cores"][str(k)] = entry
    results["elapsed_s"] = time.perf_counter() - started
    print_table(results)
    path = os.path.join(args.out, "ioq.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=2)
    print(f"\nJSON: {path}")
    plot(results, os.path.join(args.out, "ioq.png"))
    print(f"elapsed {results['elapsed_s']:.1f} s")
    return 0


def print_table(results: dict[str, Any]) -> None:
    print()
    print(f"{'cores':>5} {'mix':>5} {'mode':>6} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8}   ratios")
    for k, entry in results["cores"].items():
        for mix in MIXES:
            m = entry[mix]
            for mode in MODES:
                r = m[mode]
                extra = ""
                if mode == "ioq2":
                    extra = f"ioq2/bypass {m['ioq2_vs_bypass']:.2f}  ioq2/ioq1 {m['ioq2_vs_ioq1']:.2f}"
                print(f"{k:>5} {mix:>5} {mode:>6} {r['rps']:9.0f} {r['p50_ms']:8.3f} {r['p99_ms']:8.3f}   {extra}")
    print()
    print(f"{'cores':>5}  compaction share served with db_compact priority = default / 1.0 / 10000")
    for k, entry in results["cores"].items():
        pr = entry["prioritisation"]
        print(
            f"{k:>5}  {pr['default']['compaction_share']:.3f} / {pr['1.0']['compaction_share']:.3f} / "
            f"{pr['10000']['compaction_share']:.3f}"
        )


def plot(results: dict[str, Any], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("PNG: skipped (matplotlib is not installed; pip install matplotlib to get the plot)")
        return
    cores = [int(k) for k in results["cores"]]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, mix in zip(axes[:2], MIXES):
        for mode in MODES:
            ax.plot(cores, [results["cores"][str(k)][mix][mode]["rps"] for k in cores], marker="o", label=mode)
        ax.set_title(f"{mix} mix: requests/s")
        ax.set_xlabel("cores")
        ax.set_xticks(cores)
        ax.legend()
    ax = axes[2]
    for setting in ("default", "1.0", "10000"):
        ax.plot(
            cores,
            [results["cores"][str(k)]["prioritisation"][setting]["compaction_share"] for k in cores],
            marker="o",
            label=f"db_compact={setting}",
        )
    ax.set_title("share of compaction served (half the clients compact)")
    ax.set_xlabel("cores")
    ax.set_xticks(cores)
    ax.set_ylim(0, 1)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"PNG: {path}")


if __name__ == "__main__":
    raise SystemExit(main())
