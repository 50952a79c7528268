"""The demo's node processes: started, SIGKILLed and restarted by the controller, per-node state.

`NodeSet` starts each node as ``python -m actors node`` (an OS process of
its own, on tcp 127.0.0.1 with the cluster key, seeded with the
controller's address), waits for its ready line and for it to be connected
to the controller, and keeps the `subprocess.Popen` of every node it
started: those, and only those, are the processes the `NodeKiller` may
SIGKILL.  A killed node is started again with the same name and state
directory; it comes back as a new incarnation (a new node id) and
reconnects, and ``on_up`` runs again for it (the demo puts its job
workers back there).

`NodeKiller` is the chaos for whole nodes: at most one node down at a
time, one SIGKILL every ``period`` seconds, each followed by a restart
(on a thread of its own, so the load can stop while a node boots).
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from actors import CallTimeout, Exit, Node
from actors.app.couch import COUCH_SUP
from actors.app.nodecmd import parse_ready
from actors.attach import Attached, NotANode

from .base import Check, wait_until

__all__ = ["NodeProc", "NodeSet"]

#: Seconds a node may take from exec to connected (a loaded 2-core machine starts Python slowly).
START_TIMEOUT = 60.0
#: Seconds a node gets to stop after SIGTERM before it is SIGKILLed.
STOP_TIMEOUT = 30.0
#: Seconds a node's counters may take to read after the load (every process of it answers).
STATS_TIMEOUT = 10.0


@dataclass
class NodeProc:
    """One node name and its current OS process (None while down)."""

    name: str
    state_dir: str
    proc: subprocess.Popen[str] | None = None
    address: str | None = None
    rundir: str | None = None
    state: str = "starting"  # starting, up, killed, failed, stopped
    starts: int = 0
    kills: int = 0
    node_ids: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)
    #: The port of its ``/metrics`` (kept across restarts, so a Prometheus scrape config stays right), or None.
    metrics_port: int | None = None
    #: Incarnations the node process ended and replaced by itself (after a network fault).
    rejoins: int = 0

    @property
    def metrics_url(self) -> str | None:
        return None if self.metrics_port is None else f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None


def _free_port() -> int:
    """A tcp port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class NodeSet:
    """The controller's node processes: start, SIGKILL, restart, stop; nothing outlives `stop_all`."""

    def __init__(
        self,
        controller: Node,
        names: list[str],
        *,
        key_path: str,
        config_path: str,
        state_dir: str,
        on_up: Callable[[NodeProc], None] | None = None,
        metrics: int | None = None,
        hosts: Mapping[str, tuple[str, list[str]]] | None = None,
        net_ticktime: float | None = None,
    ) -> None:
        """``metrics``: serve each node's ``/metrics`` too, on ``metrics + 1``, ``+ 2``, ... (0: free ports
        chosen now); None: no metrics.  ``hosts``: per node name, the address it listens on and the
        command prefix that runs it on its host (``ip netns exec NS``); without it every node runs here
        on 127.0.0.1."""
        self.ctl = controller
        self.hosts = dict(hosts or {})
        self.net_ticktime = net_ticktime
        self.key_path = key_path
        self.config_path = config_path
        self.on_up = on_up
        self.lock = threading.Lock()
        self.nodes = {n: NodeProc(n, os.path.join(state_dir, n)) for n in names}
        if metrics is not None:
            for i, n in enumerate(self.nodes.values()):
                n.metrics_port = metrics + 1 + i if metrics else _free_port()
        self.errors: list[str] = []
        self.closing = False  # set by stop_all: no node is started after it
        self.faulted = False  # a network fault is on (`actors.app.workload.netchaos`): no node kill meanwhile

    # -- starting ------------------------------------------------------------------

    def _command(self, n: NodeProc) -> list[str]:
        """The node's command line; its seeds are the controller and every other node up now (a full
        mesh, as Erlang nodes form: the clustered replicator needs every node to see every other)."""
        assert self.ctl.address is not None
        prefix: list[str] = []
        with self.lock:
            if n.name in self.hosts:  # a host of its own: a fixed address, and every other node's as seeds
                listen, prefix = self.hosts[n.name]
                others = [self.hosts[o][0] for o in self.nodes if o != n.name]
            else:
                others = [o.address for o in self.nodes.values() if o is not n and o.state != "killed" and o.address]
                listen = n.address or "tcp://127.0.0.1:0"
        tick = ["--net-ticktime", f"{self.net_ticktime:g}"] if self.net_ticktime is not None else []
        return [
            *prefix,
            sys.executable,
            "-m",
            "actors",
            "node",
            "--name",
            n.name,
            "--listen",
            listen,
            "--cluster-key",
            self.key_path,
            "--config",
            self.config_path,
            "--state-dir",
            n.state_dir,
            *tick,
            "--seeds",
            self.ctl.address,
            *others,
            "--stop-with-parent",
            *(["--metrics", str(n.metrics_port)] if n.metrics_port is not None else []),
        ]

    def _launch(self, n: NodeProc) -> queue.Queue[str]:
        """Exec the node; a thread copies its stdout lines into the returned queue (and ``n.output``)."""
        os.makedirs(n.state_dir, exist_ok=True)
        command = self._command(n)
        with self.lock:
            if self.closing:
                raise RuntimeError(f"not starting {n.name}: the node set is stopping")
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            n.proc = proc
        lines: queue.Queue[str] = queue.Queue()

        keep = os.environ.get("OTPY_DEMO_NODE_LOGS")
        copy = open(os.path.join(keep, f"{n.name}.log"), "a") if keep else None  # noqa: SIM115

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if copy is not None:
                    copy.write(f"{time.time():.3f} {line}")
                    copy.flush()
                lines.put(line.rstrip("\n"))
                with self.lock:
                    n.output = (n.output + [line.rstrip("\n")])[-20:]
            lines.put("")  # EOF
            proc.stdout.close()

        threading.Thread(target=read, name=f"node-{n.name}-out", daemon=True).start()
        with self.lock:
            n.state = "starting"
            n.starts += 1
        return lines

    def _await_ready(self, n: NodeProc, lines: queue.Queue[str], deadline: float) -> bool:
        """Wait (bounded) for the ready line, then for the node to be connected here."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return self._failed(n, f"{n.name}: no ready line within {START_TIMEOUT:g} s")
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                continue
            if line == "":  # EOF: the process is ending
                status = n.proc.wait(timeout=30) if n.proc is not None else None
                return self._failed(n, f"{n.name}: exited with status {status} before it was ready")
            ready = parse_ready(line)
            if ready is not None:
                break
        ok = self._joined(n, ready, deadline)
        if ok:
            proc = n.proc
            threading.Thread(
                target=self._follow, args=(n, proc, lines), name=f"node-{n.name}-follow", daemon=True
            ).start()
        return ok

    def _joined(self, n: NodeProc, ready: Any, deadline: float) -> bool:
        """A ready line came: wait until the controller reaches that incarnation, then run ``on_up``."""
        node_id = self._new_incarnation(n, deadline)
        if node_id is None:
            return self._failed(
                n, f"{n.name}: ready at {ready.address} but its new incarnation never reached the controller"
            )
        with self.lock:
            n.address = ready.address
            n.rundir = ready.rundir
            n.state = "up"
            n.node_ids.append(node_id)
        if self.on_up is not None:
            try:
                self.on_up(n)
            except Exception as exc:  # the node died again, or the set is stopping: said in the summary
                with self.lock:
                    self.errors.append(f"{n.name}: starting its workload failed: {type(exc).__name__}: {exc}")
        return True

    def _follow(self, n: NodeProc, proc: Any, lines: queue.Queue[str]) -> None:
        """After its first ready line: a node process that ends an incarnation by itself (it was cut off
        from the cluster) prints another one; the new incarnation is joined as a restart is."""
        for _ in range(1_000_000):  # bounded: one round per line the node prints, or per second
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                if self.closing or n.proc is not proc:
                    return
                continue
            if line == "":
                return
            ready = parse_ready(line)
            if ready is None:
                continue
            with self.lock:
                if self.closing or n.proc is not proc:
                    return
                n.state = "starting"
                n.rejoins += 1
            self._joined(n, ready, time.monotonic() + START_TIMEOUT)

    def _new_incarnation(self, n: NodeProc, deadline: float) -> str | None:
        """The node id of ``n``'s new incarnation once the controller reaches its ``couch_sup``.

        Right after a restart the controller may not have noticed the old
        incarnation's death yet; a ref of the old id does not count.
        """
        for _ in range(10_000):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if self.ctl.wait_for_node(n.name, timeout=left):
                try:
                    ref = self.ctl.whereis(COUCH_SUP, node=n.name, timeout=min(5.0, left))
                except (Exit, CallTimeout):
                    ref = None
                if ref is not None and ref.node_id not in n.node_ids:
                    return ref.node_id
            time.sleep(0.1)  # the old incarnation's nodedown is on its way: poll, bounded by the deadline
        return None

    def _failed(self, n: NodeProc, why: str) -> bool:
        with self.lock:
            n.state = "failed"
            self.errors.append(why)
        return False

    def start_all(self) -> list[str]:
        """Start every node in parallel, as a full mesh; returns the errors of the ones that did not come up.

        Each node gets a free port chosen here, and every other node's
        address as a seed.  Of two nodes, the one that connects its seeds
        later finds the other listening (a node listens before it connects),
        so every pair is connected whatever the order of their starts.
        """
        with self.lock:
            for n in self.nodes.values():
                n.address = f"tcp://127.0.0.1:{_free_port()}"
        deadline = time.monotonic() + START_TIMEOUT
        waits = [(n, self._launch(n)) for n in self.nodes.values()]
        for n, lines in waits:
            self._await_ready(n, lines, deadline)
        return list(self.errors)

    # -- chaos ---------------------------------------------------------------------

    def kill(self, name: str) -> int | None:
        """SIGKILL node ``name``'s process (one this set started) and reap it; its pid, or None.

        The node comes back (`restart`) on a new port: nothing can reach the
        new incarnation by an old connection to the old one's address."""
        n = self.nodes[name]
        with self.lock:
            proc = n.proc
            if proc is None or n.state != "up":
                return None
            n.state = "killed"
            n.kills += 1
            n.address = None
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
        return proc.pid

    def restart(self, name: str) -> bool:
        """Start node ``name`` again (a new incarnation) and wait until it is connected."""
        n = self.nodes[name]
        return self._await_ready(n, self._launch(n), time.monotonic() + START_TIMEOUT)

    def settle(self, deadline: float) -> bool:
        """After the load: wait (bounded) until no node is still being restarted."""
        return wait_until(lambda: all(n.state in ("up", "failed") for n in self.nodes.values()), deadline, 0.2)

    def pids(self) -> set[int]:
        with self.lock:
            return {n.proc.pid for n in self.nodes.values() if n.proc is not None and n.proc.poll() is None}

    def up(self) -> list[str]:
        with self.lock:
            return sorted(n.name for n in self.nodes.values() if n.state == "up")

    # -- the end ---------------------------------------------------------------------

    def stop_all(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM every live node, wait for its clean exit; SIGKILL what is left at ``timeout``."""
        with self.lock:
            self.closing = True
            live = [n for n in self.nodes.values() if n.proc is not None and n.proc.poll() is None]
        for n in live:
            assert n.proc is not None
            try:
                n.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        for n in live:
            assert n.proc is not None
            try:
                n.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                n.proc.kill()
                n.proc.wait(timeout=10)
                self.errors.append(f"{n.name}: did not stop within {timeout:g} s of SIGTERM; killed")
            with self.lock:
                n.state = "stopped"

    # -- reporting -------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                n.name: {"state": n.state, "pid": n.pid, "incarnations": len(n.node_ids), "kills": n.kills}
                for n in self.nodes.values()
            }

    def line(self) -> str:
        """``n1 up pid 123 inc 2 killed 1; n2 starting ...`` for the live view."""
        parts = []
        for name, s in self.snapshot().items():
            text = f"{name} {s['state']} pid {s['pid']}"
            if s["incarnations"] > 1 or s["kills"]:
                text += f" (incarnation {s['incarnations']}, killed {s['kills']})"
            parts.append(text)
        return "; ".join(parts)

    def restarts(self, timeout: float = STATS_TIMEOUT) -> dict[str, dict[str, int] | str]:
        """Per node up, its restarts per supervisor (read through its runtime directory, as
        ``otpy status`` does: the current incarnation's counters only), or why they could
        not be read.  Read once the load has stopped, so a loaded machine gets ``timeout``."""
        out: dict[str, dict[str, int] | str] = {}
        with self.lock:
            where = {n.name: n.rundir for n in self.nodes.values() if n.state == "up" and n.rundir}
        for name, rundir in sorted(where.items()):
            try:
                view = Attached(rundir, timeout=timeout)
            except (NotANode, OSError) as exc:
                out[name] = f"not read ({exc})"
                continue
            try:
                counters = view.stats().get("counters", {})
            except (Exit, CallTimeout, NotANode, OSError) as exc:
                out[name] = f"not read ({exc})"
                continue
            finally:
                view.close()
            out[name] = {
                k[len("supervision.restarts.") :]: v
                for k, v in counters.items()
                if k.startswith("supervision.restarts.") and v
            }
        return out

    def check(self) -> Check:
        """Every node killed must have come back as a new incarnation; a node that did not is a failure."""
        c = Check("nodes")
        with self.lock:
            nodes = list(self.nodes.values())
            kills = sum(n.kills for n in nodes)
            rejoins = sum(n.rejoins for n in nodes)
            back = sum(min(n.kills, max(0, len(n.node_ids) - 1 - n.rejoins)) for n in nodes)
            down = [n.name for n in nodes if n.state not in ("up", "stopped")]
        c.lines.append(
            f"nodes: {len(nodes)} node processes over tcp; {kills} SIGKILLed whole, {back} of them "
            f"restarted and reconnected as a new incarnation"
            + (f"; {rejoins} incarnations ended by a network fault and replaced by the node itself" if rejoins else "")
            + (f"; not up: {', '.join(down)}" if down else "")
        )
        restarts = self.restarts()
        if restarts:
            c.lines.append(
                "  restarts per supervisor on the nodes (current incarnations): "
                + "; ".join(
                    f"{n}: "
                    + (r if isinstance(r, str) else ", ".join(f"{k} {v}" for k, v in sorted(r.items())) or "none")
                    for n, r in restarts.items()
                )
            )
        for why in self.errors:
            c.lines.append(f"  {why}")
        c.lost = len(down)
        c.counted = f"{len(nodes)} nodes up ({kills} node kills)"
        return c
