"""The first actor of a host reads the host's endpoint while it is idle.

Its requests then skip the hand-off from the I/O thread
(`actors._core.transport.endpoint_loan`).  While it runs a callback, the I/O thread must
take the endpoint over: exit signals, ``kill``, system requests and the
other actors of the host cannot wait for the callback to end.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from actors import GenServer, Node
from actors._core.wire import system as sysop
from tests.kernel.probes import Echo
from tests.polling import poll_until

pytestmark = pytest.mark.timeout(60)


class Blocker(GenServer):
    """Blocks in a callback until a line is written into its FIFO."""

    def init(self, fifo: str) -> None:
        self.fifo = fifo

    def handle_cast(self, request: Any) -> None:
        if request == "block":
            with open(self.fifo, "rb") as fh:  # blocks until the test opens it for writing
                fh.read(1)

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "register":
            self.register("loan-blocker-name", wait=5.0)  # a request answered through the endpoint
            return "registered"
        return request


class Gate:
    """The writing end of a `Blocker`'s FIFO."""

    def __init__(self, tmp_path: Any) -> None:
        self.path = str(tmp_path / "gate.fifo")
        os.mkfifo(self.path)

    def open(self) -> None:
        with open(self.path, "wb") as fh:
            fh.write(b"x")


def _counters(node: Any, proc: str) -> dict[str, int]:
    return node.runtime.sys_request(proc, sysop.Stats())["counters"]


def test_the_first_actor_of_a_host_reads_its_endpoint(node):
    b = node.spawn(Echo, host="own")
    before = _counters(node, b.proc).get("actors.transport.lent_frames", 0)
    for i in range(50):
        assert b.call(("n", i)) == ("n", i)
    read = _counters(node, b.proc)["actors.transport.lent_frames"] - before
    # Each call is a frame; a few may come while the actor is still busy with
    # the previous one (the I/O thread reads those), but not most of them.
    assert read >= 25, read


def test_a_busy_borrower_still_hears_system_requests_and_kill(node, tmp_path):
    gate = Gate(tmp_path)
    b = node.spawn(Blocker, gate.path, host="own")
    assert b.call("ping") == "ping"  # idle now: it holds the endpoint
    b.cast("block")
    # Answered by the I/O thread, which takes the endpoint over.
    assert poll_until(
        lambda: _counters(node, b.proc).get("actors.transport.endpoint_takeovers", 0) >= 1,
        "the I/O thread to take the endpoint over",
    )
    assert node.runtime.sys_request(b.proc, sysop.Alive(b.id)) is True
    down = node.monitor(b)
    node.kill(b)
    assert down.wait(timeout=10)[1] == "killed"


def test_the_other_actors_of_the_host_answer_while_the_borrower_is_busy(node, tmp_path):
    gate = Gate(tmp_path)
    first = node.spawn(Blocker, gate.path, host="shared")
    other = node.spawn(Echo, host="shared")
    assert first.proc == other.proc
    assert first.call("ping") == "ping"
    first.cast("block")
    for i in range(20):
        assert other.call(("n", i)) == ("n", i)
    gate.open()
    assert first.call("ping") == "ping"  # after the callback, it asks for the endpoint back
    before = _counters(node, first.proc)["actors.transport.lent_frames"]
    for i in range(50):
        assert first.call(("n", i)) == ("n", i)
        assert other.call(("n", i)) == ("n", i)
    assert _counters(node, first.proc)["actors.transport.lent_frames"] - before >= 25


def test_a_borrower_blocked_on_a_system_request_gets_its_answer(node, tmp_path):
    b = node.spawn(Blocker, str(tmp_path / "unused"), host="own")
    assert b.call("ping") == "ping"
    assert b.call("register", timeout=10) == "registered"
    assert node.whereis("loan-blocker-name") == b


def test_when_the_borrower_dies_the_io_thread_reads_for_the_rest_of_the_host(node):
    first = node.spawn(Echo, host="shared")
    other = node.spawn(Echo, host="shared")
    assert first.call("ping") == "ping"
    down = node.monitor(first)
    node.stop(first)
    assert down.wait(timeout=10)[1] == "normal"
    for i in range(20):
        assert other.call(("n", i)) == ("n", i)


def test_exit_signals_to_an_idle_borrower_are_trapped_in_order(node):
    b = node.spawn(Echo, host="own")
    assert b.call(("trap", True)) == "ok"
    for i in range(5):
        b.send(("m", i))
    node.exit(b, "one")
    b.send("after")
    seen = poll_until(lambda: (lambda s: s if len(s) >= 7 else None)(b.call("seen")), "b to see 7 messages")
    assert seen == [("m", 0), ("m", 1), ("m", 2), ("m", 3), ("m", 4), ("EXIT", None, "one"), "after"]


def test_a_host_whose_borrower_is_idle_closes_cleanly():
    with Node() as n:
        refs = [n.spawn(Echo, host="own") for _ in range(3)]
        for r in refs:
            assert r.call("ping") == "ping"
        rundir = n.rundir
    assert not os.path.exists(rundir)
