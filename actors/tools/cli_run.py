"""What each ``otpy`` subcommand runs (but ``status``: `cli_status`), and the user error they raise.

Each ``cmd_<name>`` takes the parsed arguments and returns the exit status;
a user error is a `CliError`, which `cli.main` reports as one line.  Each
imports what its subcommand runs when it runs, not at the top: ``observe``
needs the optional ``[observer]`` extra (starlette, uvicorn), and ``--help``
or ``status`` need not load every subsystem (0.3 s against 0.7 s).  Nothing
here is imported late to dodge a cycle.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["CliError", "cmd_bench", "cmd_chaos", "cmd_demo", "cmd_keygen", "cmd_node", "cmd_observe", "start_failure"]


class CliError(Exception):
    """A user error: reported as one line and exit status 2."""


def start_failure(exc: Any) -> CliError:
    """A service of the application that failed to start (a store that cannot
    be reached, say: `supervision.StartError`), as one line: the child ids
    from the top down to the one that failed, and its innermost reason."""
    path = [exc.child_id]
    reason = exc.reason
    for _ in range(64):  # OTP nests {shutdown, {failed_to_start_child, Id, Reason}} per level
        if not (
            isinstance(reason, tuple)
            and len(reason) == 2
            and reason[0] == "shutdown"
            and isinstance(reason[1], tuple)
            and len(reason[1]) == 3
            and reason[1][0] == "failed_to_start_child"
        ):
            break
        path.append(reason[1][1])
        reason = reason[1][2]
    where = " > ".join(str(child) for child in path if child is not None) or "the application"
    return CliError(f"{where} failed to start: {reason}")


def cmd_demo(args: argparse.Namespace) -> int:
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


def cmd_node(args: argparse.Namespace) -> int:
    from actors import NetError
    from actors.app.nodecmd import run_node
    from actors.cluster_key import KeyFileError
    from supervision.errors import StartError

    try:
        return run_node(args)
    except (KeyFileError, NetError) as exc:  # an unsafe key file, an address that cannot be bound
        raise CliError(str(exc)) from None
    except StartError as exc:  # a store that cannot be reached, say
        raise start_failure(exc) from exc


def cmd_chaos(args: argparse.Namespace) -> int:
    from actors.app.chaos import run_chaos_command
    from actors.app.demo import run_demo

    if args.tree == "couch":
        # The full application under the demo's workload: its report counts
        # restarts, escalations, and IO calls answered, failed and hung.
        return run_demo(
            argparse.Namespace(
                duration=args.duration,
                kill_rate=args.rate,
                state_dir=None,
                config=None,
                short=False,
                no_live=True,
                seed=args.seed,
            )
        )
    return run_chaos_command(args)


def cmd_observe(args: argparse.Namespace) -> int:
    from actors.tools.observer.command import run_observe

    return run_observe(args)


def cmd_keygen(args: argparse.Namespace) -> int:
    from actors.cluster_key import KeyFileError, write_new

    try:
        key = write_new(args.path)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None
    print(f"wrote {args.path} (public key {key.public.decode()})")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from actors.tools.benchrun import BenchError, run_benches

    try:
        return run_benches(args)
    except BenchError as exc:
        raise CliError(str(exc)) from None
