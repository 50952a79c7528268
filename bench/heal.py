"""How long after a network cut ends until the cluster has re-formed (every node lists every other).

Three ``otpy node`` daemons on three network-namespace hosts (`_netkit.Cluster`:
own address, cluster key, seeded with each other).  Each round
cuts h3 off from the switch, waits until h1 and h2 have declared it down
and h3 has ended its incarnation and started a new one (it was alone: the
minority), heals, and times from the heal to the moment every node lists
every other (each node asked through its runtime directory, every 0.1 s).
Repeated for each ``--ticktimes`` value; the figure to compare with is the
promise, ``2 x net_ticktime + 10 s``.  Needs root and iproute2.

Run: sudo python bench/heal.py [--rounds 5] [--ticktimes 2,15] [--quick]
Writes bench/results/heal.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from _common import environment, median, write_json
from _netkit import Cluster

from actors.app.workload.netns import Topology, missing
from actors.cluster_key import write_new

HOSTS = ["h1", "h2", "h3"]


def rounds_for(ticktime: float, rounds: int, key: str) -> list[float]:
    """Seconds from each heal to a full mesh, ``rounds`` cuts of h3 at ``ticktime``."""
    samples: list[float] = []
    with Topology(HOSTS) as topo:
        cluster = Cluster(topo, HOSTS, key, ticktime)
        try:
            cluster.wait_mesh(120.0)
            for r in range(rounds):
                incarnations = len(cluster["h3"].readies)
                topo.cut("h3")
                cluster.wait_views({"h1": ["h2"], "h2": ["h1"]}, 4 * ticktime + 30.0, "h3 seen down")
                cluster["h3"].wait_ready(incarnations + 1, timeout=4 * ticktime + 60.0)
                topo.heal()
                took = cluster.wait_mesh(2 * ticktime + 60.0)
                samples.append(took)
                print(
                    f"  net_ticktime {ticktime:g} s, round {r + 1}: full mesh {took:.2f} s after the heal",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            topo.heal()
            cluster.close()
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ticktimes", default="2,15", help="comma-separated net_ticktime values (default 2,15)")
    parser.add_argument("--quick", action="store_true", help="2 rounds at net_ticktime 2 s only")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.ticktimes = 2, "2"
    why = missing()
    if why:
        print(f"bench/heal.py: {why}", file=sys.stderr)
        return 2
    ticktimes = [float(t) for t in args.ticktimes.split(",")]
    results = {"bench": "heal", "environment": environment(), "rounds": args.rounds, "rows": []}
    with tempfile.TemporaryDirectory(prefix="otpy-heal-") as tmp:  # the key file; removed with it
        key = os.path.join(tmp, "cluster.key")
        write_new(key)
        for ticktime in ticktimes:
            started = time.monotonic()
            samples = rounds_for(ticktime, args.rounds, key)
            bound = 2 * ticktime + 10.0
            row = {
                "net_ticktime_s": ticktime,
                "heal_s": [round(s, 3) for s in samples],
                "median_s": round(median(samples), 3),
                "max_s": round(max(samples), 3),
                "bound_s": bound,
                "median_over_bound": round(median(samples) / bound, 3),
                "wall_s": round(time.monotonic() - started, 1),
            }
            results["rows"].append(row)
    print(f"{'net_ticktime':>12}  {'rounds':>6}  {'median heal':>11}  {'max':>7}  {'bound 2T+10':>11}  ratio")
    for row in results["rows"]:
        print(
            f"{row['net_ticktime_s']:>10g} s  {len(row['heal_s']):>6}  {row['median_s']:>9.2f} s  "
            f"{row['max_s']:>5.2f} s  {row['bound_s']:>9g} s  {row['median_over_bound']:.2f}"
        )
    print(f"results: {write_json('heal', results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
