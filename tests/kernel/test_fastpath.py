"""The fast path keeps the kernel's ordering rules.

Replies travel on the calling thread's own channel and casts are batched on
the wire; whatever actor B sends to actor A must still reach A's callbacks in
the order B sent it, and garbage on the new sockets is dropped and counted.
"""

from __future__ import annotations

import glob
import os
import queue
import threading
import time
from typing import Any

import pytest
import zmq

from actors import CallTimeout
from actors._core.runtime.runtime import CAST_BATCH
from actors._core.wire import system as sysop
from tests.kernel.probes import Echo, Probe, Scripted, held_call_reasons

pytestmark = pytest.mark.timeout(60)


def _dropped(node: Any) -> int:
    """Frames dropped so far across the node (the test process's own counter
    lives as long as the process, so tests compare before and after)."""
    return node.stats()["counters"].get("actors.transport.dropped_frames", 0)


def _next_seen(q: "queue.Queue[Any]", timeout: float = 10.0) -> Any:
    message = q.get(timeout=timeout)
    assert message[0] == "seen", message
    return message[1]


def _seen_until(ref: Any, predicate: Any, timeout: float = 10.0) -> list[Any]:
    """Ask an `Echo` what it saw until ``predicate(seen)`` holds (bounded)."""
    deadline = time.monotonic() + timeout
    for _ in range(100_000):
        seen = ref.call("seen")
        if predicate(seen) or time.monotonic() > deadline:
            return seen
    return ref.call("seen")


@pytest.mark.parametrize("trap", [True, False])
def test_reply_is_not_overtaken_by_the_exit_signal_sent_after_it(node, trap):
    q: "queue.Queue[Any]" = queue.Queue()
    report = node.spawn(Probe, q)
    b = node.spawn(Scripted, host="own")
    a = node.spawn(Scripted, report, trap, host="own")
    down = node.monitor(a)
    a.cast([("link", b)])
    a.cast([("call", b, [("reply_then", "crash")])])
    if trap:
        assert _next_seen(q) == ("reply", "the reply")
        exit_message = _next_seen(q)
        assert exit_message[0] == "EXIT" and exit_message[1] == b
        assert exit_message[2].exc_type == "RuntimeError"
        return
    # Not trapping, a dies of b's exit signal.  As in OTP, it may die before
    # its code runs past the call (the signal is handled whenever it lands),
    # so its report is not guaranteed -- but the call never ended in an error
    # in place of the reply, which is what an overtaking exit would cause.
    reason = down.wait(10)[1]
    assert getattr(reason, "exc_type", None) == "RuntimeError"
    while not q.empty():
        assert q.get_nowait() == ("seen", ("reply", "the reply"))


def test_reply_comes_before_a_message_sent_after_it(node):
    q: "queue.Queue[Any]" = queue.Queue()
    report = node.spawn(Probe, q)
    b = node.spawn(Scripted, host="own")
    a = node.spawn(Scripted, report, host="own")
    a.cast([("call", b, [("reply_then", ("send", a, "after the reply"))])])
    assert _next_seen(q) == ("reply", "the reply")
    assert _next_seen(q) == "after the reply"


def test_reply_then_normal_stop_reaches_a_caller_in_the_host_program(node):
    b = node.spawn(Scripted, host="own")
    monitor = node.monitor(b)
    assert b.call([("reply_then", "exit")]) == "the reply"
    assert monitor.wait(10)[1] == "bye"


@pytest.mark.parametrize("count", [3, CAST_BATCH * 3 + 5])
def test_cast_batches_then_a_call_arrive_in_order(node, count):
    b = node.spawn(Echo, host="own")
    q: "queue.Queue[Any]" = queue.Queue()
    report = node.spawn(Probe, q)
    a = node.spawn(Scripted, report, host="own")
    # plain and pickled payloads mixed, so batches of both encodings go out
    payloads = [i if i % 3 else ("tuple", i) for i in range(count)]
    a.cast([("cast", b, p) for p in payloads] + [("call", b, "seen")])
    outcome = _next_seen(q)
    assert outcome == ("reply", [("cast", p) for p in payloads])


def test_sends_then_a_call_from_the_host_program_arrive_in_order(node):
    b = node.spawn(Echo, host="own")
    for i in range(CAST_BATCH + 1):
        b.send(i)
    assert b.call("seen") == list(range(CAST_BATCH + 1))


def test_batch_interrupted_by_the_senders_crash_arrives_before_its_exit_signal(node):
    b = node.spawn(Echo, host="own")
    a = node.spawn(Scripted, host="own")
    assert b.call(("trap", True)) == "ok"
    assert b.call(("link", a)) == "ok"
    a.cast([("cast", b, i) for i in range(10)] + [("crash",)])
    seen = _seen_until(b, lambda s: any(isinstance(m, tuple) and m[0] == "EXIT" for m in s))
    assert seen[:10] == [("cast", i) for i in range(10)]
    assert len(seen) == 11 and seen[10][0] == "EXIT" and seen[10][1] == a


def test_a_batch_goes_out_while_its_callback_is_still_running(node):
    """A callback that blocks outside the kernel does not hold its casts back."""
    b = node.spawn(Echo, host="own")
    release = threading.Event()
    a = node.spawn(Scripted)  # in this process, so it can wait on an Event
    a.cast([("send", b, "progress"), ("wait", release)])
    try:
        seen = _seen_until(b, lambda s: "progress" in s)
        assert seen == ["progress"]
    finally:
        release.set()


def test_call_timeout_then_the_late_reply_is_dropped(node):
    b = node.spawn(Echo, host="own")
    with pytest.raises(CallTimeout):
        b.call("hold", timeout=0.1)
    assert b.call("release") == "released"  # sends the late reply to this thread's channel
    assert b.call("ping") == "ping"  # the late reply is not taken for this answer


def test_garbage_on_reply_channels_is_dropped_and_counted(node):
    b = node.spawn(Echo, host="own")
    assert b.call("ping") == "ping"  # this thread now has a reply channel
    q: "queue.Queue[Any]" = queue.Queue()
    report = node.spawn(Probe, q)
    a2 = node.spawn(Scripted, report, host="caller")
    a2.cast([("call", b, "ping")])  # so has a2's thread, in another host
    assert _next_seen(q) == ("reply", "ping")
    before = _dropped(node)
    channels = glob.glob(os.path.join(node.rundir, "*~r*.sock"))
    owners = {os.path.basename(c).partition("~")[0] for c in channels}
    assert node.runtime.proc in owners and a2.proc in owners
    ctx = zmq.Context()
    try:
        for path in channels:
            s = ctx.socket(zmq.PUSH)
            s.connect(f"ipc://{path}")
            s.send(b"not json")
            s.send(b"J[3,null,null]")
            s.close(linger=1000)
    finally:
        ctx.term()
    # The owners read their channels on their next calls and live on.  A
    # garbage frame may still be on its way when a reply lands, and is then
    # read by a later call: call until all are counted (bounded).
    deadline = time.monotonic() + 10
    for _ in range(1000):
        assert b.call("ping") == "ping"
        a2.cast([("call", b, "ping")])
        assert _next_seen(q) == ("reply", "ping")
        if _dropped(node) - before >= 2 * len(channels) or time.monotonic() > deadline:
            break
    assert _dropped(node) - before == 2 * len(channels)


def test_garbage_batches_are_dropped_and_counted(node):
    b = node.spawn(Echo, host="own")

    def dropped_in_b() -> int:  # b's own process only
        snapshot = node.runtime.sys_request(b.proc, sysop.Stats())
        return snapshot["counters"].get("actors.transport.dropped_frames", 0)

    before = dropped_in_b()
    ctx = zmq.Context()
    try:
        s = ctx.socket(zmq.PUSH)
        s.connect(node.runtime.endpoint_of(b.proc))
        s.send(b'J[13,null,null,null,"x",5]')
        s.send(b'J[13,null,null,null,"x",[[1]]]')
        s.send(b'J[13,null,null,null,"x",[[1,"nobody","hi"]]]')  # well-formed, to no one
        s.close(linger=1000)
    finally:
        ctx.term()
    # The garbage came on a connection of its own, so nothing orders it before
    # a call on the node's connection: wait for b to have read it (each round
    # trip is a chance for b's I/O thread to drain), then check the exact count.
    for _ in range(500):
        assert b.call("ping") == "ping"
        if dropped_in_b() - before >= 2:
            break
    assert dropped_in_b() - before == 2


def test_reply_channels_live_in_the_runtime_dir_and_go_with_the_node(node):
    b = node.spawn(Echo, host="own")
    callers = []

    def call() -> None:
        callers.append(b.call("ping"))

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert callers == ["ping"] * 3
    for path in glob.glob(os.path.join(node.rundir, "*")):
        assert os.path.dirname(path) == node.rundir
    assert os.stat(node.rundir).st_mode & 0o777 == 0o700


def test_caller_waiting_on_its_channel_hears_of_the_hosts_death(node):
    b = node.spawn(Echo, host="own")
    assert held_call_reasons(b, lambda: os.kill(b.os_pid, 9)) == ["killed"]
