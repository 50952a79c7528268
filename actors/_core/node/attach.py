"""Attach to a running node from another program, through its runtime directory.

The attaching program binds its own endpoint in the node's directory (it must
run as the same user: the directory is 0700) and asks the node process for
snapshots.  It starts no actor; it changes something only when asked to
(``kill``, ``exit``: the observer's buttons).

Every way a directory can fail to be a running node's -- missing, not a
directory, no ``node.json``, a corrupt one, a node process that is gone
(a stale directory), a node that does not answer -- raises `NotANode` with
one line that says which, before anything is bound in the directory.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

from actors._core.runtime.runtime import Runtime
from actors._core.wire import system as sysop
from actors._core.wire.reasons import CallTimeout, Exit
from actors._core.wire.ref import ActorRef

__all__ = ["Attached", "NotANode", "read_node_file"]


_views = itertools.count(1)


class NotANode(Exception):
    """The directory is not the runtime directory of a running node; says why."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_node_file(rundir: str) -> dict[str, Any]:
    """``node.json`` of a live node in ``rundir``, or `NotANode` saying what is wrong."""
    if not os.path.exists(rundir):
        raise NotANode(f"{rundir}: no such directory")
    if not os.path.isdir(rundir):
        raise NotANode(f"{rundir}: not a directory")
    path = os.path.join(rundir, "node.json")
    try:
        with open(path, encoding="utf-8") as fh:
            info = json.load(fh)
    except FileNotFoundError:
        raise NotANode(f"{rundir} is not the runtime directory of a running node (no node.json)") from None
    except PermissionError:
        raise NotANode(f"{path}: permission denied (attach as the user that runs the node)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise NotANode(f"{path} is corrupt: {exc}") from None
    if not isinstance(info, dict) or not all(k in info for k in ("node_id", "pid", "proc")):
        raise NotANode(f"{path} is corrupt: expected node_id, pid and proc")
    if not isinstance(info["pid"], int) or not _alive(info["pid"]):
        raise NotANode(f"{rundir} is stale: its node process {info['pid']} is gone")
    return info


class Attached:
    """A view of a running node: ``actors()``, ``hosts()``, ``stats()``, ``config()``.

    It reads; the only things it changes are what an operator asks for by
    name: a status ``call`` to an actor, ``kill`` and ``exit`` (carried out
    by the node's `Node.kill` / `Node.exit`).
    """

    def __init__(self, rundir: str, timeout: float = 5.0) -> None:
        info = read_node_file(rundir)
        self.rundir = rundir
        self.node_id = info["node_id"]
        self.node_pid = info["pid"]
        self.timeout = timeout
        # A process name of its own per view: two views of one node from one program must not share an endpoint.
        self._rt = Runtime(self.node_id, rundir, f"cli{os.getpid()}v{next(_views)}", node_proc=info["proc"])
        self._rt.start()

    def _ask(self, op: str) -> Any:
        return self.ask(op)

    def ask(self, op: str, *args: Any, timeout: float | None = None) -> Any:
        """One request to the node process by name (what ``actors()``, ``nodes()``... send);
        `NotANode` when it does not answer within ``timeout`` (default: the view's)."""
        try:
            return self._rt.sys_request(
                self._rt.node_proc, sysop.OPS[op](*args), timeout=self.timeout if timeout is None else timeout
            )
        except (CallTimeout, Exit) as exc:
            raise NotANode(f"the node of {self.rundir} (pid {self.node_pid}) did not answer: {exc}") from None

    def actors(self) -> list[dict[str, Any]]:
        return self._ask("actors")

    def hosts(self) -> list[dict[str, Any]]:
        return self._ask("hosts")

    def stats(self) -> dict[str, Any]:
        return self._ask("node_stats")

    def nodes(self) -> list[str]:
        """The other nodes this node is connected to now (`Node.nodes`)."""
        return self._ask("nodes")

    def peers(self) -> list[dict[str, Any]]:
        """The connected nodes with address, incarnation and up-since time (`Node.peers`)."""
        return self._ask("peers")

    def config(self) -> dict[str, dict[str, str]]:
        """The node's configuration, section by section."""
        return self._ask("config")

    def whereis(self, name: str) -> ActorRef | None:
        return self._rt.whereis(name)

    def call(self, target: ActorRef, request: Any, timeout: float | None = 5.0) -> Any:
        """`ActorRef.call` from this program (for the services' status calls)."""
        return self._rt.call(target, request, timeout)

    def kill(self, ref: ActorRef) -> None:
        """Ask the node to `Node.kill` ``ref`` (untrappable, reason ``killed``)."""
        self._rt.sys_request(self._rt.node_proc, sysop.Kill(ref), timeout=self.timeout)

    def exit(self, ref: ActorRef, reason: Any) -> None:
        """Ask the node to `Node.exit` ``ref`` with ``reason``."""
        self._rt.sys_request(self._rt.node_proc, sysop.ExitActor(ref, reason), timeout=self.timeout)

    def close(self) -> None:
        self._rt.shutdown()

    def __enter__(self) -> "Attached":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
