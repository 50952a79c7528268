"""The command line: ``python -m actors {demo,chaos,status,bench}``."""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
from typing import Any, Sequence

__all__ = ["main"]


def _positive(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m actors", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log info messages")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="boot the whole node, drive a workload, kill actors, check nothing is lost")
    demo.add_argument("--duration", type=_positive, default=60.0, help="seconds of workload (default 60)")
    demo.add_argument("--kill-rate", type=_positive, default=0.5, help="kills per second (default 0.5)")
    demo.add_argument("--state-dir", default=None, help="where SQLite files and queues live (default: fresh temp dir)")
    demo.add_argument("--config", default=None, help="ini file with [ioq2], [smoosh], [replicator], [couch_jobs] ...")
    demo.add_argument("--short", action="store_true", help="a few seconds, for tests and smoke checks")
    demo.add_argument("--no-live", action="store_true", help="no refreshing terminal view")
    demo.add_argument("--seed", type=int, default=None)
    demo.add_argument("--store", default="sqlite", metavar="{sqlite,postgres,URL}",
                      help="couch_jobs store: sqlite (a file), postgres (a throwaway PostgreSQL "
                           "server from pgserver) or a postgresql:// URL of your own server")

    chaos = sub.add_parser("chaos", help="kill actors in a demo supervision tree at a rate; report restarts and hangs")
    chaos.add_argument("--rate", type=_positive, default=5.0, help="kills per second (default 5)")
    chaos.add_argument("--duration", type=_positive, default=10.0, help="seconds (default 10)")
    chaos.add_argument("--clients", type=int, default=3)
    chaos.add_argument("--seed", type=int, default=None)
    chaos.add_argument("--tree", choices=["demo", "couch"], default="demo",
                       help="demo: a three-level tree of workers; couch: the full application tree")

    status = sub.add_parser("status", help="attach to a running node through its runtime directory")
    status.add_argument("rundir", help="the node's runtime directory (printed at start, or Node.rundir)")
    status.add_argument("--watch", type=_positive, default=0.0, help="refresh every N seconds")
    status.add_argument("--count", type=int, default=0, help="with --watch: stop after N refreshes")

    bench = sub.add_parser("bench", help="run every harness in bench/ per core count")
    bench.add_argument("--cores", default=None, help="comma-separated core counts (default 1..N)")
    bench.add_argument("--quick", action="store_true")
    bench.add_argument("--only", default=None, help="comma-separated harness names")
    bench.add_argument("--out", default="bench/results", help="output folder")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.CRITICAL,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "demo":
        from actors.demo import run_demo

        return run_demo(args)
    if args.command == "chaos":
        return _chaos(args)
    if args.command == "status":
        return _status(args)
    if args.command == "bench":
        from actors.benchrun import run_benches

        return run_benches(args)
    return 2


def _chaos(args: Any) -> int:
    from actors import Node
    from actors.chaos import build_demo_tree, run_chaos

    if args.tree == "couch":
        # The full application under the demo's workload: its report counts
        # restarts, escalations, and IO calls answered, failed and hung.
        from argparse import Namespace

        from actors.demo import run_demo

        return run_demo(Namespace(duration=args.duration, kill_rate=args.rate, state_dir=None, config=None,
                                  short=False, no_live=True, seed=args.seed))
    with Node() as node:
        top = build_demo_tree(node)
        print(f"tree up in {node.rundir}; killing {args.rate}/s for {args.duration:.0f} s", flush=True)

        def tick(elapsed: float) -> None:
            if sys.stderr.isatty():
                done = min(1.0, elapsed / max(args.duration, 1e-9))
                bar = "#" * int(done * 30)
                print(f"\r[{bar:<30}] {elapsed:5.1f}/{args.duration:.0f} s", end="", file=sys.stderr, flush=True)

        report = run_chaos(node, top, args.rate, args.duration, clients=args.clients, seed=args.seed, on_tick=tick)
        if sys.stderr.isatty():
            print(file=sys.stderr)
        for line in report.lines():
            print(line)
        print("OK: no call hung" if report.ok else "FAIL: calls hung")
        return 0 if report.ok else 1


def _status(args: Any) -> int:
    from actors.attach import Attached

    try:
        view = Attached(args.rundir)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        shown = 0
        while True:
            actors = view.actors()
            hosts = view.hosts()
            counters = view.stats().get("counters", {})
            if args.watch and sys.stdout.isatty():
                print("\x1b[2J\x1b[H", end="")
            print(status_text(view.node_id, view.node_pid, actors, hosts, counters))
            shown += 1
            if not args.watch or (args.count and shown >= args.count):
                return 0
            time.sleep(args.watch)  # pacing a human-facing refresh, not synchronisation
    finally:
        view.close()


def status_text(node_id: str, node_pid: int, actors: list[dict[str, Any]], hosts: list[dict[str, Any]],
                counters: dict[str, Any]) -> str:
    from actors.tree import render_tree

    width = shutil.get_terminal_size((120, 40)).columns
    live_hosts = [h for h in hosts if h["state"] == "up"]
    lines = [f"node {node_id} (pid {node_pid}): {len(actors)} actors, {len(live_hosts)} host processes"]
    for h in live_hosts:
        lines.append(f"  host {h['label'] or h['proc']}: pid {h['pid']} cpus {h['cpus'] or 'any'}")
    restarts = {k[len('supervision.restarts.'):]: v for k, v in counters.items()
                if k.startswith("supervision.restarts.")}
    if restarts:
        lines.append("restarts: " + ", ".join(f"{k} {v}" for k, v in sorted(restarts.items())))
    lines.append("tree:")
    lines.extend("  " + line[: width - 2] for line in render_tree(actors))
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
