"""The ``otpy`` argument parser: one ``add_<name>(subparsers)`` per subcommand.

Every subcommand is one such function in `COMMANDS` that declares its
options and sets ``run`` (its ``cmd_<name>`` in `cli_run` or `cli_status`);
adding a subcommand is writing one such function and listing it.  Usage
errors end as one line naming the option, exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from importlib import metadata
from typing import Any, NoReturn

from actors.app.logformat import FORMATS

from .cli_run import cmd_bench, cmd_chaos, cmd_demo, cmd_keygen, cmd_node, cmd_observe
from .cli_status import cmd_status
from .cli_sys import SYS_OPS, cmd_sys
from .cli_types import count, per_second, per_second_or_zero, port, seconds, seed, store

__all__ = ["COMMANDS", "DESCRIPTION", "EXIT_USAGE", "Subparsers", "build_parser", "version"]

DESCRIPTION = """\
Erlang/OTP's process model for Python across OS processes, with CouchDB's
ioq, smoosh, replicator and couch_jobs ported onto it.  Start with
'demo --short'; every subcommand has its own --help."""

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line naming the option, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _common(defaults: bool) -> argparse.ArgumentParser:
    """``-v``, ``--log-level`` and ``--log-format``, accepted before and after the subcommand."""
    parent = argparse.ArgumentParser(add_help=False)
    keep: dict[str, Any] = {} if defaults else {"default": argparse.SUPPRESS}
    parent.add_argument(
        "-v", "--verbose", action="store_true", help="log info messages and show tracebacks of errors", **keep
    )
    parent.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error", "critical"],
        help="log level (default: info for node, else critical; info with -v; node: else [log] level)",
        **({"default": None} if defaults else keep),
    )
    parent.add_argument(
        "--log-format",
        choices=list(FORMATS),
        help="log lines on stderr: plain (default) or json, one object per line (node: else [log] format)",
        **({"default": None} if defaults else keep),
    )
    return parent


Subparsers = Any  # argparse's _SubParsersAction, which has no public name


def add_demo(sub: Subparsers) -> None:
    p = sub.add_parser(
        "demo",
        parents=[_common(False)],
        help="boot the whole node, drive a workload, kill actors, check nothing is lost",
        description="Boot the application (IOQ, couch_jobs, smoosh, replicator), drive a real "
        "workload while killing actors, then check that nothing was lost.",
    )
    length = p.add_mutually_exclusive_group()
    length.add_argument("--duration", type=seconds, metavar="S", default=60.0, help="seconds of workload (default 60)")
    length.add_argument(
        "--short",
        action="store_true",
        help="a 6-second run with at least 1.5 kills/s, for smoke checks (not with --duration)",
    )
    p.add_argument(
        "--kill-rate",
        type=per_second_or_zero,
        metavar="R",
        default=0.5,
        help="kills per second (default 0.5; 0: no kills, the same load as a baseline)",
    )
    p.add_argument(
        "--state-dir",
        default=None,
        metavar="DIR",
        help="where SQLite files and queues live (default: a fresh temporary folder, removed after)",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="INI",
        help="ini file overriding the demo settings: [couch], [ioq2], [smoosh], [replicator], ...",
    )
    p.add_argument("--no-live", action="store_true", help="progress lines instead of a refreshing terminal view")
    p.add_argument(
        "--seed",
        type=seed,
        default=None,
        metavar="N",
        help="random seed of the workload and the killer (default: random, printed)",
    )
    p.add_argument(
        "--store",
        type=store,
        default="sqlite",
        metavar="{sqlite,postgres,URL}",
        help="couch_jobs store: sqlite (a file, default), postgres (a throwaway PostgreSQL "
        "server: pgserver's binaries, else the system's) or a postgresql:// URL of your own server",
    )
    p.add_argument(
        "--observe",
        nargs="?",
        type=port,
        const=8421,
        default=None,
        metavar="PORT",
        help="serve the observer web page for the demo's node (default port 8421; docs/observer.md)",
    )
    p.add_argument(
        "--metrics",
        type=port,
        default=None,
        metavar="PORT",
        help="serve /metrics for Prometheus on 127.0.0.1:PORT (0: a free port; the URL is printed; docs/metrics.md)",
    )
    p.add_argument(
        "--nodes",
        type=count,
        default=1,
        metavar="N",
        help="1 (default): one node; N >= 2: this process is a controller that starts N node "
        "processes over tcp, spreads the work over them and SIGKILLs whole nodes too",
    )
    p.add_argument(
        "--hosts",
        action="store_true",
        help="with --nodes N: each node on a network-namespace host of its own, PostgreSQL on another, "
        "and network cuts, pair cuts and heals in the chaos (root only; docs/distribution.md)",
    )
    p.set_defaults(run=cmd_demo)


def add_node(sub: Subparsers) -> None:
    p = sub.add_parser(
        "node",
        parents=[_common(False)],
        help="run one distributed node with the whole application until SIGTERM or Ctrl-C",
        description="Start a node listening on tcp, boot the application (IOQ, couch_jobs, smoosh, "
        "replicator) under it, print 'node NAME up at ADDRESS pid PID state DIR' once "
        "ready, and serve until SIGTERM or Ctrl-C (docs/distribution.md).",
    )
    p.add_argument("--name", required=True, help="this node's name, unique in the cluster")
    p.add_argument(
        "--listen",
        default=None,
        metavar="ADDR",
        help="tcp://HOST:PORT to listen on; port 0 picks a free one (default: [cluster] listen "
        "of --config, else tcp://127.0.0.1:0)",
    )
    p.add_argument(
        "--cluster-key",
        default=None,
        metavar="PATH",
        help="the cluster key file (from 'keygen'); required unless listening on loopback",
    )
    p.add_argument("--seeds", nargs="+", default=None, metavar="ADDR", help="nodes to connect to at start")
    p.add_argument(
        "--net-ticktime",
        type=seconds,
        default=None,
        metavar="S",
        help="seconds of silence after which a node is declared down (default 15)",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="INI",
        help="ini file: [couch], [ioq2], [smoosh], [replicator], [couch_jobs], [cluster], ...",
    )
    p.add_argument(
        "--state-dir",
        default=None,
        metavar="DIR",
        help="where the application's files live (default: a temporary folder, removed at exit)",
    )
    p.add_argument(
        "--metrics",
        type=port,
        default=None,
        metavar="PORT",
        help="serve /metrics for Prometheus on PORT (0: a free one), bound to [metrics] bind of "
        "--config, else 127.0.0.1 (default: [metrics] port of --config, else none)",
    )
    p.add_argument(
        "--stop-with-parent",
        action="store_true",
        help="stop (as on SIGTERM) when the process that started this one exits (used by demo --nodes)",
    )
    p.set_defaults(run=cmd_node)


def add_chaos(sub: Subparsers) -> None:
    p = sub.add_parser(
        "chaos",
        parents=[_common(False)],
        help="kill actors in a demo supervision tree at a rate; report restarts and hangs",
        description="Kill workers of a supervision tree at a fixed rate while clients call "
        "them; report restarts per supervisor and calls answered, failed, hung.",
    )
    p.add_argument("--rate", type=per_second, metavar="R", default=5.0, help="kills per second (default 5)")
    p.add_argument("--duration", type=seconds, default=10.0, metavar="S", help="seconds (default 10)")
    p.add_argument(
        "--clients", type=count, metavar="N", default=3, help="client threads calling the workers (default 3)"
    )
    p.add_argument("--seed", type=seed, default=None, metavar="N", help="random seed (default: random, printed)")
    p.add_argument(
        "--tree",
        choices=["demo", "couch"],
        default="demo",
        help="demo: a three-level tree of workers; couch: the full application under the demo workload",
    )
    p.set_defaults(run=cmd_chaos)


def add_status(sub: Subparsers) -> None:
    p = sub.add_parser(
        "status",
        parents=[_common(False)],
        help="attach to a running node through its runtime directory",
        description="Show a running node's supervision tree, host processes and restarts.",
    )
    p.add_argument("rundir", help="the node's runtime directory (printed by demo, or Node.rundir)")
    p.add_argument("--watch", type=seconds, metavar="S", default=None, help="refresh every N seconds until Ctrl-C")
    p.add_argument("--count", type=count, metavar="N", default=None, help="with --watch: stop after N refreshes")
    p.set_defaults(run=cmd_status)


def add_sys(sub: Subparsers) -> None:
    p = sub.add_parser(
        "sys",
        parents=[_common(False)],
        help="OTP's sys on a process of a running node: state, status, suspend, statistics, trace",
        description="Attach to a running node through its runtime directory and send one system "
        "request to the process registered as NAME (docs/sys.md).",
    )
    p.add_argument("rundir", help="the node's runtime directory (printed by demo, or Node.rundir)")
    p.add_argument("name", help="the process's registered name")
    p.add_argument("op", choices=sorted(SYS_OPS), help="the request")
    p.add_argument("arg", nargs="?", default=None, help="statistics: on, off or get; trace: on or off")
    p.add_argument("--timeout", type=seconds, default=5.0, help="seconds to wait for the answer (default 5)")
    p.set_defaults(run=cmd_sys)


def add_observe(sub: Subparsers) -> None:
    p = sub.add_parser(
        "observe",
        parents=[_common(False)],
        help="serve a live web page of a running node (docs/observer.md)",
        description="Attach to a running node through its runtime directory and serve the "
        "observer page: the tree, the processes, each service, kill buttons.",
    )
    p.add_argument("rundir", help="the node's runtime directory (printed by demo, or Node.rundir)")
    p.add_argument("--port", type=port, default=8421, help="TCP port; 0 picks a free one (default 8421)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, this machine only)")
    p.set_defaults(run=cmd_observe)


def add_keygen(sub: Subparsers) -> None:
    p = sub.add_parser(
        "keygen",
        parents=[_common(False)],
        help="write a new cluster key file (mode 0600) for nodes over tcp",
        description="Write a new CurveZMQ cluster key file, readable by its owner only. Every "
        "node of a cluster loads the same file (docs/distribution.md).",
    )
    p.add_argument("path", help="where to write the key; an existing file is never overwritten")
    p.set_defaults(run=cmd_keygen)


def add_bench(sub: Subparsers) -> None:
    p = sub.add_parser(
        "bench",
        parents=[_common(False)],
        help="run every harness in bench/ per core count (from the repository root)",
        description="Run each bench/*.py harness restricted to 1..N cores, print each "
        "harness's table as it finishes, collect bench/results/all.json.",
    )
    p.add_argument("--cores", default=None, help="comma-separated core counts, e.g. 1,2 (default 1..N)")
    p.add_argument("--quick", action="store_true", help="pass --quick to every harness (about 20 s each)")
    p.add_argument("--only", default=None, help="comma-separated harness names, e.g. messaging,restart")
    p.add_argument(
        "--out",
        default=None,
        help="output folder (default bench/results, or bench/results/quick with --quick, so a quick "
        "run never overwrites a full run's results)",
    )
    p.set_defaults(run=cmd_bench)


#: The subcommands, in --help order.  Each entry adds one subparser.
COMMANDS: list[Callable[[Subparsers], None]] = [
    add_demo,
    add_node,
    add_chaos,
    add_status,
    add_sys,
    add_observe,
    add_bench,
    add_keygen,
]


def _prog() -> str:
    main_module = os.path.join("actors", "__main__.py")
    return "python -m actors" if sys.argv and sys.argv[0].endswith(main_module) else "otpy"


def version() -> str:
    try:
        return metadata.version("otpy-actors")
    except metadata.PackageNotFoundError:
        return "(not installed; run 'pip install -e .')"


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog or _prog(),
        description=DESCRIPTION,
        parents=[_common(True)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="{" + ",".join(f.__name__[len("add_") :] for f in COMMANDS) + "}",
        parser_class=_Parser,
    )
    for add in COMMANDS:
        add(sub)
    return parser
