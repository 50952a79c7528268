"""gen_server's Timeout in callback returns (`actors.Timeout`).

OTP: ``{ok, State, T}``, ``{reply, R, State, T}``, ``{noreply, State, T}``:
when no message arrives within T after the callback, ``handle_info(timeout)``
runs; a message that comes first cancels it.  Each test runs with the
server in the host program's process and in a host process of its own.
"""

from __future__ import annotations

import queue
from typing import Any

import pytest

from actors import ActorRef, Continue, GenServer, Timeout
from tests.kernel.probes import Probe

pytestmark = pytest.mark.timeout(30)

PLACES = [None, "own"]


class Idler(GenServer):
    """Returns the Timeout it is told to; tells ``report`` every message it gets."""

    def init(self, report: ActorRef, idle: float | None = None) -> Any:
        self.report = report
        self.pending: Any = None
        return Timeout(idle) if idle is not None else None

    def handle_call(self, request: Any, from_: Any) -> Any:
        op, *args = request
        if op == "reply_then_idle":
            return Timeout(args[0], reply="ok")
        if op == "answer_on_timeout":  # {noreply, State, T}: the timeout answers
            self.pending = from_
            return Timeout(args[0])
        if op == "ping":
            return "pong"
        raise ValueError(request)

    def handle_cast(self, request: Any) -> Any:
        return Timeout(request)

    def handle_info(self, message: Any) -> None:
        if message == "timeout" and self.pending is not None:
            self.reply(self.pending, "answered by the timeout")
            self.pending = None
        self.report.send(message)


def spawn(node, host: str | None, idle: float | None = None) -> tuple[ActorRef, "queue.Queue[Any]"]:
    q: queue.Queue[Any] = queue.Queue()
    report = node.spawn(Probe, q)
    return node.spawn(Idler, report, idle, host=host), q


@pytest.mark.parametrize("host", PLACES)
def test_a_timeout_from_init_delivers_timeout(node, host):
    _server, q = spawn(node, host, idle=0.05)
    assert q.get(timeout=10) == "timeout"


@pytest.mark.parametrize("host", PLACES)
def test_reply_with_a_timeout_answers_then_times_out(node, host):
    server, q = spawn(node, host)
    assert server.call(("reply_then_idle", 0.05)) == "ok"
    assert q.get(timeout=10) == "timeout"


@pytest.mark.parametrize("host", PLACES)
def test_noreply_with_a_timeout_can_answer_from_the_timeout(node, host):
    server, q = spawn(node, host)
    assert server.call(("answer_on_timeout", 0.05), timeout=10) == "answered by the timeout"
    assert q.get(timeout=10) == "timeout"


@pytest.mark.parametrize("host", PLACES)
def test_zero_times_out_at_once_when_nothing_waits(node, host):
    server, q = spawn(node, host)
    server.cast(0)
    assert q.get(timeout=10) == "timeout"


@pytest.mark.parametrize("host", PLACES)
def test_a_message_that_comes_first_cancels_the_timeout(node, host):
    """The message is handled instead, and its callback (returning None)
    leaves no timeout: nothing more arrives, where the first callback's
    0.3 s would have fired well within the 1.5 s waited."""
    server, q = spawn(node, host)
    server.cast(3600)  # armed, and surely still pending when the message comes
    server.send("first")
    assert q.get(timeout=10) == "first"
    server.cast(0.3)
    server.send("second")
    assert q.get(timeout=10) == "second"
    with pytest.raises(queue.Empty):
        q.get(timeout=1.5)
    assert server.call(("ping",)) == "pong"


@pytest.mark.parametrize("host", PLACES)
def test_each_callback_sets_its_own_timeout(node, host):
    """A message that returns a Timeout of its own replaces the pending one."""
    server, q = spawn(node, host)
    server.cast(3600)
    server.cast(0.05)
    assert q.get(timeout=10) == "timeout"


def test_timeout_is_a_number_of_seconds_or_none():
    assert Timeout(None).seconds is None
    assert Timeout(0).seconds == 0
    assert Timeout(1.5, reply="x").reply == "x"
    for bad in (-1, "1", float("nan"), True):
        with pytest.raises(ValueError):
            Timeout(bad)


@pytest.mark.parametrize("host", PLACES)
def test_a_bad_timeout_crashes_the_server(node, host):
    """OTP's bad_return_value: the callback's return is invalid, so the server dies."""
    server, _q = spawn(node, host)
    mon = node.monitor(server)
    server.cast(-1)
    ref, reason = mon.wait(10)
    assert ref == server
    assert "Timeout seconds must be a number" in repr(reason)


class ContinuesAfterCall(GenServer):
    """``{reply, R, S, {continue, C}}`` and ``{noreply, S, {continue, C}}``."""

    def init(self, report: ActorRef) -> None:
        self.report = report

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "reply_then_continue":
            self.ref.send("queued during the call")  # waits in the mailbox behind the continue
            return Continue("after the reply", reply="replied")
        self.pending = from_
        return Continue("answers")  # no reply yet: handle_continue gives it

    def handle_continue(self, arg: Any) -> None:
        if arg == "answers":
            self.reply(self.pending, "answered by handle_continue")
        self.report.send(("continued", arg))

    def handle_info(self, message: Any) -> None:
        self.report.send(message)


@pytest.mark.parametrize("host", PLACES)
def test_handle_call_may_continue_after_its_reply(node, host):
    q: queue.Queue[Any] = queue.Queue()
    server = node.spawn(ContinuesAfterCall, node.spawn(Probe, q), host=host)
    assert server.call("reply_then_continue") == "replied"
    assert q.get(timeout=10) == ("continued", "after the reply")
    assert q.get(timeout=10) == "queued during the call"
    assert server.call("continue_answers") == "answered by handle_continue"
    assert q.get(timeout=10) == ("continued", "answers")
