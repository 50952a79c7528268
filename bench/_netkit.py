"""Nodes in other OS processes for the cluster benches, and a way to ask them what they see.

- `NodeProcess`: ``bench/_node_peer.py``, a `Node` on 127.0.0.1 in its own
  OS process, driven in lines over its stdin/stdout (``_groups.py``,
  ``_node_loss.py``);
- `Cluster` of `HostNode`: ``python -m actors node`` daemons, one per
  network-namespace host, seeded with each other as an operator would run
  them, asked through their runtime directories which nodes they list, a
  channel no network cut can sever (``heal.py``).

Each helper starts processes only of its own and leaves none behind when it
is closed or fails to start.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence

from _common import take_first

from actors.app.nodecmd import Ready, parse_ready
from actors.app.workload.netns import Host, Topology
from actors.attach import Attached

__all__ = ["Cluster", "HostNode", "NodeProcess"]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
#: The children import this checkout's ``actors`` (and, for `NodeProcess`, bench/'s modules by name).
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
NODE_PEER = os.path.join(HERE, "_node_peer.py")


class NodeProcess:
    """``_node_peer.py``: a `Node` in its own OS process (``port`` 0 picks one;
    giving the port of a node that died restarts it at its old address).

    Commands go to its stdin, one a line; its stdout is read into a queue by a
    thread; it prints ``ADDR <address>`` once listening and stops when its
    stdin closes."""

    def __init__(self, name: str, key: str | None, ticktime: float = 15.0, port: int = 0) -> None:
        cmd = [sys.executable, NODE_PEER, "--name", name, "--ticktime", str(ticktime), "--port", str(port)]
        if key:
            cmd += ["--key", key]
        self.name = name
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV)
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:  # a loaded machine may take many seconds just to start Python and import zmq
            self.address = self.expect("ADDR", timeout=30.0).split()[1]
        except BaseException:
            self.close()
            raise
        self.port = int(self.address.rpartition(":")[2])

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("EOF")

    def expect(self, prefix: str, timeout: float = 10.0) -> str:
        """The next line starting with ``prefix``, skipping others; fails after
        ``timeout`` or when the process exits first."""
        line = take_first(self.lines, lambda ln: ln.startswith(prefix) or ln == "EOF", timeout)
        if line is None:
            raise RuntimeError(f"node process {self.name} printed no {prefix} within {timeout} s")
        if not line.startswith(prefix):
            raise RuntimeError(f"node process {self.name} exited before printing {prefix}")
        return line

    def ask(self, line: str, answer: str, timeout: float = 20.0) -> str:
        """Send a command and return the rest of the line starting with ``answer``."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.expect(answer, timeout)[len(answer) :].strip()

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)  # only the process this helper started

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def close(self) -> None:
        """EOF on stdin asks it to stop; a stopped (SIGSTOP) one is continued first."""
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._reader.join(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


PORT = 4370


class HostNode:
    """One ``python -m actors node`` on one namespace host, listening on the host's
    address with the cluster key, seeded with every other node's address.

    Read on channels no network fault can cut: the ready line on its stdout
    (printed again by each new incarnation, with its new runtime directory),
    its log on stderr, and its runtime directory, through which `nodes` asks
    the node which nodes it lists."""

    def __init__(
        self, host: Host, name: str, key: str, seeds: Iterable[str], workdir: str, net_ticktime: float
    ) -> None:
        self.host = host
        self.name = name
        self.address = f"tcp://{host.address}:{PORT}"
        cmd = [
            *host.exec_prefix(),
            sys.executable,
            "-m",
            "actors",
            "node",
            "--name",
            name,
            "--listen",
            self.address,
            "--cluster-key",
            key,
            "--net-ticktime",
            str(net_ticktime),
            "--log-level",
            "info",
            "--state-dir",
            os.path.join(workdir, f"state-{name}"),
            "--stop-with-parent",
        ]
        seeds = [s for s in seeds if s != self.address]
        if seeds:
            cmd += ["--seeds", *seeds]
        self.readies: list[Ready] = []
        self.log: list[str] = []  # every stderr line, for failure messages
        self._events: queue.Queue[str] = queue.Queue()
        self._attached: Attached | None = None
        self._attached_for: str | None = None
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            start_new_session=True,
        )
        self._threads = [
            threading.Thread(target=self._read_out, daemon=True, name=f"{name}-stdout"),
            threading.Thread(target=self._read_err, daemon=True, name=f"{name}-stderr"),
        ]
        for t in self._threads:
            t.start()

    def __repr__(self) -> str:
        return f"<HostNode {self.name} on {self.host.name} pid {self.proc.pid}>"

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            ready = parse_ready(line)
            if ready is not None:
                self.readies.append(ready)
                self._events.put("ready")
        self._events.put("exit")

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line.rstrip("\n"))

    def wait_ready(self, count: int = 1, timeout: float = 60.0) -> Ready:
        """The ready line of incarnation ``count`` (1: the first), once printed; fails if the process exits first."""
        deadline = time.monotonic() + timeout
        while len(self.readies) < count:
            event = take_first(self._events, lambda e: True, max(0.0, deadline - time.monotonic()))
            if event is None or event == "exit":
                why = f"exited ({self.proc.wait()}) before" if event else f"printed within {timeout} s no"
                raise RuntimeError(f"{self} {why} ready line #{count}; log tail:\n" + "\n".join(self.log[-30:]))
        return self.readies[count - 1]

    def nodes(self) -> list[str] | None:
        """The nodes this node lists now; None while it cannot answer (frozen, restarting)."""
        try:
            rundir = (self.readies[-1] if self.readies else self.wait_ready()).rundir
            if self._attached is None or self._attached_for != rundir:
                self._close_attached()
                self._attached = Attached(rundir, timeout=5.0)
                self._attached_for = rundir
            return sorted(self._attached.ask("nodes", timeout=5.0))
        except Exception:  # noqa: BLE001 -- NotANode, a timeout, a gone rundir: "not now"
            self._close_attached()
            return None

    def _close_attached(self) -> None:
        if self._attached is not None:
            self._attached.close()
            self._attached = None

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a clean stop) and wait; SIGKILL if it does not end in ``timeout``."""
        self._close_attached()
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for t in self._threads:
            t.join(timeout=10)


class Cluster:
    """One `HostNode` per named host, all seeded with each other's addresses, started together."""

    def __init__(self, topo: Topology, names: Sequence[str], key: str, net_ticktime: float) -> None:
        self.topo = topo
        self.workdir = tempfile.mkdtemp(prefix=f"{topo.prefix}-nodes-")
        seeds = [f"tcp://{topo[n].address}:{PORT}" for n in names]
        self.nodes: dict[str, HostNode] = {}
        try:
            for n in names:
                self.nodes[n] = HostNode(topo[n], n, key, seeds, self.workdir, net_ticktime)
            for node in self.nodes.values():
                node.wait_ready(timeout=120.0)
        except BaseException:
            self.close()
            raise

    def __getitem__(self, name: str) -> HostNode:
        return self.nodes[name]

    def wait_views(self, expected: dict[str, Sequence[str]], timeout: float, what: str = "") -> float:
        """Wait until each named node lists exactly the nodes given; returns the seconds it took.

        Polled through the runtime directories every 0.1 s (no message
        announces a node's view), bounded in time and tries."""
        want = {name: sorted(v) for name, v in expected.items()}
        start = time.monotonic()
        seen: dict[str, list[str] | None] = {}
        for _ in range(100_000):
            seen = {name: self.nodes[name].nodes() for name in want}
            if seen == want:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                break
            threading.Event().wait(0.1)
        logs = "\n".join(f"--- {n}:\n" + "\n".join(self.nodes[n].log[-15:]) for n in self.nodes)
        raise RuntimeError(f"{what or 'views'}: wanted {want}, saw {seen} after {timeout} s\n{logs}")

    def wait_mesh(self, timeout: float) -> float:
        """Wait until every node lists every other; returns the seconds it took."""
        return self.wait_views({n: [m for m in self.nodes if m != n] for n in self.nodes}, timeout, "full mesh")

    def close(self) -> None:
        for node in self.nodes.values():
            if self.topo.hosts[node.host.name].frozen:
                self.topo.thaw(node.host.name)
        for node in self.nodes.values():
            node.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
