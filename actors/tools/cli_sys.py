"""``otpy sys RUNDIR NAME OP``: OTP's ``sys`` on a process of a running node, from the shell.

Attaches to the node through its runtime directory (`actors.attach`), finds
the process by its registered name and sends it one system
request, as `actors.sys` does from a program: ``get_state``, ``get_status``,
``suspend``, ``resume``, ``statistics [on|off|get]`` and ``trace on|off``
(the events go to the node's log, on the ``actors.sys`` logger).
``replace_state`` needs a function, so it is for programs only.
"""

from __future__ import annotations

import argparse
import pprint
from typing import Any

import actors.sys
from actors import ActorRef
from actors.attach import Attached

from .cli_run import CliError

__all__ = ["SYS_OPS", "cmd_sys"]

#: What ``otpy sys`` can ask, and what each takes after it.
SYS_OPS: dict[str, tuple[str, ...]] = {
    "get_state": (),
    "get_status": (),
    "suspend": (),
    "resume": (),
    "statistics": ("on", "off", "get"),
    "trace": ("on", "off"),
}

_FLAGS: dict[str, Any] = {"on": True, "off": False, "get": "get"}


def _find(view: Attached, name: str) -> ActorRef:
    ref = view.whereis(name)
    if ref is None:
        raise CliError(f"no process is registered as {name!r} on the node of {view.rundir} (names: otpy status)")
    return ref


def cmd_sys(args: argparse.Namespace) -> int:
    takes = SYS_OPS[args.op]
    if takes and args.arg not in takes:
        raise CliError(f"{args.op} takes one of {', '.join(takes)}, got {args.arg!r}")
    if not takes and args.arg is not None:
        raise CliError(f"{args.op} takes no argument, got {args.arg!r}")
    arg = _FLAGS[args.arg] if takes else None
    view = Attached(args.rundir)
    try:
        ref = _find(view, args.name)
        try:
            value = actors.sys.system_call(ref, args.op, arg, args.timeout, via=view.call)
        except actors.sys.SysError as exc:
            raise CliError(f"{args.name}: {exc}") from None
        except actors.CallTimeout:
            raise CliError(f"{args.name} did not answer {args.op} within {args.timeout} s") from None
        except actors.Exit as exc:
            raise CliError(f"{args.name}: {exc}") from None
        if args.op in ("get_state", "get_status") or arg == "get":
            if value is None:
                print("statistics are off (otpy sys RUNDIR NAME statistics on)")
            else:
                pprint.pprint(value, sort_dicts=False, width=100)
        else:
            print("ok")
        return 0
    finally:
        view.close()
