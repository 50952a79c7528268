"""What counting calls and casts per actor class costs the message path.

Runs ``bench/messaging.py --quick --section ipc`` alternately from a
baseline checkout (``--baseline DIR``: the same repository at the commit
before the counting, e.g. ``git worktree add /tmp/base <commit>``) and from
this one, ``--rounds`` times each, and compares the medians: actor call
round trip p50 (``actor``, ``main``, ``local``) and cast throughput
(``actor``, ``local``), each also as a ratio to the raw pyzmq row measured
in the same run, which takes most of the machine's load out of the
comparison.  Prints the table and writes ``bench/results/metrics_overhead.json``.
Every run is bounded by a timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CALL_KINDS = ("actor", "main", "local")
CAST_KINDS = ("actor", "local")


def _one_run(tree: str, timeout: float) -> dict[str, Any]:
    """One quick ipc messaging run from ``tree``; its JSON results."""
    env = {**os.environ, "PYTHONPATH": tree}
    subprocess.run(
        [sys.executable, os.path.join(tree, "bench", "messaging.py"), "--quick", "--section", "ipc"],
        cwd=tree,
        env=env,
        check=True,
        timeout=timeout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with open(os.path.join(tree, "bench", "results", "messaging.json")) as f:
        return json.load(f)


def _figures(data: dict[str, Any]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for label, r in data["placements"].items():
        raw_call = r["call"]["raw"]["p50_us"]
        raw_cast = r["cast"]["raw"]["msgs_per_s"]
        row: dict[str, float] = {}
        for kind in CALL_KINDS:
            row[f"call_{kind}_p50_us"] = r["call"][kind]["p50_us"]
            row[f"call_{kind}_x_raw"] = r["call"][kind]["p50_us"] / raw_call
        for kind in CAST_KINDS:
            row[f"cast_{kind}_per_s"] = r["cast"][kind]["msgs_per_s"]
            row[f"cast_{kind}_x_raw"] = r["cast"][kind]["msgs_per_s"] / raw_cast
        out[label] = row
    return out


# The kernel's own counter, imported from its private module on purpose: this
# diagnostic times the statements the kernel runs around every call.
_MICRO_SETUP = """
from bisect import bisect_left
from time import perf_counter
from actors._core.runtime.meter import CALL_BOUNDS, Meter
class Cell: pass
self = Cell(); self.meter = Meter()
def handle_call(body, from_): return body
"""
_MICRO_PLAIN = "result = handle_call(1, None)"
# The statements actors._core.cell.cell.Cell._handle_one adds around handle_call (keep in step with it).
_MICRO_METERED = """meter = self.meter
meter.calls += 1
started = perf_counter()
result = handle_call(1, None)
took = perf_counter() - started
meter.call_seconds += took
meter.buckets[bisect_left(CALL_BOUNDS, took)] += 1"""


def micro(n: int = 500_000) -> dict[str, float]:
    """Nanoseconds a call spends in the counting alone (best of 5, in this process)."""
    import timeit

    plain = min(timeit.repeat(_MICRO_PLAIN, _MICRO_SETUP, number=n, repeat=5)) / n * 1e9
    metered = min(timeit.repeat(_MICRO_METERED, _MICRO_SETUP, number=n, repeat=5)) / n * 1e9
    return {"plain_ns": round(plain, 1), "metered_ns": round(metered, 1), "added_ns": round(metered - plain, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, metavar="DIR", help="a checkout of the commit to compare with")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each tree, alternating (default 2)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take")
    args = ap.parse_args()
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"baseline": [], "metrics": []}
    started = time.monotonic()
    for i in range(max(1, args.rounds)):
        for name, tree in (("baseline", os.path.abspath(args.baseline)), ("metrics", ROOT)):
            print(f"round {i + 1}: {name} ...", file=sys.stderr, flush=True)
            runs[name].append(_figures(_one_run(tree, args.timeout)))
    medians: dict[str, dict[str, dict[str, float]]] = {}
    for name, figs in runs.items():
        medians[name] = {
            label: {key: statistics.median(f[label][key] for f in figs) for key in figs[0][label]} for label in figs[0]
        }
    print("metrics tree / baseline tree (median of each; < 1 is faster for call p50, > 1 faster for casts)")
    print(f"{'placement':<10} " + " ".join(f"{k:>22}" for k in medians["baseline"]["unpinned"]))
    ratios: dict[str, dict[str, float]] = {}
    for label, base in medians["baseline"].items():
        new = medians["metrics"][label]
        ratios[label] = {k: round(new[k] / base[k], 3) for k in base}
        print(f"{label:<10} " + " ".join(f"{ratios[label][k]:>22.3f}" for k in base))
    added = micro()
    print(
        f"the counting alone: {added['added_ns']:.0f} ns per call ({added['plain_ns']:.0f} -> "
        f"{added['metered_ns']:.0f} ns around a trivial handle_call)"
    )
    out = {
        "bench": "metrics_overhead",
        "micro": added,
        "rounds": args.rounds,
        "seconds": round(time.monotonic() - started, 1),
        "load_average": os.getloadavg(),
        "medians": medians,
        "ratios": ratios,
        "runs": runs,
    }
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "metrics_overhead.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
