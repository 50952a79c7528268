"""Test helpers: a link in this process that records what it sees, and peer processes."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from actors._core.net.keys import ClusterKey
from actors._core.net.net import NetLink
from tests.polling import take_first

ENV = dict(os.environ, PYTHONPATH=os.getcwd())
PEER = os.path.join(os.path.dirname(__file__), "net_peer.py")
NODE_PEER = os.path.join(os.path.dirname(__file__), "node_peer.py")


class Recorder:
    """Callbacks for a `NetLink` that put every event on one queue."""

    def __init__(self) -> None:
        self.events: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.frames: list[tuple[str, list[bytes]]] = []

    def on_frame(self, peer: str, frames: list[bytes]) -> None:
        self.frames.append((peer, frames))
        self.events.put(("frame", peer, frames, time.monotonic()))

    def on_up(self, peer: str, inc: int) -> None:
        self.events.put(("up", peer, inc, time.monotonic()))

    def on_down(self, peer: str, inc: int, reason: str) -> None:
        self.events.put(("down", peer, inc, reason, time.monotonic()))

    def expect(self, kind: str, timeout: float = 10.0) -> tuple[Any, ...]:
        """The next event of ``kind``, skipping others; fails after ``timeout``."""
        event = take_first(self.events, lambda e: e[0] == kind, timeout)
        if event is None:
            raise AssertionError(f"no {kind} event within {timeout} s")
        return event


def make_link(name: str, key: ClusterKey | None, rec: Recorder, **kw: Any) -> NetLink:
    link = NetLink(name, "tcp://127.0.0.1:0", key, on_frame=rec.on_frame, on_up=rec.on_up, on_down=rec.on_down, **kw)
    link.start()
    return link


class LineProcess:
    """A helper script in its own OS process that speaks in lines: commands on
    stdin, events on stdout (read into a queue by a thread), and ``ADDR <address>
    ...`` once it is listening.  Closing it (or a failed start) leaves neither
    the process nor the reader thread behind."""

    #: What `expect` calls the process in its failure messages.
    what = "peer"

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV)
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:  # a loaded machine may take many seconds just to start Python and import zmq
            self.addr_line = self.expect("ADDR", timeout=30.0).split()
        except BaseException:
            self.close()
            raise
        self.address = self.addr_line[1]

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
            raise AssertionError(f"{self.what} printed no {prefix} within {timeout} s")
        if not line.startswith(prefix):
            raise AssertionError(f"{self.what} exited before printing {prefix}")
        return line

    def command(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)  # only the process this helper started

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


class PeerProcess(LineProcess):
    """`net_peer.py`: a bare `NetLink` in its own OS process."""

    def __init__(self, name: str, key_path: str | None, ticktime: float = 15.0, connect: str | None = None) -> None:
        cmd = [sys.executable, PEER, "--name", name, "--ticktime", str(ticktime)]
        if key_path:
            cmd += ["--key", key_path]
        if connect:
            cmd += ["--connect", connect]
        super().__init__(cmd)
        self.incarnation = int(self.addr_line[2])


class NodeProcess(LineProcess):
    """`node_peer.py`: a `Node` in its own OS process (``port`` 0 picks one;
    giving the port of a node that died restarts it at its old address)."""

    what = "node process"

    def __init__(
        self,
        name: str,
        key: str | None,
        ticktime: float = 15.0,
        port: int = 0,
        seeds: tuple[str, ...] = (),
        rejoin: bool = False,
    ) -> None:
        cmd = [sys.executable, NODE_PEER, "--name", name, "--ticktime", str(ticktime), "--port", str(port)]
        if rejoin:
            cmd.append("--rejoin")
        if key:
            cmd += ["--key", key]
        for seed in seeds:
            cmd += ["--seed", seed]
        super().__init__(cmd)
        self.name = name
        self.port = int(self.address.rpartition(":")[2])

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def ask(self, line: str, answer: str, timeout: float = 20.0) -> str:
        """Send a command and return the rest of the line starting with ``answer``."""
        self.command(line)
        return self.expect(answer, timeout)[len(answer) :].strip()
