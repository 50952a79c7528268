"""Actor ids repeat across nodes (every node's first host is ``h1``, its first
actor ``h1.1``): an actor is known by its node *and* its id, never its id alone."""

from __future__ import annotations

from typing import Any

from actors import GenServer, Node
from tests.cluster.dist_actors import Watcher, Worker
from tests.cluster.netkit import NodeProcess


class Forwarder(GenServer):
    """Calls the ref it is given, from inside its own ``handle_call``."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        ref, inner = request
        return ref.call(inner, timeout=10.0)


def test_an_actor_calls_its_namesake_on_another_node(node_a: Node, peer_b: NodeProcess) -> None:
    node_a.connect(peer_b.address)
    there = node_a.spawn(Worker, "b-side", node="b", host="own")
    here = node_a.spawn(Forwarder, host="own")
    assert here.id == there.id and here != there  # the case under test: same id, two nodes
    assert here.call((there, ("echo", 7))) == 7  # not refused as calling_self


def test_links_to_namesakes_on_two_nodes_are_two_links(node_a: Node, peer_b: NodeProcess) -> None:
    node_a.connect(peer_b.address)
    there = node_a.spawn(Worker, "b-side", node="b", host="own")
    here = node_a.spawn(Worker, "a-side", host="own")
    assert here.id == there.id and here != there
    hub = node_a.spawn(Watcher, host="own")
    assert hub.call(("link", here)) == "ok" and hub.call(("link", there)) == "ok"
    mon_here, mon_there = node_a.monitor(here), node_a.monitor(there)
    node_a.kill(hub)  # its exit signal goes to both: neither link overwrote the other
    assert mon_here.wait(10.0) == (here, "killed")
    assert mon_there.wait(10.0) == (there, "killed")
