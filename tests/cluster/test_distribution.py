"""Distribution end to end: nodes as separate OS processes on 127.0.0.1,
connected over tcp with CurveZMQ, with a real key made by keygen."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

import actors
from actors import CallTimeout, Crash, Exit, Node
from actors._core.net.keys import write_new
from actors._core.net.net import ConnectError, NetError
from tests.cluster.dist_actors import WatchedWorker, Watcher, Worker, watched
from tests.cluster.netkit import NodeProcess


def test_connect_and_nodes(node_a: Node, peer_b: NodeProcess) -> None:
    assert node_a.address is not None and node_a.address.startswith("tcp://127.0.0.1:")
    assert node_a.nodes() == []
    assert node_a.connect(peer_b.address) == "b"
    assert node_a.nodes() == ["b"]
    peer_b.command("wait_for a")
    assert peer_b.expect("WAITED") == "WAITED True"
    peer_b.command("nodes")
    assert peer_b.expect("NODES") == "NODES a"


def test_remote_spawn_call_cast_send_and_crash(node_a: Node, peer_b: NodeProcess) -> None:
    node_a.connect(peer_b.address)
    w = node_a.spawn(Worker, "x", node="b", host="own")
    tag, got_tag, pid = w.call("ping")
    assert (tag, got_tag) == ("pong", "x")
    assert pid != os.getpid() and pid != peer_b.proc.pid  # a host process of node b
    in_b = node_a.spawn(Worker, "y", node="b")  # host=None: b's node process
    assert in_b.call("ping") == ("pong", "y", peer_b.proc.pid)
    w.cast("c1")
    w.send("i1")
    assert w.call("seen") == [("cast", "c1"), ("info", "i1")]
    assert w.call(("echo", (1, {"k": [2.5]}))) == (1, {"k": [2.5]})
    # a ref that went to b and back is the same ref
    assert w.call(("echo", w)) == w
    assert hash(w.call(("echo", w))) == hash(w)
    with pytest.raises(CallTimeout):
        w.call("hang", timeout=0.2)
    assert w.call("ping")[0] == "pong"  # the late reply never answers a later call
    with pytest.raises(Exit) as info:
        w.call("crash")
    assert isinstance(info.value.reason, Crash) and info.value.reason.message == "asked to crash"
    with pytest.raises(Exit) as info:
        w.call("ping", timeout=5.0)
    assert info.value.reason == "noproc"  # its host on b ended with it: b answers for the dead
    with pytest.raises(Exit) as info:
        node_a.spawn(Worker, node="c")
    assert info.value.reason == "noconnection"


def test_whereis_on_another_node(node_a: Node, peer_b: NodeProcess) -> None:
    node_a.connect(peer_b.address)
    peer_b.command("spawn reg")
    peer_b.expect("SPAWNED")
    assert node_a.whereis("reg") is None  # names stay local
    ref = node_a.whereis("reg", node="b")
    assert ref is not None and ref.call("ping")[:2] == ("pong", "reg")
    assert node_a.whereis("nobody", node="b") is None
    # the process-level function, from the host program's thread
    assert actors.whereis("reg", node="b") == ref
    assert actors.whereis("reg") is None
    assert actors.whereis("nobody", node="b") is None


def test_order_per_pair_across_nodes(node_a: Node, peer_b: NodeProcess) -> None:
    node_a.connect(peer_b.address)
    w = node_a.spawn(Worker, node="b", host="own")
    for i in range(300):
        w.cast(i)
    assert w.call("seen") == [("cast", i) for i in range(300)]


def test_down_with_the_real_reason(node_a: Node, peer_b: NodeProcess) -> None:
    node_a.connect(peer_b.address)
    w = node_a.spawn(Worker, node="b", host="own")
    mon = node_a.monitor(w)
    assert w.call(("stop", "my_reason")) == "stopping"
    assert mon.wait(10.0) == (w, "my_reason")
    # an actor on node a monitoring an actor on node b
    watcher = node_a.spawn(Watcher, host="own")
    w2 = node_a.spawn(Worker, node="b", host="own")
    watcher.call(("monitor", w2))
    assert w2.call(("stop", "other_reason")) == "stopping"
    got = watched(watcher, 1, 10.0)
    assert got[0][0] == "DOWN" and got[0][2] == w2 and got[0][3] == "other_reason"
    # node.kill and node.exit reach an actor of another node
    w3 = node_a.spawn(Worker, node="b", host="shared")
    w4 = node_a.spawn(Worker, node="b", host="shared")
    mon3, mon4 = node_a.monitor(w3), node_a.monitor(w4)
    node_a.kill(w3)
    node_a.exit(w4, "told_to")
    assert mon3.wait(10.0) == (w3, "killed")
    assert mon4.wait(10.0) == (w4, "told_to")


def test_sigkill_of_a_node_is_noconnection_within_a_second(node_a: Node, key: str) -> None:
    peer = NodeProcess("c", key)
    try:
        node_a.connect(peer.address)
        ww = WatchedWorker.start(node_a, "c")
        w = ww.worker
        killed = time.monotonic()
        peer.kill()
        assert ww.mon.wait(5.0) == (w, "noconnection")
        assert ww.nodemon.wait(5.0) == ("nodedown", "c")
        assert ww.results.get(timeout=5.0) == "noconnection"
        assert time.monotonic() - killed < 1.0
        ww.thread.join(5.0)
        got = watched(ww.watcher, 2, 5.0)
        assert ("nodedown", "c") in got
        assert ("EXIT", w, "noconnection") in got
        assert node_a.nodes() == []
        with pytest.raises(Exit) as info:
            w.call("ping", timeout=5.0)
        assert info.value.reason == "noconnection"
    finally:
        peer.close()


def test_monitor_node_that_is_not_connected_fires_at_once(node_a: Node) -> None:
    assert node_a.monitor_node("nowhere").wait(1.0) == ("nodedown", "nowhere")


def test_a_peer_with_another_key_cannot_connect(node_a: Node, tmp_path: Any) -> None:
    other = str(tmp_path / "other.key")
    write_new(other)
    peer = NodeProcess("d", other)
    try:
        with pytest.raises(ConnectError):
            node_a.connect(peer.address, timeout=2.0)
        assert node_a.nodes() == []
    finally:
        peer.close()


def test_non_loopback_listener_needs_a_key() -> None:
    from actors.config import ConfigError

    with pytest.raises((ConfigError, NetError)) as info:
        Node(name="x", listen="tcp://0.0.0.0:0")
    assert "cluster key" in str(info.value) or "cluster_key" in str(info.value)


def test_from_cluster_config(key: str) -> None:
    config = {"cluster": {"name": "cfg", "listen": "tcp://127.0.0.1:0", "cluster_key": key, "net_ticktime": "5"}}
    with Node(config) as node:
        assert node.name == "cfg" and node.address.startswith("tcp://127.0.0.1:")


def test_a_local_node_is_not_distributed() -> None:
    with Node() as node:
        assert node.name is None and node.address is None and node.nodes() == []
        with pytest.raises(NetError):
            node.connect("tcp://127.0.0.1:1")


def test_a_supervised_child_on_another_node_fails_over(node_a: Node, key: str) -> None:
    """ChildSpec(node=[...]): the first candidate up is used; when its node is
    killed the child exits noconnection and restarts on the next one."""
    from supervision import ChildSpec, SupFlags, start_supervisor, which_children

    peer = NodeProcess("e", key)
    try:
        node_a.connect(peer.address)
        spec = ChildSpec("w", (Worker, ("sup",)), node=["e", "a"], host="own")
        sup = start_supervisor(node_a, SupFlags(intensity=5, period=10), [spec])
        first = which_children(sup)[0].child
        assert first.call("ping")[2] not in (os.getpid(), peer.proc.pid)
        assert first.node_id.startswith("e@")
        mon = node_a.monitor(first)
        peer.kill()
        assert mon.wait(5.0) == (first, "noconnection")
        deadline = time.monotonic() + 10.0
        second = first
        while time.monotonic() < deadline and (second == first or not isinstance(second, type(first))):
            second = which_children(sup)[0].child
        assert second != first and second.node_id == node_a.id
        assert second.call("ping")[:2] == ("pong", "sup")
    finally:
        peer.close()
