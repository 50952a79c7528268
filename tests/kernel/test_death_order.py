"""What an actor sent before it was killed goes before any word of its death,
and a killed actor sends nothing more.

An actor's casts and sends to another process wait in its thread's batch
until its callback returns or blocks in the kernel (or 2 ms pass).  A
``kill`` is handled on another thread, while the callback may still run:
its exit signals must not overtake that batch, as in Erlang, where the
signals of one process to another keep their order.  And Python cannot stop
the killed actor's callback, but what it sends after its death is dropped:
a dead process sends nothing.
"""

from __future__ import annotations

import os
import queue
from typing import Any

import pytest

from actors import GenServer
from tests.kernel.probes import Echo, Probe

pytestmark = pytest.mark.timeout(60)


class Victim(GenServer):
    """Linked to ``watcher``; on ``go``, sends it three messages, asks
    ``killer`` (an actor of the same process) to kill it, and blocks outside
    the kernel, so the three stay batched."""

    def init(self, watcher: Any, gate: str) -> None:
        self.link(watcher)
        self.watcher = watcher
        self.gate = gate

    def handle_cast(self, request: Any) -> None:
        op, other = request
        if op == "go":
            for i in range(3):
                self.watcher.send(("m", i))
            other.send(("kill", self.ref))
            with open(self.gate, "rb") as fh:  # until the test opens it
                fh.read(1)
        elif op == "after_death":
            with open(self.gate + ".in", "wb") as fh:  # tells the test it is in the callback
                fh.write(b"x")
            with open(self.gate, "rb") as fh:  # killed meanwhile
                fh.read(1)
            other.send("sent by the dead")
            with open(self.gate + ".done", "wb") as fh:
                fh.write(b"x")


class Killer(GenServer):
    def handle_info(self, message: Any) -> None:
        if type(message) is tuple and message[0] == "kill":
            self.exit(message[1], "kill")


def _release(path: str) -> None:
    with open(path, "wb") as fh:
        fh.write(b"x")


def test_a_kill_does_not_overtake_what_the_actor_sent_before(node, tmp_path):
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    q: "queue.Queue[Any]" = queue.Queue()
    watcher = node.spawn(Probe, q, True)  # in the test process, trapping exits
    victim = node.spawn(Victim, watcher, gate, host="shared")
    killer = node.spawn(Killer, host="shared")
    assert victim.proc == killer.proc
    victim.cast(("go", killer))
    seen = [q.get(timeout=10) for _ in range(4)]
    _release(gate)
    assert seen == [("m", 0), ("m", 1), ("m", 2), ("EXIT", victim, "killed")]


def test_a_killed_actor_sends_nothing_more(node, tmp_path):
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    os.mkfifo(gate + ".in")
    os.mkfifo(gate + ".done")
    q: "queue.Queue[Any]" = queue.Queue()
    watcher = node.spawn(Probe, q, True)
    victim = node.spawn(Victim, watcher, gate, host="shared")
    other = node.spawn(Echo, host="shared")  # same process: a send reaches it at once
    victim.cast(("after_death", other))
    with open(gate + ".in", "rb") as fh:  # the callback has started
        fh.read(1)
    down = node.monitor(victim)
    node.kill(victim)
    assert down.wait(timeout=10)[1] == "killed"
    _release(gate)  # the callback runs on and sends...
    with open(gate + ".done", "rb") as fh:  # ... and has, by now
        fh.read(1)
    assert other.call("seen") == []
