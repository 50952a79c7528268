"""``otpy node`` daemons on namespace hosts, and the test's way of asking them what they see.

Each `HostNode` is ``python -m actors node`` started with ``ip netns exec``
on its host, listening on the host's address with the cluster key, seeded
with every other node's address, as an operator would run it.  The test
talks to it on channels no network fault can cut: the ready line on its
stdout (printed again by each new incarnation, with its new runtime
directory), its log on stderr, and its runtime directory (a unix socket,
`actors.attach.Attached`), through which it asks the node which nodes it
lists.
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
from typing import Any

import cloudpickle

from actors import ActorRef
from actors.app.nodecmd import Ready, parse_ready
from actors.attach import Attached
from tests.hosts.host_actors import Caller
from tests.hosts.topology import Host, Topology
from tests.polling import take_first

__all__ = ["Cluster", "HostNode", "make_key"]

PORT = 4370
ENV = dict(os.environ, PYTHONPATH=os.getcwd())


def make_key(directory: str) -> str:
    """A cluster key file made as an operator makes one (``python -m actors keygen``)."""
    path = os.path.join(directory, "cluster.key")
    subprocess.run(
        [sys.executable, "-m", "actors", "keygen", path], check=True, timeout=60, capture_output=True, env=ENV
    )
    return path


class HostNode:
    """One ``otpy node`` on one host; see the module's docstring."""

    def __init__(
        self,
        host: Host,
        name: str,
        key: str,
        seeds: Iterable[str],
        workdir: str,
        net_ticktime: float = 2.0,
        config: str | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        self.host = host
        self.name = name
        self.address = f"tcp://{host.address}:{PORT}"
        self.state_dir = os.path.join(workdir, f"state-{name}")
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
            self.state_dir,
            "--stop-with-parent",
            *extra,
        ]
        seeds = [s for s in seeds if s != self.address]
        if seeds:
            cmd += ["--seeds", *seeds]
        if config:
            cmd += ["--config", config]
        self.readies: list[Ready] = []
        self.log: list[str] = []  # every stderr line, for assertions and for failure messages
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._attached: Attached | None = None
        self._attached_for: str | None = None
        self._caller: tuple[str, ActorRef] | None = None
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
                self._events.put(("ready", ready))
        self._events.put(("exit", None))

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line.rstrip("\n"))

    def wait_ready(self, count: int = 1, timeout: float = 60.0) -> Ready:
        """The ready line of incarnation ``count`` (1: the first), once printed; fails if the process exits first."""
        deadline = time.monotonic() + timeout
        while len(self.readies) < count:
            event = take_first(self._events, lambda e: True, max(0.0, deadline - time.monotonic()))
            if event is None:
                raise AssertionError(
                    f"{self}: no ready line #{count} within {timeout} s; log tail:\n" + "\n".join(self.log[-30:])
                )
            if event[0] == "exit":
                raise AssertionError(
                    f"{self} exited ({self.proc.wait()}) before ready line #{count}; log tail:\n"
                    + "\n".join(self.log[-30:])
                )
        return self.readies[count - 1]

    @property
    def ready(self) -> Ready:
        """The current incarnation's ready line."""
        return self.readies[-1] if self.readies else self.wait_ready()

    def _view(self) -> Attached:
        rundir = self.ready.rundir
        if self._attached is None or self._attached_for != rundir:
            if self._attached is not None:
                self._attached.close()
                self._attached = None
            self._attached = Attached(rundir, timeout=5.0)
            self._attached_for = rundir
        return self._attached

    def ask(self, op: str, *args: Any, timeout: float = 5.0) -> Any:
        """A sys request to the node process through its runtime directory (never over the network)."""
        return self._view().ask(op, *args, timeout=timeout)

    def spawn(
        self,
        cls: type,
        *args: Any,
        on: str | None = None,
        name: str | None = None,
        host: str | None = None,
        timeout: float = 30.0,
    ) -> ActorRef:
        """``Node.spawn(cls, *args, node=on)`` carried out by this node (``on``: another node, or this one)."""
        payload = cloudpickle.dumps((cls, tuple(args), {}, name, None, False))
        kind, detail = self.ask("spawn_on", [on or self.name], host, None, payload, timeout=timeout)
        if kind != "ok":
            raise AssertionError(f"spawn of {cls.__name__} on {on or self.name} via {self.name}: {kind} {detail}")
        return detail

    def call(self, ref: ActorRef, request: Any, timeout: float = 5.0) -> tuple[str, Any, float]:
        """A call to ``ref`` made on this node (by a `Caller` there): ``("ok", reply, seconds)`` or
        ``("exit", reason, seconds)``."""
        view = self._view()
        if self._caller is None or self._caller[0] != self.ready.rundir:
            self._caller = (self.ready.rundir, self.spawn(Caller))
        return view.call(self._caller[1], ("call", ref, request, timeout), timeout + 10.0)

    def nodes(self) -> list[str] | None:
        """The nodes this node lists now; None while it cannot answer (frozen, restarting)."""
        try:
            return sorted(self.ask("nodes"))
        except Exception:  # noqa: BLE001 -- NotANode, a timeout, a gone rundir: "not now"
            if self._attached is not None:
                self._attached.close()
                self._attached = None
            return None

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)  # only the process this helper started

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (a clean stop) and wait; SIGKILL if it does not end in ``timeout``."""
        if self._attached is not None:
            self._attached.close()
            self._attached = None
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
        return self.proc.returncode


class Cluster:
    """One `HostNode` per named host, all seeded with each other's addresses, started together."""

    def __init__(
        self,
        topo: Topology,
        names: Sequence[str],
        key: str,
        net_ticktime: float = 2.0,
        config: str | None = None,
        workdir: str | None = None,
    ) -> None:
        self.topo = topo
        self.net_ticktime = net_ticktime
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix=f"{topo.prefix}-nodes-")
        seeds = [f"tcp://{topo[n].address}:{PORT}" for n in names]
        self.nodes: dict[str, HostNode] = {}
        try:
            for n in names:
                self.nodes[n] = HostNode(topo[n], n, key, seeds, self.workdir, net_ticktime, config)
            for node in self.nodes.values():
                node.wait_ready(timeout=120.0)
        except BaseException:
            self.close()
            raise

    def __getitem__(self, name: str) -> HostNode:
        return self.nodes[name]

    def views(self) -> dict[str, list[str] | None]:
        """What each node lists now (None: it did not answer)."""
        return {name: node.nodes() for name, node in self.nodes.items()}

    def wait_views(self, expected: dict[str, Sequence[str]], timeout: float, what: str = "") -> float:
        """Wait until each named node lists exactly the nodes given; returns the seconds it took.

        Polled through the runtime directories (each try is a round trip to
        every node), bounded in time and tries."""
        want = {name: sorted(v) for name, v in expected.items()}
        start = time.monotonic()
        seen: dict[str, list[str] | None] = {}
        for _ in range(100_000):
            seen = {name: self.nodes[name].nodes() for name in want}
            if seen == want:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                break
            threading.Event().wait(0.1)  # paces the polling of a state no message announces
        logs = "\n".join(f"--- {n}:\n" + "\n".join(self.nodes[n].log[-15:]) for n in self.nodes)
        raise AssertionError(f"{what or 'views'}: wanted {want}, saw {seen} after {timeout} s\n{logs}")

    def wait_mesh(self, timeout: float, names: Iterable[str] | None = None) -> float:
        """Wait until every node (of ``names``) lists every other; returns the seconds it took."""
        chosen = list(self.nodes if names is None else names)
        return self.wait_views({n: [m for m in chosen if m != n] for n in chosen}, timeout, "full mesh")

    def close(self) -> None:
        for node in self.nodes.values():
            if self.topo.hosts[node.host.name].frozen:
                self.topo.thaw(node.host.name)
        for node in self.nodes.values():
            node.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
