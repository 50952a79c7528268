"""Places where the kernel once differed from what OTP documents.

Each test states the OTP rule it holds the kernel to (gen_server, erlang:exit/2,
link/1, register/2, cancel_timer/1, send/2); they run with the target in the
host program's process and in a host process of its own.
"""

from __future__ import annotations

import queue
from typing import Any

import pytest

import actors
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


# -- exit signals ----------------------------------------------------------------------


@pytest.mark.parametrize("host", PLACES)
def test_exit_self_normal_ends_a_non_trapping_actor(node, host):
    """erlang:exit/2: a ``normal`` signal is ignored by a non-trapping
    process, unless it is the calling process itself, which then exits with
    reason ``normal``; a trapping one gets ``{'EXIT', self(), normal}``."""
    report, q = reporter(node)
    s = node.spawn(Subject, report, host=host)
    down = node.monitor(s)
    with pytest.raises(Exit) as raised:  # it dies before it can reply
        s.call(("exit_self", "normal"))
    assert raised.value.reason == "normal"
    assert down.wait(10) == (s, "normal")
    assert q.empty()  # an exit signal, not a stop: terminate did not run
    t = node.spawn(Subject, report, True, host=host)
    assert t.call(("exit_self", "normal")) == "ok"
    assert q.get(timeout=5) == ("EXIT", t, "normal")
    assert t.call(("ping",)) == "pong"


@pytest.mark.parametrize("host", PLACES)
def test_a_linked_actor_dying_with_reason_kill_sends_a_trappable_signal(node, host):
    """Only ``exit(Pid, kill)`` is untrappable: a linked process that exits
    with reason ``kill`` sends an ordinary link signal, so a trapping process
    gets ``{'EXIT', Pid, kill}`` and a non-trapping one dies with reason
    ``kill`` (only the untrappable ``exit/2`` signal turns into ``killed``)."""
    report, q = reporter(node)
    watcher = node.spawn(Subject, report, True, host=host)
    dying = node.spawn(Subject, report, host="own")
    assert watcher.call(("link", dying)) == "ok"
    assert dying.call(("stop_reply", "kill", "ok")) == "ok"
    assert q.get(timeout=5) == ("terminated", "kill")
    assert q.get(timeout=5) == ("EXIT", dying, "kill")
    assert watcher.call(("ping",)) == "pong"
    plain = node.spawn(Subject, report, host=host)
    dying2 = node.spawn(Subject, report, host="own")
    assert plain.call(("link", dying2)) == "ok"
    down = node.monitor(plain)
    assert dying2.call(("stop_reply", "kill", "ok")) == "ok"
    assert down.wait(10) == (plain, "kill")


@pytest.mark.parametrize("host", PLACES)
def test_exit_signal_from_a_linked_actor_leaves_the_link(node, host):
    """exit/2 sends an exit signal; it does not remove a link between sender
    and receiver (only a linked process's death or unlink/1 does): a trapping
    process that got ``exit(Pid, foo)`` from a linked process still takes
    that process down when it crashes later."""
    report, q = reporter(node)
    sender = node.spawn(Subject, report, host=host)
    trapper = node.spawn(Subject, report, True, host="own")
    assert sender.call(("link", trapper)) == "ok"
    assert sender.call(("exit", trapper, "foo")) == "ok"
    assert q.get(timeout=5) == ("EXIT", sender, "foo")
    down = node.monitor(sender)
    node.exit(trapper, "kill")
    assert down.wait(10) == (sender, "killed")


# -- names -----------------------------------------------------------------------------


@pytest.mark.parametrize("host", PLACES)
def test_a_name_given_with_node_register_is_released_when_the_actor_dies(node, host):
    """register/2: a registered name is released when its process exits, so
    ``whereis`` then answers ``undefined`` (None) and the name is free."""
    report, _q = reporter(node)
    s = node.spawn(Subject, report, host=host)
    node.register("audited", s)
    assert node.whereis("audited") == s
    down = node.monitor(s)
    node.kill(s)
    assert down.wait(10) == (s, "killed")
    assert node.whereis("audited") is None  # released before the DOWN went out
    with pytest.raises(Exit) as raised:
        node.call("audited", ("ping",))
    assert raised.value.reason == "noproc"
    again = node.spawn(Subject, report, host=host)
    node.register("audited", again)
    assert node.call("audited", ("ping",)) == "pong"


@pytest.mark.parametrize("host", PLACES)
def test_an_actor_has_one_registered_name_at_most(node, host):
    """register/2 fails (badarg) when the process already has a name; after
    unregister/1 it may take another."""
    report, _q = reporter(node)
    s = node.spawn(Subject, report, host=host, name="first")
    with pytest.raises(ValueError):
        node.register("second", s)
    assert node.whereis("second") is None
    node.unregister("first")
    assert node.whereis("first") is None
    node.register("second", s)
    assert node.whereis("second") == s
    down = node.monitor(s)
    node.kill(s)
    down.wait(10)
    assert node.registered() == {}


# -- timers ----------------------------------------------------------------------------


@pytest.mark.parametrize("host", PLACES)
def test_cancel_timer_of_a_dead_target_returns_false(node, host):
    """erlang:send_after/3: a timer addressed to a pid is cancelled when that
    process exits, so cancel_timer/1 then returns false; a live target's
    timer gives the time left."""
    report, _q = reporter(node)
    s = node.spawn(Subject, report, host=host)
    live = node.send_after(30, s, "later")
    doomed = node.send_after(30, s, "never")
    left = node.cancel_timer(live)
    assert left is not False and 0 < left <= 30
    down = node.monitor(s)
    node.kill(s)
    down.wait(10)
    assert node.cancel_timer(doomed) is False


# -- sending by name -------------------------------------------------------------------


def test_send_to_a_name_nothing_is_registered_under_fails(node):
    """erlang:send/2: ``Name ! Msg`` fails with badarg when Name is not
    registered (here `Exit` ``noproc``, as a call to it, and a `ValueError`);
    gen_server:cast/2 to it never fails."""
    report, q = reporter(node)
    s = node.spawn(Subject, report, name="present")
    node.send("present", "hello")
    assert q.get(timeout=5) == "hello"
    down = node.monitor(s)
    node.stop(s)
    down.wait(10)
    for send in (node.send, actors.send):
        with pytest.raises(Exit) as raised:
            send("present", "hello")
        assert raised.value.reason == "noproc"
        with pytest.raises(ValueError):
            send("present", "hello")
    node.cast("present", "dropped")
    actors.cast("present", "dropped")


# -- monitors --------------------------------------------------------------------------


def test_demonitor_returns_true_also_when_the_monitor_is_off(node):
    """erlang:demonitor/1 returns true; if the monitoring is already turned
    off (demonitored, or its DOWN delivered), nothing happens."""
    q: queue.Queue[Any] = queue.Queue()
    watcher = node.spawn(Probe, q)
    target = node.spawn(Subject, watcher, host="own")
    mref = watcher.call(("monitor", target))
    assert watcher.call(("demonitor", mref)) is True
    assert watcher.call(("demonitor", mref)) is True
    mref2 = watcher.call(("monitor", target))
    node.kill(target)
    assert q.get(timeout=5) == ("DOWN", mref2, target, "killed")
    assert watcher.call(("demonitor", mref2)) is True
