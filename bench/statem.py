"""GenStatem against a GenServer running the same logic, in one run.

Run ``python bench/statem.py`` (about 30 s) or ``--quick`` (a few seconds).

The logic is OTP's pushbutton: a cast ``"push"`` toggles between ``off`` and
``on`` and counts the pushes into ``on``; a call ``"get"`` answers the
count.  The GenServer keeps its state in an attribute and branches on it;
the GenStatem has one method per state and changes state with
`NextState`.  Three workloads, each run on both, interleaved (GenServer,
GenStatem, GenServer, ...) so that drift hits both alike:

* ``casts``: the host program casts ``--events`` pushes, then one call waits
  for them all to be handled; the cost per event is the time over the events;
* ``calls``: the host program calls ``"get"`` ``--events // 10`` times (round trips);
* ``casts_timeout``: as ``casts``, but each push also (re)starts a timeout
  (the GenServer returns `actors.Timeout`, the machine sets an `EventTimeout`):
  the cost of OTP's idle-timeout idiom.

Both actors run in the host program's process (``host=None``), so the figures
are the behaviour's cost over the same kernel path.  The median of ``--reps``
repetitions is reported with the ratio GenStatem / GenServer per workload
(the goal: at most 1.2).  Results go to stdout (table),
``bench/results/statem.json`` and stderr (progress).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from _common import Progress, environment, median, write_json

from actors import GenServer, GenStatem, Node, Timeout
from actors.gen_statem import EventTimeout, KeepState, NextState, Reply

GOAL = 1.2


class ButtonServer(GenServer):
    """The pushbutton as a GenServer: the state is an attribute."""

    def init(self, timeout: float | None = None) -> None:
        self.state = "off"
        self.count = 0
        self.timeout = timeout

    def handle_cast(self, request: Any) -> Any:
        if self.state == "off":
            self.state = "on"
            self.count += 1
        else:
            self.state = "off"
        return None if self.timeout is None else Timeout(self.timeout)

    def handle_call(self, request: Any, from_: Any) -> Any:
        return self.count


class ButtonStatem(GenStatem):
    """The pushbutton as a GenStatem: one method per state."""

    def init(self, timeout: float | None = None) -> str:
        self.count = 0
        self.after = () if timeout is None else (EventTimeout(timeout, "idle"),)
        return "off"

    def off(self, event_type: Any, content: Any) -> Any:
        if event_type == "cast":
            self.count += 1
            return NextState("on", *self.after)
        return KeepState(Reply(event_type[1], self.count))

    def on(self, event_type: Any, content: Any) -> Any:
        if event_type == "cast":
            return NextState("off", *self.after)
        return KeepState(Reply(event_type[1], self.count))


def run_casts(node: Node, cls: type, events: int, timeout: float | None) -> float:
    """Microseconds per cast handled."""
    ref = node.spawn(cls, timeout)
    assert ref is not None
    ref.call("get", timeout=60)  # started and warm
    started = time.perf_counter()
    for _ in range(events):
        ref.cast("push")
    count = ref.call("get", timeout=120)
    took = time.perf_counter() - started
    assert count == events // 2 + events % 2, (cls.__name__, count)
    node.stop(ref)
    return took / events * 1e6


def run_calls(node: Node, cls: type, events: int) -> float:
    """Microseconds per call round trip."""
    ref = node.spawn(cls)
    assert ref is not None
    ref.call("get", timeout=60)
    started = time.perf_counter()
    for _ in range(events):
        ref.call("get", timeout=60)
    took = time.perf_counter() - started
    node.stop(ref)
    return took / events * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer events and repetitions")
    parser.add_argument("--events", type=int, default=None, help="events per repetition (default 100000; quick 20000)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 7; quick 3)")
    args = parser.parse_args()
    events = args.events or (20_000 if args.quick else 100_000)
    reps = args.reps or (3 if args.quick else 7)
    workloads: dict[str, Any] = {
        "casts": lambda node, cls: run_casts(node, cls, events, None),
        "calls": lambda node, cls: run_calls(node, cls, max(1, events // 10)),
        "casts_timeout": lambda node, cls: run_casts(node, cls, events, 60.0),
    }
    samples: dict[str, dict[str, list[float]]] = {w: {"gen_server": [], "gen_statem": []} for w in workloads}
    progress = Progress(reps * len(workloads), "statem")
    with Node() as node:
        for _ in range(reps):
            for name, run in workloads.items():
                samples[name]["gen_server"].append(run(node, ButtonServer))
                samples[name]["gen_statem"].append(run(node, ButtonStatem))
                progress.step(name)
    results: dict[str, Any] = {}
    print(f"{'workload':<15} {'gen_server us':>14} {'gen_statem us':>14} {'ratio':>7}")
    worst = 0.0
    for name, by in samples.items():
        base, statem = median(by["gen_server"]), median(by["gen_statem"])
        ratio = statem / base
        worst = max(worst, ratio)
        results[name] = {
            "gen_server_us": round(base, 3),
            "gen_statem_us": round(statem, 3),
            "ratio": round(ratio, 3),
            "samples": {k: [round(v, 3) for v in vs] for k, vs in by.items()},
        }
        print(f"{name:<15} {base:>14.2f} {statem:>14.2f} {ratio:>7.3f}")
    verdict = "ok" if worst <= GOAL else "over"
    print(f"worst ratio {worst:.3f} (goal <= {GOAL}): {verdict}")
    path = write_json(
        "statem",
        {
            "events": events,
            "reps": reps,
            "quick": args.quick,
            "goal_ratio": GOAL,
            "worst_ratio": round(worst, 3),
            "workloads": results,
            "environment": environment(),
        },
    )
    print(f"results: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
