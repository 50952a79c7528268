"""``otpy node``: one distributed node running the whole application, until SIGTERM or Ctrl-C.

This is how a node is deployed on a machine of a cluster (and how
``demo --nodes N`` starts its nodes): a `Node` listening on tcp with the
cluster key, `actors.app.couch.start_app` under it, the default `actors.pg` scope and
`actors.global_names` server beside it, and the sharded types the ini's
``[sharding] types`` names (`actors.sharding.configured`).  Once
every service is up it prints one line::

    node n1 up at tcp://127.0.0.1:40123 pid 4242 rundir /tmp/otpy-k2j3 state /var/lib/otpy/n1

(the address is the bound one: with port 0 the kernel picked it; the
runtime directory is what ``otpy status`` attaches to), then
serves.  SIGTERM or SIGINT stops the tree (every service's ``terminate``
runs), closes the node (its host processes, sockets and runtime directory
go with it) and exits 0: a node asked to stop has done what it was asked.
The first signal starts the stop; those after it (Ctrl-C pressed again)
cannot cut it short, since a node closed halfway would leave its zygote
waiting for the rest of the close; the stop is bounded by the close's timeout.
A temporary state directory (no ``--state-dir``) is removed too.

A network fault never needs a person: when the node ends its incarnation
(`Node.ended`: it was on the minority side of a cut, or a peer declared it
down), every actor of it stops, and the node starts a new incarnation in
place (`Node`'s ``rejoin``, the one rejoin path a program embedding a node
uses too) at the same address with the same state directory and
application, prints its ready line (a new runtime directory) and rejoins
through its seeds.  The process itself never exits for it, so a service
manager sees nothing to restart.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from actors import Node, api, global_names, pg
from actors.app import configcheck
from actors.app.couch import App, start_app
from actors.app.couch import load_config as app_config
from actors.app.logformat import configure, stamp_node
from actors.config import Config, ConfigError
from actors.interrupt import stop_once, wait_for_signal
from actors.sharding.configured import start_configured

__all__ = ["READY_LINE", "Ready", "parse_ready", "run_node"]

log = logging.getLogger("actors.node")

#: Where a node listens when neither --listen nor the ini's [cluster] listen says.
DEFAULT_LISTEN = "tcp://127.0.0.1:0"
#: The line printed once the node serves; `parse_ready` reads it back.
READY_LINE = "node {name} up at {address} pid {pid} rundir {rundir} state {state}"
_READY = re.compile(r"^node (\S+) up at (tcp://\S+) pid (\d+) rundir (\S+) state (.+)$")


@dataclass(frozen=True)
class Ready:
    """What a ready line says: the node's name, bound address, pid, runtime directory
    (for ``otpy status``) and state directory."""

    name: str
    address: str
    pid: int
    rundir: str
    state_dir: str


def parse_ready(line: str) -> Ready | None:
    """The `Ready` of a ready line, else None."""
    m = _READY.match(line.strip())
    return Ready(m.group(1), m.group(2), int(m.group(3)), m.group(4), m.group(5)) if m else None


def _config(path: str | None) -> Config:
    """The ini file (if any), checked whole before anything listens; unknown keys are warned."""
    if path and not os.path.isfile(path):
        raise FileNotFoundError(2, "config file not found", path)
    cfg = app_config(path)
    result = configcheck.check(cfg)
    for line in result.warnings:
        print(f"warning: {path}: {line}", file=sys.stderr, flush=True)
    if result.errors:
        raise ConfigError(f"{path}: " + "; ".join(result.errors))
    return cfg


def _stop_with_parent(parent: int) -> None:
    """SIGTERM ourselves (a clean stop) once ``parent`` is gone: a node started by a demo that was
    SIGKILLed must not serve on forever."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)  # polling the parent's life: there is no portable wait for it
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="stop-with-parent", daemon=True).start()


def _log_settings(cfg: Config, args: Any) -> None:
    """The ini's ``[log] level`` and ``format`` where the command line gave none
    (the command line set up logging before the ini was read)."""
    level = None if getattr(args, "log_level", None) or args.verbose else cfg.get("log", "level")
    fmt = getattr(args, "log_format", None) or cfg.get("log", "format")
    if level or fmt:
        current = logging.getLevelName(logging.getLogger().level)
        configure(str(level or current).upper(), str(fmt or "plain").strip())


def _incarnation() -> str | None:
    """The id of the incarnation this process runs (None before it has one, or between two)."""
    try:
        return api.node_id()
    except RuntimeError:
        return None


def _serve(cfg: Config, args: Any, state_dir: str, listen: str | None) -> None:
    """Boot, start the application, print the ready line, serve until a signal raises; the app and
    node are stopped either way.  An incarnation that ends is followed by a new one in place
    (`Node`'s ``rejoin``), which starts the application again and prints a new ready line."""
    node: Node | None = None
    apps: list[App] = []
    lock = threading.Lock()
    ended = [0]

    def start(node: Node) -> None:
        began = time.monotonic()
        pg.start(node)  # process groups and cluster-wide names: every node of a cluster runs them
        global_names.start(node)
        app = start_app(node, None, state_dir)
        with lock:
            apps.append(app)
        sharded = start_configured(node)  # [sharding] types: stopped with the incarnation's actors
        print(
            READY_LINE.format(
                name=node.name, address=node.address, pid=os.getpid(), rundir=node.rundir, state=state_dir
            ),
            flush=True,
        )
        log.info(
            "node %s started incarnation %s at %s: pg, global names and %s in %.1f s; state %s",
            node.name,
            node.id,
            node.address,
            ", ".join([*app.names, *(f"sharding {t}" for t in sharded)]),
            time.monotonic() - began,
            state_dir,
            extra={"event": "node_up", "address": node.address, "rundir": node.rundir},
        )

    def on_ended(reason: str) -> None:
        """The ended incarnation's actors are stopped: release what its application holds
        in this process (couch_jobs' store) before the next one starts it again."""
        ended[0] += 1
        log.warning(
            "node %s incarnation %d ended (%s): starting a new one",
            args.name,
            ended[0],
            reason,
            extra={"event": "rejoining", "reason": reason},
        )
        with lock:
            old = apps.pop() if apps else None
        if old is not None:
            old.stop()

    stamp_node(lambda: (args.name, _incarnation()))  # every line names the node and its incarnation
    try:
        node = Node(
            cfg,
            name=args.name,
            listen=listen,
            cluster_key=args.cluster_key,
            seeds=args.seeds or (),
            net_ticktime=args.net_ticktime,
            metrics=getattr(args, "metrics", None),
            rejoin=start,
        )
        node.on_ended(on_ended)
        start(node)
        if node.metrics_server is not None:  # after the ready line: readers take the first line as it
            print(f"metrics: {node.metrics_server.url}", flush=True)
        wait_for_signal()  # until SIGINT or SIGTERM raises here
    finally:
        with lock:
            last = apps.pop() if apps else None
        if node is not None:
            log.info("node %s stopping: the application, then the node", args.name, extra={"event": "node_stopping"})
        if last is not None:
            last.stop()
        if node is not None:
            node.close()
            log.info("node %s stopped", args.name, extra={"event": "node_stopped"})


def run_node(args: Any) -> int:
    """Boot, print the ready line, serve until SIGTERM/SIGINT; 0 after a clean stop.

    An incarnation that ends (`Node.ended`) is followed by a new one, in this same process."""
    cfg = _config(args.config)
    _log_settings(cfg, args)
    temporary = args.state_dir is None
    state_dir = tempfile.mkdtemp(prefix=f"otpy-node-{args.name}-") if temporary else os.path.abspath(args.state_dir)
    os.makedirs(state_dir, exist_ok=True)
    with stop_once():  # the first signal raises; those after it cannot cut the stop in half
        try:
            # --listen wins over the ini's [cluster] listen, which wins over loopback on a free port.
            listen = args.listen or (None if cfg.get("cluster", "listen") else DEFAULT_LISTEN)
            if getattr(args, "stop_with_parent", False):
                _stop_with_parent(os.getppid())
            _serve(cfg, args, state_dir, listen)
        except KeyboardInterrupt:
            pass
        finally:
            if temporary:
                shutil.rmtree(state_dir, ignore_errors=True)
    print(f"node {args.name} stopped", flush=True)
    return 0
