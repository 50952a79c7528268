"""smoosh benchmark: enqueue throughput, checkpoint cost, event-to-compaction latency.

Run ``python bench/smoosh.py`` (about a minute) or ``--quick`` (about 20 s).
Figures go to stdout (table) and ``bench/results/smoosh.json``.

What is measured, on real SQLite files in a temporary directory, with the
smoosh tree in its host process ``smoosh`` as in production:

* **enqueue throughput into a channel** (no observer attached): the host program casts ``n``
  ``("enqueue", key, priority)`` messages straight to the paused
  ``ratio_dbs`` channel and fences with a call; objects/second over the
  whole batch (cross-process casts, the channel inserting into its bounded
  priority queue).  Also the server path: ``sync_enqueue`` of a real
  database (staleness 0), which computes its priority from the file in
  every channel it tries; calls/second.
* **checkpoint write and restore, 100k entries**: the library
  (`persist.write` of a snapshot, `persist.unpersist`) and through the
  actors: a synchronous ``checkpoint_now`` of a channel holding 100k
  entries, and after a node restart the time from `start_smoosh` to the
  channel reporting its 100k restored entries.
* **update event to compaction start**: `handle_db_event(db,
  "local_updated")` in the host program, until the observer (an actor in
  the host program) hears that the VACUUM worker was started; each round
  waits for the compaction to finish and adds free pages again first.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Any

from _common import environment, take_first, write_json

from actors import GenServer, Node
from actors.smoosh import (
    PriorityQueue,
    SQLiteAdapter,
    channel_ref,
    handle_db_event,
    persist,
    start_smoosh,
    status,
    sync_enqueue,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

QUIET = {"checkpoint_interval": 3600.0, "check_window_interval": 3600.0, "status_interval": 3600.0}


class _Observer(GenServer):
    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q

    def handle_info(self, message: Any) -> None:
        self.q.put((time.perf_counter(), message))


def _wait(q: "queue.Queue[Any]", kind: str, channel: str | None = None, timeout: float = 60.0) -> tuple[float, tuple]:
    found = take_first(q, lambda item: item[1][1] == kind and (channel is None or item[1][2] == channel), timeout)
    if found is None:
        raise TimeoutError(f"no {kind} event within {timeout} s")
    return found


def _config(node: Node, state: str, wait_secs: str) -> None:
    cfg = node.config
    cfg.set("smoosh", "persist", "true")
    cfg.set("smoosh", "state_dir", state)
    cfg.set("smoosh", "staleness", "0")
    cfg.set("smoosh", "wait_secs", wait_secs)
    cfg.set("smoosh.ratio_dbs", "min_size", "1")
    cfg.set("smoosh.ratio_dbs", "min_priority", "1")
    cfg.set("smoosh.ratio_dbs", "capacity", "1000000")


def _start(node: Node, data: str, q: "queue.Queue[Any] | None") -> Any:
    """Start smoosh; without a queue there is no observer (nothing extra per message)."""
    observer = node.spawn(_Observer, q) if q is not None else None
    sup = start_smoosh(node, SQLiteAdapter(data), overrides=QUIET, observer=observer)
    if q is not None:
        for _ in range(7):
            _wait(q, "channel_started")
    elif len(status(node)) != 7:  # answered after the server created its channels
        raise AssertionError("smoosh did not start its 7 channels")
    return sup


def _make_db(path: str, rows: int, keep_every: int = 4) -> None:
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("CREATE TABLE IF NOT EXISTS docs (id INTEGER PRIMARY KEY, body BLOB)")
        con.execute("BEGIN")
        con.executemany("INSERT INTO docs (body) VALUES (?)", ((os.urandom(2048),) for _ in range(rows)))
        con.execute("COMMIT")
        con.execute("DELETE FROM docs WHERE id % ? != 0", (keep_every,))
    finally:
        con.close()


# -- measurements ------------------------------------------------------------------------


def bench_enqueue(node: Node, data: str, n: int, reps: int, server_n: int) -> dict[str, Any]:
    ratio = channel_ref("ratio_dbs", node)
    rates = []
    for rep in range(reps):
        ratio.call("flush")
        t0 = time.perf_counter()
        for i in range(n):
            ratio.cast(("enqueue", f"db{rep}_{i}", float(i % 997 + 2)))
        size = ratio.call("status")["waiting"]["size"]
        elapsed = time.perf_counter() - t0
        if size != n:
            raise AssertionError(f"channel holds {size} entries, expected {n}")
        rates.append(n / elapsed)
    ratio.call("flush")
    # The server path: priority computed from a real file in each channel tried.
    path = os.path.join(data, "enq.sqlite")
    _make_db(path, 400)
    t0 = time.perf_counter()
    taken = sum(1 for _ in range(server_n) if sync_enqueue("enq", node))
    server_elapsed = time.perf_counter() - t0
    ratio.call("flush")
    return {
        "channel_casts_per_s": round(statistics.median(rates)),
        "channel_casts_per_s_reps": [round(r) for r in rates],
        "n_per_rep": n,
        "server_sync_enqueue_per_s": round(server_n / server_elapsed),
        "server_sync_enqueue_n": server_n,
        "server_sync_enqueue_taken": taken,
    }


def bench_persist_library(tmp: str, entries: int, reps: int) -> dict[str, Any]:
    q = PriorityQueue()
    for i in range(entries):
        q.insert(f"shards/{i:08x}-ffffffff/db{i}.1700000000", float(i % 4000) / 16 + 2, entries)
    snap = persist.snapshot(q, ["active_a", "active_b"], ["starting_c"])
    writes, reads = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        persist.write(snap, persist.file_path(tmp, "bench"))
        writes.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        back = persist.unpersist(tmp, "bench", entries + 10)
        reads.append(time.perf_counter() - t0)
        if len(back) != len(snap):
            raise AssertionError(f"restored {len(back)} of {len(snap)} entries")
    size = os.path.getsize(persist.file_path(tmp, "bench"))
    persist.write({}, persist.file_path(tmp, "bench"))
    return {
        "entries": len(snap),
        "file_bytes": size,
        "write_ms": round(statistics.median(writes) * 1000, 1),
        "restore_ms": round(statistics.median(reads) * 1000, 1),
    }


def bench_persist_actors(tmp: str, entries: int) -> dict[str, Any]:
    data, state = os.path.join(tmp, "pdata"), os.path.join(tmp, "pstate")
    os.makedirs(data)
    os.makedirs(state)
    q: "queue.Queue[Any]" = queue.Queue()
    with Node() as node:
        _config(node, state, "3600")
        _start(node, data, None)
        ratio = channel_ref("ratio_dbs", node)
        for i in range(entries):
            ratio.cast(("enqueue", f"db{i}", float(i % 4000) / 16 + 2))
        if ratio.call("status")["waiting"]["size"] != entries:
            raise AssertionError("not every entry reached the channel")
        t0 = time.perf_counter()
        ratio.call("checkpoint_now", timeout=120)
        checkpoint = time.perf_counter() - t0
        t0 = time.perf_counter()
    shutdown = time.perf_counter() - t0
    q = queue.Queue()
    with Node() as node:
        _config(node, state, "3600")
        t0 = time.perf_counter()
        observer = node.spawn(_Observer, q)
        start_smoosh(node, SQLiteAdapter(data), overrides=QUIET, observer=observer)
        at, event = _wait(q, "channel_up", "ratio_dbs")
        restore = at - t0
        if event[3] != entries:
            raise AssertionError(f"restored {event[3]} entries, expected {entries}")
        channel_ref("ratio_dbs", node).call("flush")
    return {
        "entries": entries,
        "checkpoint_now_ms": round(checkpoint * 1000, 1),
        "shutdown_with_final_checkpoint_ms": round(shutdown * 1000, 1),
        "start_to_channel_restored_ms": round(restore * 1000, 1),
    }


def bench_event_latency(node: Node, data: str, q: "queue.Queue[Any]", rounds: int) -> dict[str, Any]:
    path = os.path.join(data, "lat.sqlite")
    samples = []
    for _ in range(rounds):
        _make_db(path, 300)  # free pages again: priority above min_priority
        t0 = time.perf_counter()
        handle_db_event("lat", "local_updated", node)
        at, _ = _wait(q, "started", "ratio_dbs")
        samples.append((at - t0) * 1000)
        _, event = _wait(q, "exited", "ratio_dbs")
        if event[4] != "normal":
            raise AssertionError(f"compaction failed: {event!r}")
    samples.sort()
    return {
        "rounds": rounds,
        "p50_ms": round(statistics.median(samples), 2),
        "p90_ms": round(samples[int(0.9 * (len(samples) - 1))], 2),
        "max_ms": round(samples[-1], 2),
        "mean_ms": round(statistics.fmean(samples), 2),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = args.quick
    n, reps, server_n = (20_000, 2, 200) if quick else (100_000, 5, 1000)
    rounds = 15 if quick else 60
    tmp = tempfile.mkdtemp(prefix="smoosh-bench-")
    try:
        data, state = os.path.join(tmp, "data"), os.path.join(tmp, "state")
        os.makedirs(data)
        os.makedirs(state)
        results: dict[str, Any] = {}
        with Node() as node:
            _config(node, state, "3600")
            _start(node, data, None)
            print("enqueue throughput ...", file=sys.stderr)
            results["enqueue"] = bench_enqueue(node, data, n, reps, server_n)
        print("checkpoint (library) ...", file=sys.stderr)
        results["checkpoint_library"] = bench_persist_library(tmp, 100_000, 3 if quick else 5)
        print("checkpoint (actors) ...", file=sys.stderr)
        results["checkpoint_actors"] = bench_persist_actors(tmp, 100_000)
        q = queue.Queue()
        with Node() as node:
            _config(node, state, "0")
            _start(node, data, q)
            print("event to compaction start ...", file=sys.stderr)
            results["event_to_start"] = bench_event_latency(node, data, q, rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"bench": "smoosh", "mode": "quick" if quick else "full", "environment": environment(), **results}


def report(data: dict[str, Any]) -> str:
    e, cl, ca, lat = data["enqueue"], data["checkpoint_library"], data["checkpoint_actors"], data["event_to_start"]
    return "\n".join(
        [
            f"smoosh ({data['mode']})",
            f"  enqueue into a channel      {e['channel_casts_per_s']:>10,} objects/s  ({e['n_per_rep']:,} per rep)",
            f"  sync_enqueue via the server {e['server_sync_enqueue_per_s']:>10,} calls/s",
            f"  checkpoint write, {cl['entries']:,} entries  {cl['write_ms']:>8} ms  ({cl['file_bytes']:,} bytes)",
            f"  checkpoint restore, {cl['entries']:,}      {cl['restore_ms']:>8} ms",
            f"  actor checkpoint_now, {ca['entries']:,}    {ca['checkpoint_now_ms']:>8} ms",
            f"  start to channel restored   {ca['start_to_channel_restored_ms']:>8} ms",
            f"  event -> compaction start   p50 {lat['p50_ms']} ms  p90 {lat['p90_ms']} ms  max {lat['max_ms']} ms"
            f"  ({lat['rounds']} rounds)",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller batches and fewer rounds (~20 s)")
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results/smoosh.json")
    args = ap.parse_args(argv)
    data = run(args)
    print(report(data))
    if not args.no_write:
        path = write_json("smoosh", data)
        print(f"\nwrote {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
