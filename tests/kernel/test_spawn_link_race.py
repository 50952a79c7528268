"""A spawn_link child whose host dies before the spawn reply still signals its parent."""

from __future__ import annotations

import queue

import pytest

from actors._core.cell.spawn import record_child_link
from actors._core.wire.ref import ActorRef
from tests.kernel.probes import Probe

pytestmark = pytest.mark.timeout(30)


def test_link_recorded_after_the_childs_process_died_still_delivers_exit(node):
    # The race, replayed deterministically: the node reported the child's host
    # dead before the parent got the spawn reply and recorded its half of the link.
    q: queue.Queue = queue.Queue()
    parent = node.spawn(Probe, q, True)
    cell = node.runtime.cells[parent.id]
    child = ActorRef(node.id, "h999", "h999.1", 999999)
    node.runtime.proc_down("h999", "killed")
    record_child_link(node.runtime, cell, child)
    assert q.get(timeout=5) == ("EXIT", child, "killed")
    assert child not in cell.links


def test_link_to_a_live_child_is_just_recorded(node):
    q: queue.Queue = queue.Queue()
    parent = node.spawn(Probe, q, True)
    cell = node.runtime.cells[parent.id]
    child = node.spawn(Probe, queue.Queue())
    record_child_link(node.runtime, cell, child)
    assert cell.links[child] == child
    assert q.empty()


def test_link_recorded_after_the_parent_died_signals_the_child(node):
    q: queue.Queue = queue.Queue()
    parent = node.spawn(Probe, q)
    child = node.spawn(Probe, queue.Queue())
    cell = node.runtime.cells[parent.id]
    mon = node.monitor(child)
    node.kill(parent)
    record_child_link(node.runtime, cell, child)  # the spawn replied after the kill
    assert mon.wait(5) == (child, "killed")
