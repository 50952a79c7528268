"""``[cluster] trust_peers = false``: a node that builds only plain data from
what other nodes send.  Node a (the test's) refuses; node b, its own OS
process on 127.0.0.1, trusts as by default and sends to a's actors both
ways a frame crosses: straight to a's host process (one hop) and through
a's node process (a send by name, a system frame)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors import ActorRef, Node
from tests.cluster.group_actors import Inbox, Member, Point
from tests.cluster.netkit import NodeProcess

#: What still passes: orjson values, bytes, and tuples, sets and refs inside a pickled body.
PLAIN = ("plain", 1, 2.5, None, b"bytes", {"k": [1, 2]}, frozenset({3}))


def _refused_count(node: Node) -> float:
    counters = node.stats().get("counters", {})
    return float(counters.get("actors.net.refused_frames", 0))


@pytest.fixture
def untrusting(key: str) -> Iterator[Node]:
    node = Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key, trust_peers=False)
    try:
        yield node
    finally:
        node.close()


@pytest.mark.timeout(90)
def test_a_pickled_body_from_another_node_is_refused_and_plain_data_passes(untrusting: Node, key: str) -> None:
    a = untrusting
    b = NodeProcess("b", key)
    try:
        assert a.connect(b.address) == "b"
        inbox = a.spawn(Inbox, name="inbox", host="own")
        sender: ActorRef = a.spawn(Member, "s", node="b", host="own")
        # One hop, b's host to a's host: a Point names its class and is never built.
        assert sender.call(("send_to", inbox, Point(1, 2))) == "sent"
        assert sender.call(("send_to", inbox, PLAIN + (sender,))) == "sent"
        assert inbox.call(("await", [PLAIN + (sender,)]), timeout=10.0) == "ok"
        # Through a's node process: a send by name carries the message in a system frame.
        assert sender.call(("send_named", "inbox", "a", Point(3, 4))) == "sent"
        assert sender.call(("send_named", "inbox", "a", "by name")) == "sent"
        assert inbox.call(("await", [PLAIN + (sender,), "by name"]), timeout=10.0) == "ok"
        # A call whose request is refused fails at once, not after its timeout.
        refused = ("exit", ("refused", "tests.cluster.group_actors.Point"))
        assert sender.call(("call_to", inbox, ("got", Point(5, 6))), timeout=15.0) == refused
        assert sender.call(("call_to", inbox, ("got",)), timeout=15.0) == [PLAIN + (sender,), "by name"]
        assert _refused_count(a) >= 3
    finally:
        b.close()
