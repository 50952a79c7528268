"""``send((name, node), message)``: Erlang's ``{Name, Node} ! Msg`` between two
nodes, each its own OS process on 127.0.0.1 (a is the test's), from the host
program and from an actor in a host process."""

from __future__ import annotations

import time

import pytest

from actors import Node
from tests.cluster.group_actors import Inbox, Member
from tests.cluster.netkit import NodeProcess


@pytest.mark.timeout(60)
def test_a_message_reaches_the_name_on_the_other_node_in_order(node_a: Node, key: str) -> None:
    b = NodeProcess("b", key)
    try:
        assert node_a.connect(b.address) == "b"
        inbox = node_a.spawn(Inbox, name="inbox", node="b")
        sender = node_a.spawn(Member, "s", host="own")
        node_a.send(("inbox", "b"), "from the program")
        assert inbox.call(("await", ["from the program"]), timeout=10.0) == "ok"
        for i in range(3):
            assert sender.call(("send_named", "inbox", "b", ("from an actor", i))) == "sent"
        expected = ["from the program", ("from an actor", 0), ("from an actor", 1), ("from an actor", 2)]
        assert inbox.call(("await", expected), timeout=10.0) == "ok"
    finally:
        b.close()


@pytest.mark.timeout(60)
def test_an_unknown_name_or_node_drops_the_message_without_waiting(node_a: Node, key: str) -> None:
    b = NodeProcess("b", key)
    try:
        assert node_a.connect(b.address) == "b"
        inbox = node_a.spawn(Inbox, name="inbox", node="b")
        sender = node_a.spawn(Member, "s", host="own")
        started = time.monotonic()
        assert sender.call(("send_named", "nobody", "b", "lost")) == "sent"
        assert sender.call(("send_named", "inbox", "nowhere", "lost")) == "sent"
        node_a.send(("inbox", "nowhere"), "lost")
        # Nothing is asked of another node: far below any call's timeout.
        assert time.monotonic() - started < 2.0
        # What was sent after them arrives alone: nothing lost went to the inbox.
        assert sender.call(("send_named", "inbox", "b", "kept")) == "sent"
        assert inbox.call(("await", ["kept"]), timeout=10.0) == "ok"
        assert inbox.call(("got",)) == ["kept"]
    finally:
        b.close()


@pytest.mark.timeout(30)
def test_a_name_on_this_node_itself(node_a: Node) -> None:
    inbox = node_a.spawn(Inbox, name="inbox")
    node_a.send(("inbox", "a"), "here")
    assert inbox.call(("await", ["here"]), timeout=10.0) == "ok"
