"""What process groups and cluster-wide names cost, against a plain cross-node call.

Node a lives in this process; nodes b and c are `bench/_node_peer.py`
in their own OS processes on 127.0.0.1 with a real cluster key (CurveZMQ
on).  Rows, each with the baseline measured in the same run (a call from a
to an actor of b and back):

- ``global register``: `global_names.register` of a fresh name from a
  (locks and writes on three nodes' copies), then its `unregister`;
- ``pg join seen on b``: `pg.join` on a until b's subscriber has the
  ``("join", ...)`` message (a's call to b's subscriber waits for it);
- ``1,000 members``: 1,000 actors (334/333/333 on the three nodes) each
  joining one of 100 groups, until every node's subscriber has all of them.

Run: python bench/_groups.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

from _common import environment, summarize, write_json
from _group_actors import Member, Spawner, ViewWatcher
from _netkit import NodeProcess

from actors import Node, global_names, pg
from actors.cluster_key import write_new


def _timed(fn: Any, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    rounds = max(10, min(args.rounds, 10_000))
    tmp = tempfile.mkdtemp(prefix="bench-groups-")
    key = os.path.join(tmp, "cluster.key")
    write_new(key)
    b = c = None
    rows: dict[str, Any] = {}
    try:
        with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key) as a:
            b, c = NodeProcess("b", key), NodeProcess("c", key)
            for peer in (b, c):
                a.connect(peer.address)
            assert b.ask("wait_for c", "WAITED") == "True"
            for name in (None, "b", "c"):
                a.spawn(pg.Scope, node=name)
                a.spawn(global_names.NameServer, node=name)
            on_b = a.spawn(Member, "b", node="b")
            baseline = _timed(lambda: on_b.call(("ping",)), rounds)
            me = a.spawn(Member, "a")
            counter = iter(range(10_000_000))

            def register_once() -> None:
                name = f"bench{next(counter)}"
                assert global_names.register(name, me)
                assert global_names.unregister(name)

            register = _timed(register_once, rounds)
            watcher = a.spawn(ViewWatcher, ["bench"], node="b")
            joined: list[Any] = []

            def join_once() -> None:
                joined.append(me)
                pg.join("bench", me)
                watcher.call(("await", {"bench": list(joined)}), timeout=30.0)

            join = _timed(join_once, rounds)
            groups = [f"g{i}" for i in range(100)]
            watchers = [a.spawn(ViewWatcher, groups, node=n) for n in (None, "b", "c")]
            spawners = [a.spawn(Spawner, node=n) for n in (None, "b", "c")]
            t0 = time.perf_counter()
            members: list[Any] = []
            for spawner, count in zip(spawners, (334, 333, 333)):
                offset = len(members)
                members += spawner.call(
                    ("spawn_members", count, [[groups[(offset + i) % 100]] for i in range(count)]), timeout=120.0
                )
            t_joined = time.perf_counter()
            expected: dict[Any, list[Any]] = {g: [] for g in groups}
            for i, ref in enumerate(members):
                expected[groups[i % 100]].append(ref)
            for w in watchers:
                w.call(("await", expected), timeout=120.0)
            t_seen = time.perf_counter()
            rows = {
                "baseline_call_a_to_b": summarize(baseline),
                "global_register_and_unregister": summarize(register),
                "pg_join_seen_on_b": summarize(join),
                "thousand_members": {
                    "joins_s": round(t_joined - t0, 3),
                    "seen_everywhere_after_last_join_s": round(t_seen - t_joined, 4),
                    "total_s": round(t_seen - t0, 3),
                },
            }
    finally:
        for peer in (b, c):
            if peer is not None:
                peer.close()
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
    base = rows["baseline_call_a_to_b"]["p50_us"]
    print(f"{'row':<34} {'p50':>10} {'p99':>10}  ratio to the call (p50)")
    for label in ("baseline_call_a_to_b", "global_register_and_unregister", "pg_join_seen_on_b"):
        r = rows[label]
        print(f"{label:<34} {r['p50_us']:>8.0f}us {r['p99_us']:>8.0f}us  {r['p50_us'] / base:6.1f}x")
    t = rows["thousand_members"]
    print(
        f"1,000 members in 100 groups on 3 nodes: joins {t['joins_s']} s, every node's view complete "
        f"{t['seen_everywhere_after_last_join_s']} s after the last join ({t['total_s']} s in all)"
    )
    path = write_json("groups", {"rounds": rounds, "rows": rows, "environment": environment()})
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
