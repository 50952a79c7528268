"""GenStatem in real processes: host processes of their own, supervised, killed and restarted.

Every wait is on a message (a `Collector` answers once it has what the test
waits for) or on a supervisor's answer; the timers are the kernel's.
"""

from __future__ import annotations

import os
import signal

import pytest

import supervision as sv
from actors import Crash, Exit, GenStatem, SpawnError
from actors.gen_statem import EventTimeout, GenericTimeout, NextEvent, StateTimeout
from supervision import ChildSpec, SupFlags
from tests.polling import poll_until
from tests.statem.machines import BadEnter, CodeLock, Collector, Stopper, Timers, wait_for

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

PLACES = [None, "own"]


def press(lock, digits):
    for d in digits:
        lock.cast(("button", d))


@pytest.mark.parametrize("host", PLACES)
def test_code_lock_opens_relocks_and_replays_postponed_buttons(node, host):
    report = node.spawn(Collector)
    lock = node.spawn(CodeLock, [1, 2, 3], 0.2, report, host=host)
    assert lock.call("code_length") == 3
    press(lock, [9, 1, 2, 3])
    assert wait_for(report, 2) == [("entered", "locked"), ("entered", "open")]
    # Pressed while open: postponed, then pressed again in order once it has locked by its state timeout.
    press(lock, [1, 2, 3])
    assert wait_for(report, 4)[2:] == [("entered", "locked"), ("entered", "open")]
    assert wait_for(report, 5)[4] == ("entered", "locked")
    assert lock.call("state") == "locked"


def test_code_lock_under_a_supervisor_killed_and_restarted(node):
    report = node.spawn(Collector)
    spec = ChildSpec("lock", (CodeLock, ([4, 2], 30.0, report)), host="own")
    sup = sv.start_supervisor(node, SupFlags(intensity=5), [spec])
    first = sv.which_children(sup)[0].child
    press(first, [4, 2])
    assert wait_for(report, 2)[1] == ("entered", "open")
    os.kill(first.os_pid, signal.SIGKILL)

    def restarted():
        ref = sv.which_children(sup)[0].child
        return ref if ref is not None and not isinstance(ref, str) and ref != first else None

    second = poll_until(restarted, "the lock's restart")
    assert wait_for(report, 3)[2] == ("entered", "locked")  # a new machine, in its first state
    assert second.call("state") == "locked"
    assert second.os_pid != first.os_pid
    with pytest.raises(Exit) as info:
        second.call("crash")
    assert isinstance(info.value.reason, Crash) and info.value.reason.message == "asked to crash"
    third = poll_until(lambda: (r := restarted()) and r != second and r, "a restart after the crash")
    assert third.call("state") == "locked"


@pytest.mark.parametrize("host", PLACES)
def test_event_timeout_is_cancelled_by_an_arriving_event(node, host):
    report = node.spawn(Collector)
    m = node.spawn(Timers, report, host=host)
    m.cast(("do", EventTimeout(0.3, "cancelled"), GenericTimeout("clock", 0.6, "clock")))
    m.cast("any event")  # cancels the event timeout
    m.cast(("do", EventTimeout(0.05, "fired")))
    got = wait_for(report, 3)
    assert got == [(0, "cast", "any event"), (0, "timeout", "fired"), (0, ("timeout", "clock"), "clock")]


@pytest.mark.parametrize("host", PLACES)
def test_state_timeouts_restarted_fire_once_and_a_change_of_state_cancels_them(node, host):
    report = node.spawn(Collector)
    m = node.spawn(Timers, report, host=host)
    for i in range(20):  # each restart leaves a stale timer behind: only the last may fire
        m.cast(("do", StateTimeout(0.05 + i * 0.001, i)))
    m.cast(("do", GenericTimeout("clock", 0.5, "clock")))
    assert wait_for(report, 2) == [(0, "state_timeout", 19), (0, ("timeout", "clock"), "clock")]
    m.cast(("do", StateTimeout(0.1, "cancelled")))
    m.cast(("goto", 1, GenericTimeout("clock", 0.4, "clock 2")))
    assert wait_for(report, 3)[2] == (1, ("timeout", "clock"), "clock 2")
    m.cast(("do", StateTimeout(0, "zero"), NextEvent("internal", "first")))
    assert wait_for(report, 5)[3:] == [(1, "internal", "first"), (1, "state_timeout", "zero")]
    assert m.call("state?") == 1


@pytest.mark.parametrize("host", PLACES)
def test_stop_and_stop_and_reply_run_terminate(node, host):
    report = node.spawn(Collector)
    m = node.spawn(Stopper, report, host=host)
    assert m.call("state") == "booted"  # init's next_event ran before the call
    mon = node.monitor(m)
    assert m.call("stop_and_reply") == "bye"
    assert mon.wait(10) == (m, ("shutdown", "asked"))
    assert wait_for(report, 1) == [("terminate", ("shutdown", "asked"), "booted")]
    m2 = node.spawn(Stopper, report, host=host)
    mon2 = node.monitor(m2)
    with pytest.raises(Exit) as info:
        m2.call("stop")
    assert info.value.reason == "asked"
    assert mon2.wait(10) == (m2, "asked")
    m3 = node.spawn(Stopper, report, host=host)
    mon3 = node.monitor(m3)
    m3.cast("idle")  # an event timeout that stops it
    assert mon3.wait(10) == (m3, ("shutdown", "idle"))


@pytest.mark.parametrize("host", PLACES)
def test_an_enter_call_that_changes_the_state_crashes_the_machine(node, host):
    m = node.spawn(BadEnter, host=host)
    mon = node.monitor(m)
    m.cast("go")
    ref, reason = mon.wait(10)
    assert isinstance(reason, Crash) and reason.exc_type == "StatemError"
    assert reason.message.startswith("bad_state_enter_return_from_state_function")


class NoState(GenStatem):
    def init(self):
        return "nosuch"


class Forgot(GenStatem):
    def init(self):
        self.x = 1


@pytest.mark.parametrize("cls,tag", [(NoState, "undef_state_function"), (Forgot, "bad_return_from_init")])
def test_a_bad_first_state_fails_the_spawn(node, cls, tag):
    with pytest.raises(SpawnError) as info:
        node.spawn(cls)
    assert tag in str(info.value.reason)
