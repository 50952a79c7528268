"""``python -m actors observe RUNDIR``: serve the page for a node that is already running.

It attaches as ``status`` does (same user, through the node's runtime
directory), prints the URL with its token, and serves until the node goes
away or the user interrupts it.
"""

from __future__ import annotations

import os
from typing import Any

from actors.attach import Attached
from actors.interrupt import wait_for_signal
from actors.tools.observer.launch import observe

__all__ = ["run_observe"]

#: How often the command checks that the node is still there.
WATCH_EVERY = 1.0


def _alive(pid: int, rundir: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return os.path.exists(os.path.join(rundir, "node.json"))


def run_observe(args: Any) -> int:
    """Serve until the node exits or Ctrl-C (0); `NotANode` or `OSError` when it cannot start."""
    view = Attached(args.rundir)  # NotANode: the CLI's one error path reports it
    try:
        try:
            web = observe(view, port=args.port, host=args.host)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
        print(f"observing node {view.node_id} (pid {view.node_pid})", flush=True)
        print(f"open {web.url}", flush=True)
        try:
            while _alive(view.node_pid, args.rundir):
                wait_for_signal(WATCH_EVERY)  # pacing a liveness check; Ctrl-C ends it at once
            print("the node has exited", flush=True)
        except KeyboardInterrupt:
            pass
        finally:
            web.close()
        return 0
    finally:
        view.close()
