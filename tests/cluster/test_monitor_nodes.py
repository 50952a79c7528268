"""``monitor_nodes``: nodeup/nodedown messages for every node, from real node processes."""

from __future__ import annotations

import pytest

from actors import Node
from tests.cluster.dist_actors import NodesWatcher
from tests.cluster.netkit import NodeProcess


def test_nodeup_and_nodedown_in_order(node_a: Node, key: str) -> None:
    in_node = node_a.spawn(NodesWatcher)  # subscribes itself, in the node process
    in_host = node_a.spawn(NodesWatcher, False, host="own")
    node_a.monitor_nodes(in_host)  # the host program subscribes an actor of a host process
    node_a.monitor_nodes(in_host)  # twice is once
    late = node_a.spawn(NodesWatcher, False)
    b = NodeProcess("b", key)
    c = NodeProcess("c", key)
    try:
        assert node_a.connect(b.address) == "b"
        assert in_node.call(("await", 1), timeout=10.0) == [("nodeup", "b")]
        node_a.monitor_nodes(late)  # b is connected already: not announced
        assert node_a.connect(c.address) == "c"
        b.kill()
        want = [("nodeup", "b"), ("nodeup", "c"), ("nodedown", "b")]
        assert in_node.call(("await", 3), timeout=10.0) == want
        assert in_host.call(("await", 3), timeout=10.0) == want
        assert late.call(("await", 2), timeout=10.0) == [("nodeup", "c"), ("nodedown", "b")]
        node_a.monitor_nodes(in_host, False)
        c.close()  # c says goodbye: a nodedown too
        assert in_node.call(("await", 4), timeout=10.0)[3] == ("nodedown", "c")
        assert late.call(("await", 3), timeout=10.0)[2] == ("nodedown", "c")
        assert in_host.call(("await", 3), timeout=10.0) == want  # unsubscribed: nothing more
        assert node_a.nodes() == []
    finally:
        b.close()
        c.close()


def test_a_dead_subscriber_is_forgotten_and_a_ref_is_required(node_a: Node) -> None:
    w = node_a.spawn(NodesWatcher)
    assert node_a._dist.events.subscribers() == [w]
    watch = node_a._dist.events._subs[w]
    node_a.stop(w)
    watch.wait(5.0)  # the node's own watch on its subscriber saw it die
    assert node_a._dist.events.subscribers() == []
    with pytest.raises(TypeError):
        node_a.monitor_nodes("not a ref")  # type: ignore[arg-type]


def test_an_actor_lists_nodes_and_finds_names_on_them(node_a: Node, key: str) -> None:
    w = node_a.spawn(NodesWatcher, False, host="own")
    b = NodeProcess("b", key)
    try:
        assert w.call(("nodes",)) == []
        assert w.call(("whereis", "reg", "b")) is None  # b is not connected: None, not an error
        node_a.connect(b.address)
        b.command("spawn reg")
        b.expect("SPAWNED")
        assert w.call(("nodes",)) == ["b"]
        ref = w.call(("whereis", "reg", "b"))
        assert ref is not None and ref.call("ping")[:2] == ("pong", "reg")
        assert w.call(("whereis", "nobody", "b")) is None
        assert w.call(("whereis", "reg", None)) is None  # names stay local
        # the process-level `actors.whereis(name, node=)`, from an actor's host
        assert w.call(("api_whereis", "reg", "b")) == ref
        assert w.call(("api_whereis", "nobody", "b")) is None
        assert w.call(("api_whereis", "reg", "c")) is None  # not connected: None, not an error
        assert w.call(("api_whereis", "reg", None)) is None
    finally:
        b.close()
