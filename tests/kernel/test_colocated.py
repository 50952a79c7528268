"""`GenServer.colocated` and `GenServer.mailbox_empty`: the kernel's public way
for actors of one OS process to reach each other without a message, and for a
server to see that it has taken in a whole burst."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from actors import ActorRef, GenServer

pytestmark = pytest.mark.timeout(30)


class Peer(GenServer):
    """``("probe", ref)``: what `colocated` finds behind ``ref``, seen from here."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "whoami":
            return id(self)
        op, ref = request
        found = self.colocated(ref)
        if found is None:
            return None
        return [type(found).__name__, id(found), found.ref == ref]


def test_colocated_finds_a_live_actor_of_the_same_process_only(node):
    a = node.spawn(Peer, host="h1")
    b = node.spawn(Peer, host="h1")
    far = node.spawn(Peer, host="h2")
    name, obj_id, same_ref = a.call(("probe", b))
    assert (name, obj_id, same_ref) == ("Peer", b.call("whoami"), True)
    assert a.call(("probe", far)) is None  # another OS process
    assert a.call(("probe", a))[1] == a.call("whoami")  # itself
    node.stop(b)
    assert a.call(("probe", b)) is None  # dead: nothing to call into


def test_colocated_ignores_an_actor_of_another_node_with_the_same_ids(node):
    a = node.spawn(Peer, host="h1")
    b = node.spawn(Peer, host="h1")
    twin = ActorRef("other-node", b.home_proc, b.id, b.os_pid)
    assert a.call(("probe", b)) is not None
    assert a.call(("probe", twin)) is None


class Burst(GenServer):
    """Blocks in a cast until released, then reports whether its mailbox held more."""

    def init(self, gate: threading.Event, entered: threading.Event, done: threading.Event) -> None:
        self.gate = gate
        self.entered = entered
        self.done = done
        self.seen: list[bool] = []

    def handle_cast(self, request: Any) -> None:
        if request == "block":
            self.entered.set()
            self.gate.wait(10)
        self.seen.append(self.mailbox_empty())
        if request == "two":
            self.done.set()

    def handle_call(self, request: Any, from_: Any) -> Any:
        return list(self.seen)


def test_mailbox_empty_says_whether_more_messages_wait(node):
    gate, entered, done = threading.Event(), threading.Event(), threading.Event()
    ref = node.spawn(Burst, gate, entered, done)  # in this process: the events are shared
    ref.cast("block")
    assert entered.wait(10)
    ref.cast("one")
    ref.cast("two")
    gate.set()
    assert done.wait(10)  # nothing else is sent until "two" has looked
    # "block" ended with "one" and "two" queued; "one" with "two" queued; "two" last.
    assert ref.call("seen") == [False, False, True]
