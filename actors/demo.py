"""The main job: boot a node, run a workload, kill actors, check nothing was lost."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from actors import Node
from actors.chaos import build_demo_tree, run_chaos, tree_workers
from actors.cli import status_text

__all__ = ["run_demo"]


def run_demo(args: Any) -> int:
    duration = 4.0 if args.short else args.duration
    rate = max(args.kill_rate, 2.0) if args.short else args.kill_rate
    with Node(args.config) as node:
        print(f"node up, runtime directory {node.rundir}", flush=True)
        top = build_demo_tree(node)
        workers, sups = tree_workers(top)
        print(f"supervision tree: {len(sups)} supervisors, {len(workers)} workers in "
              f"{len({w.os_pid for w in workers})} OS processes", flush=True)
        victim = next(w for w in workers if w.os_pid != os.getpid())
        mon = node.monitor(victim)
        t0 = time.monotonic()
        os.kill(victim.os_pid, signal.SIGKILL)
        ref, reason = mon.wait(10)
        print(f"SIGKILLed pid {victim.os_pid}: DOWN {ref!r} reason={reason!r} after "
              f"{(time.monotonic() - t0) * 1000:.1f} ms", flush=True)
        live = sys.stdout.isatty() and not args.no_live
        last = [0.0]

        def tick(elapsed: float) -> None:
            if elapsed - last[0] < (0.5 if live else 5.0):
                return
            last[0] = elapsed
            if live:
                counters = node.stats()["counters"]
                print("\x1b[2J\x1b[H" + status_text(node.id, os.getpid(), node.actors(), node.hosts(), counters))
                print(f"\n{elapsed:5.1f}/{duration:.0f} s", flush=True)
            else:
                print(f"  {elapsed:5.1f}/{duration:.0f} s", flush=True)

        report = run_chaos(node, top, rate, duration, seed=args.seed, on_tick=tick)
        for line in report.lines():
            print(line)
        ok = report.ok and reason == "killed"
        print("demo OK: nothing hung, nothing lost" if ok else "demo FAILED")
        return 0 if ok else 1
