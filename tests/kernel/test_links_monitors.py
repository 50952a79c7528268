"""Links, monitors, exit trapping and host death, across processes."""

from __future__ import annotations

import os
import queue
import signal

import pytest

from actors import Exit
from tests.kernel.probes import Echo, Probe, held_call_reasons

pytestmark = pytest.mark.timeout(30)

PLACES = [None, "own"]


def probe(node, trap=False):
    q: queue.Queue = queue.Queue()
    return node.spawn(Probe, q, trap), q


@pytest.mark.parametrize("host", PLACES)
@pytest.mark.parametrize("dying", ["linked_to", "linker"])
def test_abnormal_exit_kills_linked_non_trapping_actor_with_same_reason(node, host, dying):
    """Either end's abnormal exit kills the other: links are two-way."""
    a = node.spawn(Echo, host=host)
    b = node.spawn(Echo, host="own")
    assert b.call(("link", a)) == "ok"
    dead, other = (a, b) if dying == "linked_to" else (b, a)
    mon = node.monitor(other)
    node.exit(dead, "boom")
    assert mon.wait(5) == (other, "boom")


@pytest.mark.parametrize("host", PLACES)
def test_normal_exit_signal_is_ignored_unless_trapping(node, host):
    a = node.spawn(Echo, host=host)
    p, q = probe(node)
    assert p.call(("link", a)) == "ok"
    node.stop(a, "normal")
    assert p.call(("trap", False)) == "ok"  # still alive
    t, qt = probe(node, trap=True)
    c = node.spawn(Echo, host=host)
    assert t.call(("link", c)) == "ok"
    node.stop(c, "normal")
    assert qt.get(timeout=5) == ("EXIT", c, "normal")


@pytest.mark.parametrize("host", PLACES)
def test_trapping_turns_exit_signals_into_messages(node, host):
    p, q = probe(node, trap=True)
    a = node.spawn(Echo, host=host)
    assert p.call(("link", a)) == "ok"
    node.kill(a)
    assert q.get(timeout=5) == ("EXIT", a, "killed")
    assert p.call(("trap", True)) == "ok"


@pytest.mark.parametrize("host", PLACES)
def test_link_to_dead_actor_gives_noproc(node, host):
    a = node.spawn(Echo, host=host)
    node.stop(a)
    p, q = probe(node)
    assert p.call(("link", a)) == ("raised", "noproc")
    t, qt = probe(node, trap=True)
    assert t.call(("link", a)) == "ok"
    assert qt.get(timeout=5) == ("EXIT", a, "noproc")


@pytest.mark.parametrize("host", PLACES)
def test_monitors_are_one_way_and_stackable(node, host):
    a = node.spawn(Echo, host=host)
    p, q = probe(node)
    m1 = p.call(("monitor", a))
    m2 = p.call(("monitor", a))
    assert m1 != m2
    node.exit(a, "gone")
    got = {q.get(timeout=5), q.get(timeout=5)}
    assert got == {("DOWN", m1, a, "gone"), ("DOWN", m2, a, "gone")}
    assert p.call(("trap", False)) == "ok"  # the watcher is unaffected


@pytest.mark.parametrize("host", PLACES)
def test_monitor_on_dead_actor_delivers_noproc(node, host):
    a = node.spawn(Echo, host=host)
    node.stop(a)
    p, q = probe(node)
    m = p.call(("monitor", a))
    assert q.get(timeout=5) == ("DOWN", m, a, "noproc")
    assert node.monitor(a).wait(5) == (a, "noproc")


@pytest.mark.parametrize("host", PLACES)
def test_a_monitor_that_does_not_wait_still_delivers_its_down(node, host):
    """``monitor(ref, wait=False)`` returns before the target's process answers; the DOWN comes all
    the same, with the exit reason for a live target and ``noproc`` for one already dead."""
    a = node.spawn(Echo, host=host)
    p, q = probe(node, trap=True)
    m = p.call(("monitor_nowait", a))
    # a link from the same actor afterwards reaches a's process after the monitor request: once
    # it is acknowledged, the monitor is in place
    assert p.call(("link", a)) == "ok"
    node.exit(a, "gone")
    assert {q.get(timeout=5), q.get(timeout=5)} == {("DOWN", m, a, "gone"), ("EXIT", a, "gone")}
    m2 = p.call(("monitor_nowait", a))
    assert q.get(timeout=5) == ("DOWN", m2, a, "noproc")


def test_demonitor_discards_the_down(node):
    a = node.spawn(Echo, host="own")
    p, q = probe(node)
    m = p.call(("monitor", a))
    assert p.call(("demonitor", m)) is True
    m2 = p.call(("monitor", a))
    node.kill(a)
    assert q.get(timeout=5) == ("DOWN", m2, a, "killed")
    assert q.empty()


def test_sigkill_of_host_delivers_down_and_exit_for_every_actor_there(node):
    a = node.spawn(Echo, host="shared")
    b = node.spawn(Echo, host="shared")
    assert a.os_pid == b.os_pid
    p, q = probe(node, trap=True)
    assert p.call(("link", a)) == "ok"
    mb = p.call(("monitor", b))
    mon_a = node.monitor(a)
    os.kill(a.os_pid, signal.SIGKILL)
    assert mon_a.wait(5) == (a, "killed")
    got = {q.get(timeout=5), q.get(timeout=5)}
    assert got == {("EXIT", a, "killed"), ("DOWN", mb, b, "killed")}


def test_sigkill_fails_pending_calls(node):
    a = node.spawn(Echo, host="own")
    assert held_call_reasons(a, lambda: os.kill(a.os_pid, signal.SIGKILL)) == ["killed"]
    with pytest.raises(Exit) as info:
        a.call("again")
    assert info.value.reason == "noproc"


def test_cross_host_links_and_monitors(node):
    a = node.spawn(Echo, host="one")
    b = node.spawn(Echo, host="two")
    assert a.os_pid != b.os_pid
    m = a.call(("monitor", b))
    assert a.call(("trap", True)) == "ok"
    assert a.call(("link", b)) == "ok"
    os.kill(b.os_pid, signal.SIGKILL)
    seen = None
    for _ in range(100):
        seen = a.call("seen")
        if len(seen) == 2:
            break
        node.monitor(b).wait(5)
    assert set(map(tuple, seen)) == {("DOWN", m, b, "killed"), ("EXIT", b, "killed")}


def test_spawn_link_child_in_other_host(node):
    p, q = probe(node, trap=True)
    child = p.call(("spawn_link_on", Echo, "own"))
    assert child.os_pid != os.getpid()
    node.exit(child, "bye")
    assert q.get(timeout=5) == ("EXIT", child, "bye")


def test_exit_from_parent_runs_terminate_when_trapping(node):
    from tests.kernel.probes import Terminating

    q: queue.Queue = queue.Queue()
    parent, pq = probe(node, trap=True)
    parent.call(("spawn_link", Terminating, q, True))
    # the parent exits abnormally: the trapping child terminates (not a message)
    node.exit(parent, "kill")
    assert q.get(timeout=5) == ("terminated", "killed")
