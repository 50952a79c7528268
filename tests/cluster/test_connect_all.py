"""``connect_all`` (Erlang's default): a node that joins one node of a
cluster connects to the nodes that one is connected to, so the cluster is a
full mesh whichever node each was told to join.  Off (``[cluster]
connect_all = false``, Erlang's ``-connect_all false``), a node connects only
where it is told to.  Nodes b and c run in processes of their own."""

from __future__ import annotations

import pytest

from actors import Node
from actors._core.wire import system as sysop

pytestmark = pytest.mark.timeout(90)


def test_joining_one_node_connects_to_the_nodes_it_knows(key, peer_b, peer_c):
    assert peer_b.ask(f"connect {peer_c.address}", "CONNECTED") == "c"
    with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key) as node:
        assert node.connect(peer_b.address) == "b"
        assert node.wait_for_node("c", timeout=20.0), f"a never connected to c: {node.nodes()}"
        assert node.nodes() == ["b", "c"]
        assert peer_c.ask("wait_for a", "WAITED") == "True"  # c counts a up: a real connection both ways
        assert peer_c.ask("nodes", "NODES") == "a,b"
        peer_c.ask("spawn w", "SPAWNED")
        worker = node.whereis("w", node="c")
        assert worker is not None and worker.call("ping", timeout=10.0)[:2] == ("pong", "w")


def test_a_node_with_connect_all_off_connects_only_where_it_is_told(key, peer_b, peer_c):
    assert peer_b.ask(f"connect {peer_c.address}", "CONNECTED") == "c"
    config = {"cluster": {"connect_all": "false"}}
    with Node(config, name="a", listen="tcp://127.0.0.1:0", cluster_key=key) as node:
        assert node._dist.net is not None
        assert node.connect(peer_b.address) == "b"
        # b sent its list (c) on connecting, before anything else it sends a:
        # once b has answered a request, a has had the list and let it be.
        assert node.whereis("nobody", node="b") is None
        assert node._dist.net.stats().get("connects_soon", 0) == 0, "a dialed a node it was not told to"
        assert node.nodes() == ["b"]
        assert peer_c.ask("wait_for b", "WAITED") == "True"  # c's side of its handshake with b may end later
        assert peer_c.ask("nodes", "NODES") == "b"


def test_a_peers_list_is_acted_on_for_at_most_1000_entries(node_a, monkeypatch):
    """A list of 1,500 nodes (a peer gone wrong, or a hostile one) makes the
    node dial only the first 1,000: one message cannot make it open an
    unbounded number of connections.  The dials are recorded, not made."""
    assert node_a._dist.net is not None
    dialed = []
    monkeypatch.setattr(
        node_a._dist.net, "connect_soon", lambda address, expect, timeout=10.0: dialed.append((expect, address))
    )
    known = [[f"n{i:04d}", f"tcp://127.0.0.1:{20000 + i}"] for i in range(1500)]
    rt = node_a._rt
    # As a connected peer's list arrives; handled in place (a system message to
    # this very process), so every dial is recorded when it returns.
    rt.sys_send(rt.node_proc, sysop.KnownNodes(known))
    assert dialed == [tuple(entry) for entry in known[:1000]]
