"""The command line: ``otpy`` (or ``python -m actors``) demo, node, chaos, status, observe, bench, keygen.

Every subcommand is one ``add_<name>(subparsers)`` function in `COMMANDS`
that declares its options and sets ``run``; adding a subcommand is writing
one such function and listing it.

One error path: a user error (bad option, bad config file or value, a
directory that is not a running node's) ends as one line on stderr naming
what and where, and exit status 2; the traceback only with ``-v``.

Each ``_run_<name>`` imports what its subcommand runs when it runs, not at
the top: ``observe`` needs the optional ``[observer]`` extra (starlette,
uvicorn), and ``--help`` or ``status`` need not load every subsystem (0.3 s
against 0.7 s).  Nothing here is imported late to dodge a cycle.
"""

from __future__ import annotations

import argparse
import configparser
import logging
import math
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any, NoReturn

from actors.attach import Attached, NotANode
from actors.config import ConfigError
from actors.interrupt import Interrupted, exit_status, stop_once, wait_for_signal

__all__ = ["COMMANDS", "CliError", "build_parser", "main", "status_text"]

DESCRIPTION = """\
Erlang/OTP's process model for Python across OS processes, with CouchDB's
ioq, smoosh, replicator and couch_jobs ported onto it.  Start with
'demo --short'; every subcommand has its own --help."""

EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141


class CliError(Exception):
    """A user error: reported as one line and exit status 2."""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line naming the option, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# -- number types: the message names the option (argparse prefixes "argument --x:") --


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if math.isnan(value) or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def seconds(text: str) -> float:
    """A duration: a finite number of seconds > 0."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def per_second(text: str) -> float:
    """A rate: a finite number per second > 0."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a rate per second > 0, got {text!r}")
    return value


def per_second_or_zero(text: str) -> float:
    """A rate: a finite number per second >= 0 (0: never)."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a rate per second >= 0, got {text!r}")
    return value


def count(text: str) -> int:
    """A count: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port: 0 (pick a free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0..65535, got {text!r}")
    return value


def store(text: str) -> str:
    """``sqlite``, ``postgres`` or a ``postgresql://`` URL (never echoed: it may hold a password)."""
    if text in ("sqlite", "postgres") or text.startswith(("postgresql://", "postgres://")):
        return text
    raise argparse.ArgumentTypeError("must be sqlite, postgres or a postgresql:// URL")


def seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


# -- the parser -----------------------------------------------------------------------------


def _common(defaults: bool) -> argparse.ArgumentParser:
    """``-v`` and ``--log-level``, accepted before and after the subcommand."""
    parent = argparse.ArgumentParser(add_help=False)
    keep = {} if defaults else {"default": argparse.SUPPRESS}
    parent.add_argument("-v", "--verbose", action="store_true",
                        help="log info messages and show tracebacks of errors", **keep)
    parent.add_argument("--log-level", choices=["debug", "info", "warning", "error", "critical"],
                        help="log level (default: critical; info with -v)",
                        **({"default": None} if defaults else keep))
    return parent


Subparsers = Any  # argparse's _SubParsersAction, which has no public name


def add_demo(sub: Subparsers) -> None:
    p = sub.add_parser("demo", parents=[_common(False)],
                       help="boot the whole node, drive a workload, kill actors, check nothing is lost",
                       description="Boot the application (IOQ, couch_jobs, smoosh, replicator), drive a real "
                                   "workload while killing actors, then check that nothing was lost.")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--duration", type=seconds, metavar="S", default=60.0, help="seconds of workload (default 60)")
    length.add_argument("--short", action="store_true",
                        help="a 6-second run with at least 1.5 kills/s, for smoke checks (not with --duration)")
    p.add_argument("--kill-rate", type=per_second_or_zero, metavar="R", default=0.5,
                   help="kills per second (default 0.5; 0: no kills, the same load as a baseline)")
    p.add_argument("--state-dir", default=None, metavar="DIR",
                   help="where SQLite files and queues live (default: a fresh temporary folder, removed after)")
    p.add_argument("--config", default=None, metavar="INI",
                   help="ini file overriding the demo settings: [couch], [ioq2], [smoosh], [replicator], ...")
    p.add_argument("--no-live", action="store_true", help="progress lines instead of a refreshing terminal view")
    p.add_argument("--seed", type=seed, default=None, metavar="N",
                   help="random seed of the workload and the killer (default: random, printed)")
    p.add_argument("--store", type=store, default="sqlite", metavar="{sqlite,postgres,URL}",
                   help="couch_jobs store: sqlite (a file, default), postgres (a throwaway PostgreSQL "
                        "server from pgserver) or a postgresql:// URL of your own server")
    p.add_argument("--observe", nargs="?", type=port, const=8421, default=None, metavar="PORT",
                   help="serve the observer web page for the demo's node (default port 8421; docs/observer.md)")
    p.add_argument("--metrics", type=port, default=None, metavar="PORT",
                   help="serve /metrics for Prometheus on 127.0.0.1:PORT (0: a free port; the URL is printed; "
                        "docs/metrics.md)")
    p.add_argument("--nodes", type=count, default=1, metavar="N",
                   help="1 (default): one node; N >= 2: this process is a controller that starts N node "
                        "processes over tcp, spreads the work over them and SIGKILLs whole nodes too")
    p.add_argument("--hosts", action="store_true",
                   help="with --nodes N: each node on a network-namespace host of its own, PostgreSQL on another, "
                        "and network cuts, pair cuts and heals in the chaos (root only; docs/distribution.md)")
    p.set_defaults(run=_run_demo)


def add_node(sub: Subparsers) -> None:
    p = sub.add_parser("node", parents=[_common(False)],
                       help="run one distributed node with the whole application until SIGTERM or Ctrl-C",
                       description="Start a node listening on tcp, boot the application (IOQ, couch_jobs, smoosh, "
                                   "replicator) under it, print 'node NAME up at ADDRESS pid PID state DIR' once "
                                   "ready, and serve until SIGTERM or Ctrl-C (docs/distribution.md).")
    p.add_argument("--name", required=True, help="this node's name, unique in the cluster")
    p.add_argument("--listen", default=None, metavar="ADDR",
                   help="tcp://HOST:PORT to listen on; port 0 picks a free one (default: [cluster] listen "
                        "of --config, else tcp://127.0.0.1:0)")
    p.add_argument("--cluster-key", default=None, metavar="PATH",
                   help="the cluster key file (from 'keygen'); required unless listening on loopback")
    p.add_argument("--seeds", nargs="+", default=None, metavar="ADDR", help="nodes to connect to at start")
    p.add_argument("--net-ticktime", type=seconds, default=None, metavar="S",
                   help="seconds of silence after which a node is declared down (default 15)")
    p.add_argument("--config", default=None, metavar="INI",
                   help="ini file: [couch], [ioq2], [smoosh], [replicator], [couch_jobs], [cluster], ...")
    p.add_argument("--state-dir", default=None, metavar="DIR",
                   help="where the application's files live (default: a temporary folder, removed at exit)")
    p.add_argument("--metrics", type=port, default=None, metavar="PORT",
                   help="serve /metrics for Prometheus on PORT (0: a free one), bound to [metrics] bind of "
                        "--config, else 127.0.0.1 (default: [metrics] port of --config, else none)")
    p.add_argument("--stop-with-parent", action="store_true",
                   help="stop (as on SIGTERM) when the process that started this one exits (used by demo --nodes)")
    p.set_defaults(run=_run_node)


def add_chaos(sub: Subparsers) -> None:
    p = sub.add_parser("chaos", parents=[_common(False)],
                       help="kill actors in a demo supervision tree at a rate; report restarts and hangs",
                       description="Kill workers of a supervision tree at a fixed rate while clients call "
                                   "them; report restarts per supervisor and calls answered, failed, hung.")
    p.add_argument("--rate", type=per_second, metavar="R", default=5.0, help="kills per second (default 5)")
    p.add_argument("--duration", type=seconds, default=10.0, metavar="S", help="seconds (default 10)")
    p.add_argument("--clients", type=count, metavar="N", default=3,
                   help="client threads calling the workers (default 3)")
    p.add_argument("--seed", type=seed, default=None, metavar="N", help="random seed (default: random, printed)")
    p.add_argument("--tree", choices=["demo", "couch"], default="demo",
                   help="demo: a three-level tree of workers; couch: the full application under the demo workload")
    p.set_defaults(run=_run_chaos)


def add_status(sub: Subparsers) -> None:
    p = sub.add_parser("status", parents=[_common(False)],
                       help="attach to a running node through its runtime directory",
                       description="Show a running node's supervision tree, host processes and restarts.")
    p.add_argument("rundir", help="the node's runtime directory (printed by demo, or Node.rundir)")
    p.add_argument("--watch", type=seconds, metavar="S", default=None, help="refresh every N seconds until Ctrl-C")
    p.add_argument("--count", type=count, metavar="N", default=None, help="with --watch: stop after N refreshes")
    p.set_defaults(run=_run_status)


def add_observe(sub: Subparsers) -> None:
    p = sub.add_parser("observe", parents=[_common(False)],
                       help="serve a live web page of a running node (docs/observer.md)",
                       description="Attach to a running node through its runtime directory and serve the "
                                   "observer page: the tree, the processes, each service, kill buttons.")
    p.add_argument("rundir", help="the node's runtime directory (printed by demo, or Node.rundir)")
    p.add_argument("--port", type=port, default=8421, help="TCP port; 0 picks a free one (default 8421)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, this machine only)")
    p.set_defaults(run=_run_observe)


def add_keygen(sub: Subparsers) -> None:
    p = sub.add_parser("keygen", parents=[_common(False)],
                       help="write a new cluster key file (mode 0600) for nodes over tcp",
                       description="Write a new CurveZMQ cluster key file, readable by its owner only. Every "
                                   "node of a cluster loads the same file (docs/distribution.md).")
    p.add_argument("path", help="where to write the key; an existing file is never overwritten")
    p.set_defaults(run=_run_keygen)


def add_bench(sub: Subparsers) -> None:
    p = sub.add_parser("bench", parents=[_common(False)],
                       help="run every harness in bench/ per core count (from the repository root)",
                       description="Run each bench/*.py harness restricted to 1..N cores, print each "
                                   "harness's table as it finishes, collect bench/results/all.json.")
    p.add_argument("--cores", default=None, help="comma-separated core counts, e.g. 1,2 (default 1..N)")
    p.add_argument("--quick", action="store_true", help="pass --quick to every harness (about 20 s each)")
    p.add_argument("--only", default=None, help="comma-separated harness names, e.g. messaging,restart")
    p.add_argument("--out", default=None,
                   help="output folder (default bench/results, or bench/results/quick with --quick, so a quick "
                        "run never overwrites a full run's results)")
    p.set_defaults(run=_run_bench)


#: The subcommands, in --help order.  Each entry adds one subparser.
COMMANDS: list[Callable[[Subparsers], None]] = [add_demo, add_node, add_chaos, add_status, add_observe, add_bench,
                                                add_keygen]


def _prog() -> str:
    main_module = os.path.join("actors", "__main__.py")
    return "python -m actors" if sys.argv and sys.argv[0].endswith(main_module) else "otpy"


def version() -> str:
    try:
        return metadata.version("otpy-actors")
    except metadata.PackageNotFoundError:
        return "(not installed; run 'pip install -e .')"


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog=prog or _prog(), description=DESCRIPTION, parents=[_common(True)],
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(
        f.__name__[len("add_"):] for f in COMMANDS) + "}", parser_class=_Parser)
    for add in COMMANDS:
        add(sub)
    return parser


# -- running ---------------------------------------------------------------------------------


def _setup_logging(args: argparse.Namespace) -> None:
    level = args.log_level.upper() if args.log_level else ("INFO" if args.verbose else "CRITICAL")
    logging.basicConfig(level=getattr(logging, level), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args)
    where = f"{parser.prog} {args.command}"
    try:
        # Every command: the first Ctrl-C or SIGTERM raises, so the command stops its work, cleans up and
        # reports; those after it cannot cut that short (they are ignored until the process exits).
        with stop_once():
            return int(args.run(args))
    except (CliError, NotANode, ConfigError, configparser.Error, OSError) as exc:
        if isinstance(exc, BrokenPipeError):
            # `otpy demo | head`: the reader is gone; the command has cleaned up on its way out.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_BROKEN_PIPE
        if args.verbose:
            traceback.print_exc()
        print(f"{where}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        print(f"{where}: interrupted", file=sys.stderr)
        return exit_status(exc)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.strerror}: {exc.filename}"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text


def start_failure(exc: Any) -> CliError:
    """A service of the application that failed to start (a store that cannot
    be reached, say: `supervision.StartError`), as one line: the child ids
    from the top down to the one that failed, and its innermost reason."""
    path = [exc.child_id]
    reason = exc.reason
    for _ in range(64):  # OTP nests {shutdown, {failed_to_start_child, Id, Reason}} per level
        if not (isinstance(reason, tuple) and len(reason) == 2 and reason[0] == "shutdown"
                and isinstance(reason[1], tuple) and len(reason[1]) == 3
                and reason[1][0] == "failed_to_start_child"):
            break
        path.append(reason[1][1])
        reason = reason[1][2]
    where = " > ".join(str(child) for child in path if child is not None) or "the application"
    return CliError(f"{where} failed to start: {reason}")


def _run_demo(args: argparse.Namespace) -> int:
    from actors.app.demo import run_demo
    from actors.app.demo_cluster import run_cluster_demo
    from actors.app.demo_hosts import run_hosts_demo
    from actors.tools.observer import observe
    from supervision.errors import StartError

    if args.hosts and args.nodes < 2:
        raise CliError("--hosts needs --nodes N with N >= 2")
    try:
        if args.hosts:
            return run_hosts_demo(args, observe=observe)
        if args.nodes > 1:
            return run_cluster_demo(args, observe=observe)
        return run_demo(args, observe=observe)
    except StartError as exc:
        raise start_failure(exc) from exc


def _run_node(args: argparse.Namespace) -> int:
    from actors.cluster_key import KeyFileError
    from actors import NetError
    from actors.app.nodecmd import run_node
    from supervision.errors import StartError

    try:
        return run_node(args)
    except (KeyFileError, NetError) as exc:  # an unsafe key file, an address that cannot be bound
        raise CliError(str(exc)) from None
    except StartError as exc:  # a store that cannot be reached, say
        raise start_failure(exc) from exc


def _run_chaos(args: argparse.Namespace) -> int:
    from actors.app.chaos import run_chaos_command
    from actors.app.demo import run_demo

    if args.tree == "couch":
        # The full application under the demo's workload: its report counts
        # restarts, escalations, and IO calls answered, failed and hung.
        return run_demo(argparse.Namespace(duration=args.duration, kill_rate=args.rate, state_dir=None,
                                           config=None, short=False, no_live=True, seed=args.seed))
    return run_chaos_command(args)


def _run_observe(args: argparse.Namespace) -> int:
    from actors.tools.observer.command import run_observe

    return run_observe(args)


def _run_keygen(args: argparse.Namespace) -> int:
    from actors.cluster_key import KeyFileError, write_new

    try:
        key = write_new(args.path)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None
    print(f"wrote {args.path} (public key {key.public.decode()})")
    return 0


def _run_bench(args: argparse.Namespace) -> int:
    from actors.tools.benchrun import BenchError, run_benches

    try:
        return run_benches(args)
    except BenchError as exc:
        raise CliError(str(exc)) from None


def _run_status(args: argparse.Namespace) -> int:
    if args.count is not None and args.watch is None:
        raise CliError("--count needs --watch")
    view = Attached(args.rundir)
    try:
        shown = 0
        while True:
            actors = view.actors()
            hosts = view.hosts()
            counters = view.stats().get("counters", {})
            peers = view.peers()
            if args.watch and sys.stdout.isatty():
                print("\x1b[2J\x1b[H", end="")
            width = shutil.get_terminal_size((120, 40)).columns if sys.stdout.isatty() else None
            print(status_text(view.node_id, view.node_pid, actors, hosts, counters, width=width, peers=peers,
                              now=time.time()), flush=True)
            shown += 1
            if not args.watch or (args.count and shown >= args.count):
                return 0
            wait_for_signal(args.watch)  # pacing a human-facing refresh; Ctrl-C ends it at once
    except KeyboardInterrupt as exc:
        # Ctrl-C is how one stops --watch: a normal end.
        return 0 if args.watch and not isinstance(exc, Interrupted) else exit_status(exc)
    finally:
        view.close()


def status_text(node_id: str, node_pid: int, actors: list[dict[str, Any]], hosts: list[dict[str, Any]],
                counters: dict[str, Any], width: int | None = None, peers: list[dict[str, Any]] | None = None,
                now: float | None = None) -> str:
    """The status report; with ``width`` (a terminal) tree lines are cut to fit, else kept whole.
    ``peers`` (`Node.peers`) are listed for a distributed node, with how long each has been up at ``now``."""
    from actors.tree import render_tree

    live_hosts = [h for h in hosts if h["state"] == "up"]
    lines = [f"node {node_id} (pid {node_pid}): {len(actors)} actors, {len(live_hosts)} host processes"]
    for h in live_hosts:
        lines.append(f"  host {h['label'] or h['proc']}: pid {h['pid']} cpus {h['cpus'] or 'any'}")
    if "@" in node_id:  # a distributed node: its id is name@incarnation
        lines.extend(peer_lines(peers or [], time.time() if now is None else now))
    restarts = {k[len('supervision.restarts.'):]: v for k, v in counters.items()
                if k.startswith("supervision.restarts.")}
    if restarts:
        lines.append("restarts: " + ", ".join(f"{k} {v}" for k, v in sorted(restarts.items())))
    dropped = counters.get("actors.mailbox.dropped", 0)
    if dropped or counters.get("actors.mailbox.block_timeouts", 0):
        lines.append(f"mailboxes: dropped {dropped}, block timeouts {counters.get('actors.mailbox.block_timeouts', 0)}")
    lines.append("tree:")
    for line in render_tree(actors):
        line = "  " + line
        if width is not None and len(line) > width:
            line = line[: max(1, width - 1)] + "…"
        lines.append(line)
    return "\n".join(lines)


def peer_lines(peers: list[dict[str, Any]], now: float) -> list[str]:
    """``peers: N`` and a line per connected node: name, address, incarnation, up since (UTC) and for how long."""
    lines = [f"peers: {len(peers)}" if peers else "peers: none connected"]
    for p in peers:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(p["up_since"]))
        lines.append(f"  {p['name']}  {p['address']}  incarnation {p['incarnation']}  up since {since} UTC "
                     f"({_duration(now - p['up_since'])})")
    return lines


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
