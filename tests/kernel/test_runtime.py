"""Timers, teardown, death of the host program, garbage frames, config replicas."""

from __future__ import annotations

import glob
import os
import queue
import subprocess
import sys
import textwrap
import threading

import pytest
import zmq

from actors import GenServer, Node
from tests.kernel.probes import Echo, Probe

pytestmark = pytest.mark.timeout(30)


def test_send_after_delivers_once(node):
    q: queue.Queue = queue.Queue()
    p = node.spawn(Probe, q)
    p.call(("send_after", 0.05, "tick"))
    assert q.get(timeout=5) == "tick"
    # a second timer fired later proves the first did not fire twice
    p.call(("send_after", 0.1, "tock"))
    assert q.get(timeout=5) == "tock"
    assert q.empty()


def test_cancel_timer_prevents_delivery(node):
    q: queue.Queue = queue.Queue()
    p = node.spawn(Probe, q)
    t = p.call(("send_after", 0.2, "never"))
    left = p.call(("cancel", t))
    assert left is not False and 0 <= left <= 0.2
    p.call(("send_after", 0.3, "later"))
    assert q.get(timeout=5) == "later"
    assert q.empty()
    assert p.call(("cancel", t)) is False


def test_timers_use_no_thread_per_timer(node):
    q: queue.Queue = queue.Queue()
    p = node.spawn(Probe, q)
    p.call(("send_after", 5.0, -1))  # the scheduler's workers start with the first turns
    before = threading.active_count()
    for i in range(50):
        p.call(("send_after", 5.0, i))
    assert threading.active_count() == before


def test_timer_in_host_process(node):
    class Ticker(GenServer):
        def init(self):
            self.ticks = 0
            self.waiter = None
            self.send_after(0.01, "tick")

        def handle_info(self, message):
            self.ticks += 1
            if self.waiter:
                self.reply(self.waiter, self.ticks)
                self.waiter = None

        def handle_call(self, request, from_):
            if self.ticks:
                return self.ticks
            self.waiter = from_
            from actors import noreply

            return noreply

    t = node.spawn(Ticker, host="own")
    assert t.call("ticks") == 1


def test_close_leaves_no_process_socket_or_thread():
    before = {t.ident for t in threading.enumerate()}
    node = Node()
    refs = [node.spawn(Echo, host="own") for _ in range(3)] + [node.spawn(Echo, host="shared")]
    pids = {r.os_pid for r in refs}
    rundir = node.rundir
    assert glob.glob(os.path.join(rundir, "*.sock"))
    zygote = node._pool.zygote.pid
    node.close()
    for pid in pids | {zygote}:
        assert not _alive(pid), pid
    assert not os.path.exists(rundir)
    for t in threading.enumerate():
        if t.ident not in before:
            t.join(5)
    assert [t.name for t in threading.enumerate() if t.ident not in before] == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _wait_dead(pid: int, timeout: float = 10.0) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    import select

    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready) or not _alive(pid)
    finally:
        os.close(fd)


def test_sigkill_of_host_program_leaves_nothing_behind(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        textwrap.dedent(
            """
        import sys, os
        from actors import Node
        from tests.kernel.probes import Echo
        node = Node()
        refs = [node.spawn(Echo, host="own") for _ in range(2)]
        print(node.rundir, node._pool.zygote.pid, *[r.os_pid for r in refs], flush=True)
        sys.stdin.read()
        """
        )
    )
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=os.getcwd(),
    )
    line = proc.stdout.readline().split()
    rundir, pids = line[0], [int(p) for p in line[1:]]
    assert os.path.isdir(rundir)
    proc.kill()
    proc.wait(10)
    for pid in pids:
        assert _wait_dead(pid), f"process {pid} outlived its node"
    # the zygote removes the runtime directory once its hosts are gone
    assert _wait_dead(pids[0])
    for _ in range(200):
        if not os.path.exists(rundir):
            break
        threading.Event().wait(0.05)  # bounded poll of the file system, not of an actor
    assert not os.path.exists(rundir)
    proc.stdin.close()
    proc.stdout.close()


def test_garbage_frames_are_dropped_and_counted(node):
    ref = node.spawn(Echo, host="own")
    before = node.stats()["counters"].get("actors.transport.dropped_frames", 0)
    ctx = zmq.Context()
    s = ctx.socket(zmq.PUSH)
    s.connect(node.runtime.endpoint_of(ref.proc))
    s.send(b"not json")
    s.send(b"J[1,2]")
    s.send(b"P\x00\x05[1,2]garbage")
    s.close(linger=1000)
    ctx.term()
    assert ref.call("still here") == "still here"
    assert node.stats()["counters"]["actors.transport.dropped_frames"] - before == 3
    s2 = zmq.Context.instance()
    del s2


def test_config_changes_reach_host_replicas(node):
    class ConfigReader(GenServer):
        def handle_call(self, request, from_):
            from actors import config

            return config.current().get(*request)

    r = node.spawn(ConfigReader, host="own")
    assert r.call(("ioq2", "concurrency")) is None
    node.config.set("ioq2", "concurrency", "8")
    for _ in range(100):
        if r.call(("ioq2", "concurrency")) == "8":
            break
    assert r.call(("ioq2", "concurrency")) == "8"


def test_pinned_host_runs_on_its_cpus(node):
    class Affinity(GenServer):
        def handle_call(self, request, from_):
            return sorted(os.sched_getaffinity(0))

    r = node.spawn(Affinity, host="own", cpus={0})
    assert r.call("cpus") == [0]


def test_local_messages_do_not_touch_zeromq(node, monkeypatch):
    a = node.spawn(Echo)
    calls = []
    orig = node.runtime._send
    monkeypatch.setattr(node.runtime, "_send", lambda *args: calls.append(args) or orig(*args))
    assert a.call("x") == "x"
    a.cast("y")
    assert calls == []
