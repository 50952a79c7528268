"""gen_server semantics: calls, casts, infos, init results, stop and terminate."""

from __future__ import annotations

import queue
import time

import pytest

from actors import ActorRef, AlreadyRegistered, CallTimeout, Crash, Exit, SpawnError
from tests.kernel.probes import ContinueOrder, Echo, FailingInit, Ignoring, Terminating, held_call_reasons

pytestmark = pytest.mark.timeout(30)

PLACES = [None, "own"]


@pytest.mark.parametrize("host", PLACES)
def test_call_cast_send(node, host):
    ref = node.spawn(Echo, host=host)
    assert ref.call(("x", 1)) == ("x", 1)
    ref.cast("c")
    ref.send("i")
    assert ref.call("seen") == [("cast", "c"), "i"]


def test_issue_example(node):
    from actors import GenServer

    class Counter(GenServer):
        def init(self, start=0):
            self.n = start

        def handle_call(self, request, from_):
            self.n += request
            return self.n

    c = node.spawn(Counter, 5, name="counter", host="own", cpus={0})
    assert c.call(1, timeout=5.0) == 6
    assert node.whereis("counter") == c


@pytest.mark.parametrize("host", PLACES)
def test_call_to_dead_target_fails_at_once_with_noproc(node, host):
    ref = node.spawn(Echo, host=host)
    mon = node.monitor(ref)
    node.stop(ref)
    mon.wait(5)
    t0 = time.monotonic()
    with pytest.raises(Exit) as info:
        ref.call("hello", timeout=10)
    assert info.value.reason == "noproc"
    assert time.monotonic() - t0 < 2.0


def test_call_to_unregistered_name_fails_with_noproc(node):
    with pytest.raises(Exit) as info:
        node.call("nobody", "hello", timeout=10)
    assert info.value.reason == "noproc"


@pytest.mark.parametrize("host", PLACES)
def test_call_fails_with_exact_reason_when_target_is_killed(node, host):
    ref = node.spawn(Echo, host=host)
    assert held_call_reasons(ref, lambda: node.kill(ref)) == ["killed"]


@pytest.mark.parametrize("host", PLACES)
def test_call_fails_with_crash_reason(node, host):
    ref = node.spawn(Echo, host=host)
    with pytest.raises(Exit) as info:
        ref.call("crash")
    reason = info.value.reason
    assert isinstance(reason, Crash)
    assert reason.exc_type == "ValueError" and reason.message == "boom"
    assert "Traceback" in reason.traceback


@pytest.mark.parametrize("host", PLACES)
def test_call_fails_with_normal_when_server_stops_normally(node, host):
    ref = node.spawn(Echo, host=host)
    assert held_call_reasons(ref, lambda: node.stop(ref, "normal")) == ["normal"]


@pytest.mark.parametrize("host", PLACES)
def test_timeout_keeps_server_and_drops_late_reply(node, host):
    ref = node.spawn(Echo, host=host)
    with pytest.raises(CallTimeout):
        ref.call("hold", timeout=0.2)
    assert ref.call("release") == "released"  # the late reply goes out now
    assert ref.call("after") == "after"  # and never reaches a later call
    assert ref.call("seen") == []


@pytest.mark.parametrize("host", PLACES)
def test_cast_and_send_to_dead_target_do_not_fail(node, host):
    ref = node.spawn(Echo, host=host)
    node.stop(ref)
    ref.cast("x")
    ref.send("y")
    with pytest.raises(Exit) as info:
        node.stop(ref)
    assert info.value.reason == "noproc"


def test_calling_self_fails_at_once(node):
    from actors import GenServer

    class SelfCaller(GenServer):
        def handle_call(self, request, from_):
            try:
                self.ref.call("again", timeout=30)
            except Exit as exc:
                return exc.reason
            return "no error"

    ref = node.spawn(SelfCaller)
    t0 = time.monotonic()
    assert ref.call("go", timeout=10) == "calling_self"
    assert time.monotonic() - t0 < 2


def test_unexpected_info_is_dropped(node, caplog):
    from actors import GenServer

    class Plain(GenServer):
        def handle_call(self, request, from_):
            return "alive"

    ref = node.spawn(Plain)
    ref.send("who knows")
    assert ref.call("still?") == "alive"
    assert any("unexpected message" in r.getMessage() for r in caplog.records)


def test_continue_runs_before_queued_messages(node):
    ref = node.spawn(ContinueOrder)
    assert ref.call("order") == ["continue:first", "info:queued-before-continue"]


@pytest.mark.parametrize("host", PLACES)
def test_init_ignore_returns_none(node, host):
    assert node.spawn(Ignoring, host=host) is None


@pytest.mark.parametrize("host", PLACES)
def test_init_exception_makes_spawn_raise(node, host):
    with pytest.raises(SpawnError) as info:
        node.spawn(FailingInit, host=host)
    assert isinstance(info.value.reason, Crash)
    assert info.value.reason.exc_type == "KeyError"


@pytest.mark.parametrize("host", PLACES)
def test_name_taken_raises(node, host):
    first = node.spawn(Echo, name="svc", host=host)
    with pytest.raises(AlreadyRegistered) as info:
        node.spawn(Echo, name="svc", host=host)
    assert info.value.holder == first
    assert node.whereis("svc") == first


def test_name_is_released_on_death(node):
    ref = node.spawn(Echo, name="svc", host="own")
    mon = node.monitor(ref)
    node.kill(ref)
    mon.wait(5)
    assert node.whereis("svc") is None
    again = node.spawn(Echo, name="svc", host="own")
    assert again != ref and node.whereis("svc") == again


def test_stop_with_reply_runs_terminate_first(node):
    q: queue.Queue = queue.Queue()
    ref = node.spawn(Terminating, q)
    assert ref.call("stop_with_reply") == "bye"
    assert q.get_nowait() == ("terminated", "normal")


def test_self_stop_in_handle_call_runs_terminate_before_reply(node):
    q: queue.Queue = queue.Queue()
    ref = node.spawn(Terminating, q)
    assert ref.call("stop_self") == "stopping"
    assert q.get_nowait() == ("terminated", "normal")


def test_terminate_runs_on_crash(node):
    q: queue.Queue = queue.Queue()
    ref = node.spawn(Terminating, q)
    with pytest.raises(Exit):
        ref.call("crash")
    kind, reason = q.get(timeout=5)
    assert kind == "terminated" and reason.exc_type == "RuntimeError"


def test_terminate_runs_on_stop(node):
    q: queue.Queue = queue.Queue()
    ref = node.spawn(Terminating, q)
    node.stop(ref, "shutdown")
    assert q.get_nowait() == ("terminated", "shutdown")


def _down_without_terminate(node, trap: bool, end) -> tuple:
    """Spawn a `Terminating` (trapping exits or not), ``end(ref)`` it and
    return its DOWN ``(ref, reason)``; its terminate must not have run."""
    q: queue.Queue = queue.Queue()
    ref = node.spawn(Terminating, q, trap)
    mon = node.monitor(ref)
    end(ref)
    down = mon.wait(5)
    assert q.empty()
    return ref, down


def test_terminate_does_not_run_on_kill(node):
    ref, down = _down_without_terminate(node, True, node.kill)
    assert down == (ref, "killed")


def test_terminate_does_not_run_on_exit_signal_when_not_trapping(node):
    ref, down = _down_without_terminate(node, False, lambda r: node.exit(r, "because"))
    assert down == (ref, "because")


def test_exit_signal_to_trapping_actor_becomes_message(node):
    q: queue.Queue = queue.Queue()
    ref = node.spawn(Terminating, q, True)
    node.exit(ref, "because")
    assert q.get(timeout=5) == ("info", ("EXIT", None, "because"))
    assert ref.call("alive?") == "alive?"


def test_exit_kill_is_untrappable(node):
    ref, down = _down_without_terminate(node, True, lambda r: node.exit(r, "kill"))
    assert down == (ref, "killed")


def test_refs_are_picklable_equal_and_never_reused(node):
    import pickle

    ref = node.spawn(Echo, host="own")
    copy = pickle.loads(pickle.dumps(ref))
    assert copy == ref and hash(copy) == hash(ref)
    assert copy.call("hi") == "hi"
    assert isinstance(copy, ActorRef) and copy.os_pid == ref.os_pid
    node.stop(ref)
    again = node.spawn(Echo, host="own")
    assert again != ref and again.id != ref.id
    assert again.os_pid != ref.os_pid
