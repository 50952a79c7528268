"""Bounded mailboxes: each overflow policy, in the sender's process and in
another one (a host of the node), with the actor held so its mailbox fills."""

from __future__ import annotations

import queue
import threading

import pytest

from actors import Exit, GenServer, MailboxFull, Node
from actors._core.runtime.mailbox import MailboxLimit, mailbox_limit
from supervision import ChildSpec, InvalidChildSpec, SupFlags, start_supervisor, which_children
from tests.kernel.mailbox_actors import Gate, Held

PLACES = [None, "own"]


def _dropped_counter(node: Node) -> int:
    return node.stats()["counters"].get("actors.mailbox.dropped", 0)


def _info(node: Node, ref) -> dict:
    return next(e for e in node.actors() if e["id"] == ref.id)


def test_arguments_are_checked(node: Node) -> None:
    assert mailbox_limit(None, None) is None
    assert mailbox_limit(5, None) == MailboxLimit(5, "reject")
    for mailbox, overflow, words in [
        (0, None, "positive int"),
        (True, None, "positive int"),
        ("3", None, "positive int"),
        (3, "drop", "one of drop_newest"),
        (None, "block", "needs mailbox=N"),
    ]:
        with pytest.raises(ValueError, match=words):
            node.spawn(Held, mailbox=mailbox, overflow=overflow)
    with pytest.raises(InvalidChildSpec, match="overflow"):
        ChildSpec("c", (Held, ()), mailbox=3, overflow="sometimes")
    with pytest.raises(InvalidChildSpec, match="mailbox"):
        ChildSpec("c", (Held, ()), mailbox=-1)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("host", PLACES)
def test_drop_newest_keeps_the_first(node: Node, tmp_path, host) -> None:
    before = _dropped_counter(node)  # the test process's counters outlive its nodes
    ref = node.spawn(Held, mailbox=3, overflow="drop_newest", host=host)
    assert not ref.blocks
    with Gate(ref, tmp_path, expect=3) as gate:
        for i in range(6):
            ref.cast(i)
        ref.send("late")
        assert ref.is_alive()  # a barrier: everything above has reached the mailbox
        with pytest.raises(MailboxFull):
            ref.call("any")  # a dropped call fails rather than wait for nothing
        gate.release()
    assert ref.call("seen") == [0, 1, 2]
    assert ref.call("dropped") == 5
    entry = _info(node, ref)
    assert (entry["mailbox_limit"], entry["overflow"], entry["dropped"]) == (3, "drop_newest", 5)
    assert _dropped_counter(node) - before == 5


@pytest.mark.timeout(90)
@pytest.mark.parametrize("host", PLACES)
def test_drop_oldest_keeps_the_last(node: Node, tmp_path, host) -> None:
    before = _dropped_counter(node)
    ref = node.spawn(Held, mailbox=3, overflow="drop_oldest", host=host)
    with Gate(ref, tmp_path, expect=3) as gate:
        for i in range(7):
            ref.cast(i)
        assert ref.is_alive()
        gate.release()
    assert ref.call("seen") == [4, 5, 6]
    assert ref.call("dropped") == 4
    assert _dropped_counter(node) - before == 4


@pytest.mark.timeout(90)
@pytest.mark.parametrize("host", PLACES)
def test_reject_fails_calls_and_counts_casts(node: Node, tmp_path, host) -> None:
    ref = node.spawn(Held, mailbox=2, overflow="reject", host=host)
    with Gate(ref, tmp_path, expect=2) as gate:
        ref.cast("a")
        ref.cast("b")
        ref.cast("c")  # a counted drop
        with pytest.raises(MailboxFull) as info:
            ref.call("x")
        assert isinstance(info.value, Exit) and info.value.reason == "mailbox_full"
        gate.release()
    assert ref.call("seen") == ["a", "b"]
    assert ref.call("dropped") == 2


def test_default_is_unbounded(node: Node, tmp_path) -> None:
    ref = node.spawn(Held)
    with Gate(ref, tmp_path, expect=500) as gate:
        for i in range(500):
            ref.cast(i)
        gate.release()
    assert ref.call("seen") == list(range(500))
    assert _info(node, ref)["mailbox_limit"] is None


@pytest.mark.timeout(90)
@pytest.mark.parametrize("host", PLACES)
def test_block_holds_the_sender_until_there_is_room(node: Node, tmp_path, host) -> None:
    ref = node.spawn(Held, mailbox=2, overflow="block", host=host)
    assert ref.blocks
    done: queue.Queue[str] = queue.Queue()

    def sender() -> None:
        for i in range(5):
            ref.cast(i, timeout=30.0)
            done.put(f"sent {i}")

    with Gate(ref, tmp_path, expect=5) as gate:
        thread = threading.Thread(target=sender, daemon=True)
        thread.start()
        assert [done.get(timeout=20), done.get(timeout=20)] == ["sent 0", "sent 1"]
        with pytest.raises(queue.Empty):  # the third waits for room (a bounded negative check)
            done.get(timeout=0.5)
        gate.release()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert ref.call("seen") == [0, 1, 2, 3, 4]
    assert ref.call("dropped") == 0


@pytest.mark.timeout(90)
@pytest.mark.parametrize("host", PLACES)
def test_block_gives_up_after_the_senders_timeout(node: Node, tmp_path, host) -> None:
    ref = node.spawn(Held, mailbox=1, overflow="block", host=host)
    with Gate(ref, tmp_path, expect=1) as gate:
        ref.cast("in")
        ref.cast("out", timeout=0.2)  # waits 0.2 s, then is dropped and counted
        ref.send("out too", timeout=0.2)
        gate.release()
    assert ref.call("seen") == ["in"]
    assert ref.call("dropped") == 2


def test_block_call_waits_for_room(node: Node, tmp_path) -> None:
    ref = node.spawn(Held, mailbox=1, overflow="block", host="own")
    answers: queue.Queue[object] = queue.Queue()
    with Gate(ref, tmp_path, expect=1) as gate:
        ref.cast("in")
        caller = threading.Thread(target=lambda: answers.put(ref.call("q", timeout=30)), daemon=True)
        caller.start()
        gate.release()
        caller.join(timeout=30)
    assert answers.get(timeout=1) == ("echo", "q")


def test_an_actor_casting_to_its_own_full_block_mailbox_does_not_deadlock(node: Node) -> None:
    class SelfCaster(GenServer):
        def init(self) -> None:
            self.n = 0

        def handle_call(self, request, from_):
            if request == "n":
                return self.n
            for i in range(10):
                self.ref.cast(i)  # cannot wait for itself: the policy drops when full
            return "ok"

        def handle_cast(self, request) -> None:
            self.n += 1

    ref = node.spawn(SelfCaster, mailbox=3, overflow="block")
    assert ref.call("go", timeout=10) == "ok"
    assert ref.call("n", timeout=10) == 3  # 3 got in, 7 were dropped
    assert _info(node, ref)["dropped"] == 7


def test_a_child_spec_bounds_the_childs_mailbox(node: Node, tmp_path) -> None:
    sup = start_supervisor(node, SupFlags(), [ChildSpec("held", (Held, ()), mailbox=2, overflow="drop_newest")])
    try:
        (child,) = which_children(sup)
        entry = _info(node, child.child)
        assert (entry["mailbox_limit"], entry["overflow"]) == (2, "drop_newest")
    finally:
        node.stop(sup)
