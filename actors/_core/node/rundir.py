"""The node's runtime directory: where its processes' sockets live, and how a tool finds the node.

Every process of a node binds its Unix sockets in one private directory
(mode 0700): the node's, each host's, the log socket, and the reply
channels of a tool attached to it (``otpy status``, ``otpy observe``).
``node.json`` there names the node and its process, so a tool given the
directory can tell a live node from a stale one (`actors._core.node.lifecycle`
sweeps those), and the node answers such a tool's requests (`serve_requests`)
as it answers its own processes.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Protocol

from actors._core.base import config as _config
from actors._core.node import lifecycle as _lifecycle
from actors._core.runtime.runtime import Runtime
from actors._core.wire import system as sysop
from actors._core.wire.ref import ActorRef

__all__ = ["Answers", "check_rundir", "create", "prepare", "serve_requests", "write_node_file"]

# The longest socket file name a node's processes put in its runtime directory:
# an attached view's reply channel, ``cli<pid>v<view>~r<n>.sock``, with the
# largest pid Linux gives (4194304), ten thousand views and a thousand reply
# channels.  Hosts (``h<n>.sock``) and the log socket (``log.sock``) are shorter.
_SOCKET_NAME_ROOM = len("cli4194304v9999~r999.sock")
# A Unix socket's path holds at most this many bytes (``sun_path`` less its NUL).
_SOCKET_PATH_MAX = 107


def check_rundir(rundir: str) -> None:
    """Refuse a runtime directory whose socket paths would not fit in ``sun_path``: the
    node would otherwise fail halfway through starting, on whichever socket came first."""
    size, limit = len(os.fsencode(rundir)), _SOCKET_PATH_MAX - len("/") - _SOCKET_NAME_ROOM
    if size > limit:
        raise ValueError(
            f"the runtime directory {rundir!r} is {size} bytes long; "
            f"the node's socket files need it at most {limit} bytes "
            "(pass a shorter rundir=, or set TMPDIR to a shorter directory)"
        )


def prepare(rundir: str | None) -> None:
    """Before anything starts: refuse a given directory that is too long; for a private
    one (``rundir=None``), sweep the directories that nodes killed earlier left behind."""
    if rundir is None:
        _lifecycle.sweep_stale()
    else:
        check_rundir(rundir)


def create(rundir: str | None) -> str:
    """The runtime directory, made (a private temporary one for None) and closed to others."""
    path = rundir or tempfile.mkdtemp(prefix=_lifecycle.RUNDIR_PREFIX)
    if rundir is None:
        try:
            check_rundir(path)
        except ValueError:
            os.rmdir(path)
            raise
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def write_node_file(rundir: str, node_id: str, proc: str) -> None:
    """``node.json``: which node, in which process, owns this directory."""
    info = {"node_id": node_id, "pid": os.getpid(), "proc": proc, "rundir": rundir}
    path = os.path.join(rundir, "node.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(info, fh)


class Answers(Protocol):
    """What a tool attached to the runtime directory asks the node (its `Node`)."""

    config: _config.Config

    def hosts(self) -> list[dict[str, Any]]: ...
    def actors(self, timeout: float = ...) -> list[dict[str, Any]]: ...
    def stats(self, timeout: float = ...) -> dict[str, Any]: ...
    def registered(self) -> dict[str, ActorRef]: ...
    def kill(self, ref: ActorRef) -> None: ...
    def exit(self, ref: ActorRef, reason: Any) -> None: ...


def serve_requests(rt: Runtime, node: Answers) -> None:
    """Answer the requests of a tool attached to the runtime directory (``otpy status``,
    ``otpy observe``, `actors.attach`) on the node's runtime ``rt``."""
    rt.register_sys(sysop.ConfigSet, lambda src, m: _config_set(node.config, m.section, m.key, m.value))
    rt.register_sys(sysop.Hosts, lambda src, m: node.hosts())
    rt.register_sys(sysop.Actors, lambda src, m: node.actors(), threaded=True)
    rt.register_sys(sysop.NodeStats, lambda src, m: node.stats(), threaded=True)
    rt.register_sys(sysop.Registered, lambda src, m: node.registered())
    rt.register_sys(sysop.ConfigGet, lambda src, m: node.config.to_dict())
    rt.register_sys(sysop.Kill, lambda src, m: node.kill(m.ref))
    rt.register_sys(sysop.ExitActor, lambda src, m: node.exit(m.ref, m.reason))


def _config_set(config: _config.Config, section: str, key: str, value: str | None) -> None:
    if value is None:
        config.delete(section, key)
    else:
        config.set(section, key, value)
