"""Places where the kernel once differed from what OTP documents.

Each test states the OTP rule it holds the kernel to (gen_server, erlang:exit/2,
link/1, register/2, cancel_timer/1, send/2); they run with the target in the
host program's process and in a host process of its own.
"""

from __future__ import annotations

import queue
from typing import Any

import pytest

from actors import ActorRef, Exit, GenServer, Stop
from tests.kernel.probes import Probe

pytestmark = pytest.mark.timeout(30)

PLACES = [None, "own"]


class Subject(GenServer):
    """Does what it is called with; tells ``report`` what reaches it."""

    def init(self, report: ActorRef, trap: bool = False) -> None:
        self.report = report
        self.trap_exit = trap

    def handle_call(self, request: Any, from_: Any) -> Any:
        op, *args = request
        if op == "stop":  # {stop, Reason, State}: no reply
            return Stop(args[0])
        if op == "stop_reply":  # {stop, Reason, Reply, State}
            return Stop(args[0], reply=args[1])
        if op == "exit":
            self.exit(args[0], args[1])
            return "ok"
        if op == "exit_self":
            self.exit(self.ref, args[0])
            return "ok"
        if op == "link":
            self.link(args[0])
            return "ok"
        if op == "ping":
            return "pong"
        raise ValueError(request)

    def handle_info(self, message: Any) -> None:
        self.report.send(message)

    def terminate(self, reason: Any) -> None:
        self.report.send(("terminated", reason))


def reporter(node) -> tuple[ActorRef, "queue.Queue[Any]"]:
    """An actor of the test process that puts what it gets on a queue."""
    q: queue.Queue[Any] = queue.Queue()
    return node.spawn(Probe, q), q


# -- gen_server ------------------------------------------------------------------------


@pytest.mark.parametrize("host", PLACES)
def test_stop_without_reply_from_handle_call_fails_the_call_with_the_reason(node, host):
    """gen_server: ``{stop, Reason, State}`` from handle_call sends no reply,
    so the caller's call exits with Reason (after terminate ran)."""
    report, q = reporter(node)
    s = node.spawn(Subject, report, host=host)
    with pytest.raises(Exit) as raised:
        s.call(("stop", "done"), timeout=10)
    assert raised.value.reason == "done"
    assert q.get(timeout=5) == ("terminated", "done")
    # {stop, Reason, Reply, State} still replies, after terminate.
    s2 = node.spawn(Subject, report, host=host)
    assert s2.call(("stop_reply", "normal", "bye"), timeout=10) == "bye"
    assert q.get(timeout=5) == ("terminated", "normal")
