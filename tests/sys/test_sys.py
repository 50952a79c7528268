"""actors.sys on every behaviour, in the caller's process and in a host process of its own.

OTP's ``sys``: get_state/replace_state, get_status through ``format_status``,
suspend/resume (messages held in order, system requests still answered),
statistics and trace.  Waits are on messages: a `Collector` answers once it
has what the test waits for.
"""

from __future__ import annotations

import logging

import pytest

import actors.sys
import supervision as sv
from actors import CallTimeout
from actors.sys import SysError
from supervision import ChildSpec, SupFlags
from tests.statem.machines import CodeLock, Collector, wait_for
from tests.sys.sys_actors import Vault, add_ten, explode, not_a_dict, unlock_code

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

PLACES = [None, "own"]


@pytest.mark.parametrize("host", PLACES)
def test_a_servers_state_and_status_with_its_secret_hidden(node, host):
    v = node.spawn(Vault, "s3cret", host=host, name="vault")
    v.cast("a")
    assert actors.sys.get_state(v) == {"password": "s3cret", "count": 1, "seen": ["a"]}
    assert actors.sys.get_state("vault") == actors.sys.get_state(v)  # by name too
    status = actors.sys.get_status(v)
    assert status["state"] == {"password": "***", "count": 1, "seen": ["a"]}
    assert status["behaviour"] == "gen_server" and status["module"] == "tests.sys.sys_actors.Vault"
    assert status["ref"] == v and status["name"] == "vault" and status["suspended"] is False


@pytest.mark.parametrize("host", PLACES)
def test_replace_state_of_a_server_and_its_refusals(node, host):
    v = node.spawn(Vault, "pw", host=host)
    v.cast("a")
    assert actors.sys.replace_state(v, add_ten)["count"] == 11
    assert v.call("x") == ("x", 11)
    with pytest.raises(SysError, match="dict"):
        actors.sys.replace_state(v, not_a_dict)
    with pytest.raises(SysError, match="no thanks"):
        actors.sys.replace_state(v, explode)
    assert actors.sys.get_state(v)["count"] == 11  # unchanged by the refusals
    assert v.call("x") == ("x", 11)


@pytest.mark.parametrize("host", PLACES)
def test_a_state_machines_state_data_and_replace(node, host):
    lock = node.spawn(CodeLock, [1, 2], 30.0, host=host)
    state, data = actors.sys.get_state(lock)
    assert state == "locked" and data["code"] == [1, 2] and data["buttons"] == []
    new_state, new_data = actors.sys.replace_state(lock, unlock_code)
    assert new_state == "open" and new_data["code"] == [7]
    assert lock.call("state") == "open"  # no enter call: no state timeout was set
    status = actors.sys.get_status(lock)
    assert status["behaviour"] == "gen_statem" and status["state"] == "open" and status["timeouts"] == []
    lock.cast(("button", 1))  # postponed while open
    assert actors.sys.get_status(lock)["postponed"] == [("cast", ("button", 1))]


def test_a_supervisor_shows_its_children_and_refuses_replace_state(node):
    sup = sv.start_supervisor(node, SupFlags(), [ChildSpec("v", (Vault, ("pw",)), host="own")])
    state = actors.sys.get_state(sup)
    assert [c.id for c in state["children"]] == ["v"]
    with pytest.raises(SysError, match="supervisor's state cannot be replaced"):
        actors.sys.replace_state(sup, lambda s: s)
    assert actors.sys.get_status(sup)["behaviour"] == "supervisor"
    child = sv.which_children(sup)[0].child
    assert actors.sys.get_state(child)["password"] == "pw"


@pytest.mark.parametrize("host", PLACES)
def test_suspend_holds_messages_in_order_and_answers_system_requests(node, host):
    v = node.spawn(Vault, "pw", host=host)
    actors.sys.suspend(v)
    for i in range(50):
        v.cast(i)
    with pytest.raises(CallTimeout):  # a user call waits, as for a busy server
        v.call("seen", timeout=0.3)
    assert actors.sys.get_state(v)["count"] == 0  # system requests are answered meanwhile
    status = actors.sys.get_status(v)
    assert status["suspended"] is True and status["held"] == 51
    actors.sys.resume(v)
    assert v.call("seen") == list(range(50))
    assert actors.sys.get_status(v)["suspended"] is False
    actors.sys.resume(v)  # resuming a running process changes nothing


@pytest.mark.parametrize("host", PLACES)
def test_a_suspended_state_machine_keeps_its_timer_for_after_resume(node, host):
    report = node.spawn(Collector)
    lock = node.spawn(CodeLock, [1], 0.05, report, host=host)
    lock.cast(("button", 1))
    assert wait_for(report, 2)[1] == ("entered", "open")
    actors.sys.suspend(lock)
    lock.cast(("button", 1))  # held, then postponed once it is handled
    actors.sys.resume(lock)
    # The state timeout locks it, and the held button, postponed, opens it again.
    assert wait_for(report, 4)[2:] == [("entered", "locked"), ("entered", "open")]


@pytest.mark.parametrize("host", PLACES)
def test_statistics(node, host):
    v = node.spawn(Vault, "pw", host=host)
    assert actors.sys.statistics(v) is None
    actors.sys.statistics(v, True)
    for i in range(3):
        v.cast(i)
    v.call("x")
    v.call("later")  # a deferred reply counts as a message out too
    stats = actors.sys.statistics(v, "get")
    assert stats["messages_in"] == 5 and stats["messages_out"] == 2
    assert stats["reductions"] >= 5 and stats["cpu_seconds"] >= 0
    assert stats["start_time"] <= stats["current_time"]
    actors.sys.statistics(v, False)
    assert actors.sys.statistics(v) is None
    with pytest.raises(SysError):
        actors.sys.statistics(v, "sometimes")


@pytest.mark.parametrize("host", PLACES)
def test_trace_shows_a_call_and_its_reply_in_order(node, host):
    sink = node.spawn(Collector)
    v = node.spawn(Vault, "pw", host=host)
    actors.sys.trace(v, sink)
    v.cast("c")
    assert v.call("q") == ("q", 1)
    got = wait_for(sink, 3)
    assert [t[0] for t in got] == ["trace"] * 3 and all(t[1] == v for t in got)
    events = [t[2] for t in got]
    assert events[0] == ("in", "cast", "c")
    assert events[1][:3] == ("in", "call", "q") and events[2][:2] == ("out", ("q", 1))
    assert events[1][3] == events[2][2]  # the reply goes to that call's caller
    actors.sys.trace(v, False)
    v.call("untraced")
    sink.send("marker")
    assert wait_for(sink, 4)[3] == "marker"


@pytest.mark.parametrize("host", PLACES)
def test_trace_of_a_state_machine_shows_its_transitions(node, host):
    sink = node.spawn(Collector)
    lock = node.spawn(CodeLock, [5], 30.0, host=host)
    actors.sys.trace(lock, sink)
    lock.cast(("button", 5))
    events = [t[2] for t in wait_for(sink, 3)]
    assert events == [
        ("in", "cast", ("button", 5)),
        ("enter", "locked", "open"),
        ("consume", "cast", ("button", 5), "locked", "open"),
    ]


def test_trace_to_the_log_and_to_a_function(node, caplog):
    v = node.spawn(Vault, "pw")
    seen = []
    actors.sys.trace(v, lambda who, event: seen.append((who, event)))
    v.cast("x")
    v.call("y")
    assert [e[0] for _, e in seen] == ["in", "in", "out"] and seen[0][0] == v
    with caplog.at_level(logging.INFO, logger="actors.sys"):
        actors.sys.trace(v, True)
        v.call("logged")
    assert any("'in', 'call', 'logged'" in r.getMessage() for r in caplog.records)
