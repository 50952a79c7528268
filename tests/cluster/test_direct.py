"""Hosts' own connections to other nodes (`actors._core.net.direct`): a host sends
to another node without its node process in the way, on a connection that
node admits only under the cluster key, honouring its frames only while it
has a session with the host's node; order per pair and noconnection hold."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import pytest
import zmq

from actors import Exit, GenServer, Node
from actors._core.net.direct import DirectLinks
from actors._core.net.keys import load, write_new
from actors._core.net.net import NetError
from tests.cluster.dist_actors import Worker
from tests.cluster.netkit import NodeProcess, Recorder, make_link

pytestmark = pytest.mark.integration


class Forwarder(GenServer):
    """Talks to the refs it is given from inside its own callbacks (a host's thread)."""

    def init(self) -> None:
        self.got: list[Any] = []

    def handle_call(self, request: Any, from_: Any) -> Any:
        op, ref, arg = request
        try:
            if op == "call":
                return ref.call(arg, timeout=20.0)
            if op == "casts":
                for i in range(arg):
                    ref.cast(i)
                return ref.call("seen", timeout=10.0)
            if op == "monitor_and_call":
                self.monitor(ref)
                return ref.call(arg, timeout=20.0)
            if op == "got":
                return list(self.got)
        except Exit as exc:
            return ("exit", exc.reason)
        return None

    def handle_info(self, message: Any) -> None:
        self.got.append(message)


# -- the link side: who may speak on a sub-session ------------------------------------


def test_a_hosts_frames_count_as_its_nodes_while_the_session_lasts(tmp_path: Any) -> None:
    write_new(tmp_path / "k")
    cluster_key = load(tmp_path / "k")
    ra, rb = Recorder(), Recorder()
    ctx = zmq.Context()
    try:
        with make_link("a", cluster_key, ra) as a, make_link("b", cluster_key, rb) as b:
            assert a.connect(b.address) == "b"
            rb.expect("up")
            b_id = f"b@{b.incarnation:x}"
            host = DirectLinks(ctx, f"a@{a.incarnation:x}", "h1")
            host.learn(b_id, b.address, cluster_key.public, cluster_key.secret)
            for i in range(50):
                assert host.send(b_id, "h7", b"f%d" % i)
            got = [rb.expect("frame")[1:3] for _ in range(50)]
            assert got == [("a", [b"h7", b"f%d" % i]) for i in range(50)]  # a's frames, in order
            assert b.stats()["host_frames_in"] == 50
            # a host of another incarnation of a is refused: nothing it sends is delivered
            stale = DirectLinks(ctx, f"a@{a.incarnation + 1:x}", "h2")
            stale.learn(b_id, b.address, cluster_key.public, cluster_key.secret)
            stale.send(b_id, "h7", b"stale")
            assert b.wait_stats(lambda s: s.get("host_frames_refused", 0) == 1, 10.0)
            # a node it was not told of goes by the relay, for good
            assert not host.send("c@1", "h1", b"x")
            host.learn("c@1", b.address, cluster_key.public, cluster_key.secret)
            assert not host.send("c@1", "h1", b"x")
            # once a's session with b ends, what its host sends is dropped
            a.disconnect("b")
            rb.expect("down")
            host.send(b_id, "h7", b"late")
            assert b.wait_stats(lambda s: s.get("host_frames_refused", 0) == 2, 10.0)
            assert all(ev[0] != "frame" for ev in list(rb.events.queue))
            host.close()
            stale.close()
            done = threading.Event()
            b.after_drain(done.set)
            assert done.wait(10.0)
        with pytest.raises(NetError):
            b.after_drain(done.set)  # a closed link runs nothing more
    finally:
        ctx.destroy(linger=0)


# -- through Node: hosts use them, order and noconnection hold ---------------------------


def test_a_host_reaches_another_node_without_its_node_process(node_a: Node, peer_b: NodeProcess) -> None:
    node_a.connect(peer_b.address)
    there = node_a.spawn(Worker, "b", node="b", host="own")
    here = node_a.spawn(Forwarder, host="own")
    assert node_a._dist.net is not None
    before = node_a._dist.net.stats().get("frames_out", 0)
    for i in range(20):
        assert here.call(("call", there, ("echo", i))) == i
    assert here.call(("casts", there, 300)) == [("cast", i) for i in range(300)]  # order per pair
    assert node_a._dist.net.stats().get("frames_out", 0) == before  # none went through node a's link


def test_a_reply_then_an_exit_reach_a_host_in_that_order(node_a: Node, peer_b: NodeProcess) -> None:
    node_a.connect(peer_b.address)
    here = node_a.spawn(Forwarder, host="own")
    for i in range(5):
        there = node_a.spawn(Worker, node="b", host="own")
        # the callee replies, then stops: the caller gets the reply, and the DOWN with the real reason
        assert here.call(("monitor_and_call", there, ("stop", f"reason{i}"))) == "stopping"
        deadline = time.monotonic() + 10.0
        got: list[Any] = []
        while time.monotonic() < deadline and len(got) <= i:
            got = here.call(("got", None, None))
        assert got[i][0] == "DOWN" and got[i][2] == there and got[i][3] == f"reason{i}"


def test_frames_for_the_other_nodes_process_keep_their_order_around_system_requests(
    node_a: Node, peer_b: NodeProcess
) -> None:
    """b's link thread delivers to actors of b's node process in place, and a
    system request (run on b's I/O thread) holds back what follows it."""
    node_a.connect(peer_b.address)
    w = node_a.spawn(Worker, node="b")  # in b's node process
    for i in range(200):
        w.cast(i)
        if i % 40 == 0:
            assert node_a.whereis("nobody", node="b") is None
            w.send(("after_sys", i))
    expected: list[Any] = []
    for i in range(200):
        expected.append(("cast", i))
        if i % 40 == 0:
            expected.append(("info", ("after_sys", i)))
    assert w.call("seen") == expected


def test_a_call_pending_from_a_host_fails_noconnection_within_a_second(node_a: Node, key: str) -> None:
    peer = NodeProcess("c", key)
    try:
        node_a.connect(peer.address)
        w = node_a.spawn(Worker, node="c", host="own")
        here = node_a.spawn(Forwarder, host="own")
        assert here.call(("call", w, "ping"))[0] == "pong"
        outcome: queue.Queue[Any] = queue.Queue()
        thread = threading.Thread(target=lambda: outcome.put(here.call(("call", w, "hang"), timeout=20.0)))
        thread.start()
        # Sent or still queued in the host when c dies: either way it fails with noconnection.
        killed = time.monotonic()
        peer.kill()
        assert outcome.get(timeout=5.0) == ("exit", "noconnection")
        assert time.monotonic() - killed < 1.0
        thread.join(5.0)
        assert here.call(("call", w, "ping")) == ("exit", "noconnection")
    finally:
        peer.close()
