"""A monitor of an actor whose process is alive but stopped: no crash, and the DOWN still comes.

A server that monitors what it sends work to (IOQ monitors each file it
reads from) must not crash because one host is stalled: Erlang's
``monitor/2`` never fails for a live process.
"""

from __future__ import annotations

import os
import queue
import signal

import pytest

from actors._core.cell import gen_server
from tests.kernel.probes import Echo, Probe

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def short_ack(monkeypatch):
    monkeypatch.setattr(gen_server, "MONITOR_ACK_WAIT", 1.0)


def _stopped(node):
    q: queue.Queue = queue.Queue()
    watcher = node.spawn(Probe, q)
    target = node.spawn(Echo, host="own")
    os.kill(target.os_pid, signal.SIGSTOP)
    return watcher, target, q


def test_a_monitor_of_a_stopped_process_returns_and_takes_effect_when_it_resumes(node, short_ack):
    watcher, target, q = _stopped(node)
    try:
        mref = watcher.call(("monitor", target), timeout=30)
    finally:
        os.kill(target.os_pid, signal.SIGCONT)
    node.exit(target, "boom")
    assert q.get(timeout=10) == ("DOWN", tuple(mref), target, "boom")
    assert watcher.call(("trap", False)) == "ok"  # the watcher is alive and well


def test_a_monitor_of_a_stopped_process_gets_down_when_the_process_is_killed(node, short_ack):
    watcher, target, q = _stopped(node)
    mref = watcher.call(("monitor", target), timeout=30)
    os.kill(target.os_pid, signal.SIGKILL)
    kind, got_mref, got_target, _reason = q.get(timeout=10)
    assert (kind, got_mref, got_target) == ("DOWN", tuple(mref), target)
