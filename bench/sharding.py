"""Sharded entities over three node processes, against plain actors in the same run.

Run ``python bench/sharding.py`` (about 1 minute) or ``--quick`` (about 20 s).

Three nodes on 127.0.0.1 (the bench's own, a, and two node processes, b and
c, this script again with ``--peer``), a region of ``counter`` on each,
100 shards, no store.  Rows:

* ``activations/s``: the first call to each of N keys from a (each starts
  its entity on the node owning its shard: two thirds of them on another
  node);
* ``entity calls/s``: calls to keys already active, round robin;
* ``plain calls/s``: the same number of calls to one plain `GenServer` per
  node (the baseline: no routing, no region); the ratio is the cost of
  addressing by key;
* ``move time``: c leaves (its node closes); from then until every key
  that lived on c answers again from a;
* the RSS of each node process after activation.

Every loop is bounded by a count and a deadline.  Results go to stdout (a
table) and ``bench/results/sharding.json``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from _common import Progress, environment, write_json

from actors import Exit, GenServer, Node, sharding

SHARDS = 100
DEADLINE = 300.0


class BenchCounter:
    def __init__(self, context: Any) -> None:
        self.n = 0
        self.context = context

    def handle_call(self, request: Any) -> Any:
        if request == "where":
            return self.context.ref.node_id.partition("@")[0]
        self.n += request
        return self.n


class Plain(GenServer):
    def init(self) -> None:
        self.n = 0

    def handle_call(self, request: Any, from_: Any) -> Any:
        self.n += request
        return self.n


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peer(name: str, key: str) -> int:
    with Node(name=name, listen="tcp://127.0.0.1:0", cluster_key=key) as node:
        sharding.start(node, "counter", BenchCounter, shards=SHARDS, idle=None, rebalance_every=0.5)
        print(f"ADDR {node.address} {os.getpid()}", flush=True)
        sys.stdin.read()  # until the bench closes our stdin
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--entities", type=int, default=None)
    parser.add_argument("--peer", default=None)
    parser.add_argument("--key", default=None)
    args = parser.parse_args()
    if args.peer:
        return peer(args.peer, args.key)
    entities = args.entities or (3_000 if args.quick else 30_000)
    calls = entities
    progress = Progress(4, "sharding")
    with tempfile.TemporaryDirectory() as tmp:
        key = os.path.join(tmp, "cluster.key")
        subprocess.run([sys.executable, "-m", "actors", "keygen", key], check=True, capture_output=True, timeout=60)
        procs = {
            n: subprocess.Popen(
                [sys.executable, __file__, "--peer", n, "--key", key],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in ("b", "c")
        }
        try:
            with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key) as node:
                pids = {"a": os.getpid()}
                for n, proc in procs.items():
                    assert proc.stdout is not None
                    _, address, pid = proc.stdout.readline().split()
                    pids[n] = int(pid)
                    node.connect(address)
                sharding.start(node, "counter", BenchCounter, shards=SHARDS, idle=None, rebalance_every=0.5)
                deadline = time.monotonic() + DEADLINE
                while len(sharding.status("counter").get("table", {}).get("shards", {})) < 3:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)  # the regions finding each other: polled, not timed
                progress.step("activations")
                keys = [f"user-{i}" for i in range(entities)]
                t0 = time.perf_counter()
                for k in keys:
                    sharding.ref("counter", k).call(1, timeout=30.0)
                activation_s = time.perf_counter() - t0
                rss = {n: rss_mb(p) for n, p in pids.items()}
                progress.step("entity calls")
                t0 = time.perf_counter()
                for i in range(calls):
                    sharding.ref("counter", keys[i % entities]).call(1, timeout=30.0)
                entity_s = time.perf_counter() - t0
                progress.step("plain calls")
                plains = [node.spawn(Plain)] + [node.spawn(Plain, node=n) for n in ("b", "c")]
                t0 = time.perf_counter()
                for i in range(calls):
                    plains[i % 3].call(1, timeout=30.0)  # type: ignore[union-attr]
                plain_s = time.perf_counter() - t0
                progress.step("move")
                on_c = [k for k in keys[:2000] if sharding.ref("counter", k).call("where") == "c"]
                t0 = time.perf_counter()
                assert procs["c"].stdin is not None
                procs["c"].stdin.close()
                for k in on_c:
                    while True:
                        try:
                            sharding.ref("counter", k).call(0, timeout=10.0)
                            break
                        except Exit:
                            assert time.monotonic() < deadline
                move_s = time.perf_counter() - t0
        finally:
            for proc in procs.values():
                if proc.stdin is not None and not proc.stdin.closed:
                    proc.stdin.close()
                proc.wait(timeout=60)
    result = {
        "environment": environment(),
        "entities": entities,
        "calls": calls,
        "activations_per_s": entities / activation_s,
        "entity_calls_per_s": calls / entity_s,
        "plain_calls_per_s": calls / plain_s,
        "entity_vs_plain": (calls / entity_s) / (calls / plain_s),
        "move_seconds": move_s,
        "moved_keys_checked": len(on_c),
        "rss_mb": rss,
    }
    write_json("sharding", result)
    print(f"{'row':<28}{'value':>14}")
    print(f"{'activations/s':<28}{result['activations_per_s']:>14.0f}")
    print(f"{'entity calls/s':<28}{result['entity_calls_per_s']:>14.0f}")
    print(f"{'plain calls/s':<28}{result['plain_calls_per_s']:>14.0f}")
    print(f"{'entity / plain':<28}{result['entity_vs_plain']:>14.2f}")
    print(f"{'move time of c (s)':<28}{move_s:>14.2f}")
    for n, mb in rss.items():
        print(f"{'RSS ' + n + ' (MB)':<28}{mb:>14.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
