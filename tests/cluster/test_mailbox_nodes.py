"""Bounded mailboxes across nodes: the actor on node b (its own OS
process, over tcp with CurveZMQ), the sender on node a; each policy holds
there as it does in one process."""

from __future__ import annotations

import queue
import threading

import pytest

from actors import MailboxFull, Node
from tests.cluster.netkit import NodeProcess
from tests.kernel.mailbox_actors import Gate, Held

PLACES = [None, "own"]  # b's node process, a host of b


@pytest.mark.timeout(120)
@pytest.mark.parametrize("host", PLACES)
def test_drop_policies_across_nodes(node_a: Node, peer_b: NodeProcess, tmp_path, host) -> None:
    node_a.connect(peer_b.address)
    newest = node_a.spawn(Held, node="b", host=host, mailbox=2, overflow="drop_newest")
    oldest = node_a.spawn(Held, node="b", host=host, mailbox=2, overflow="drop_oldest")
    reject = node_a.spawn(Held, node="b", host=host, mailbox=2, overflow="reject")
    for ref, expect, dropped in [(newest, [0, 1], 4), (oldest, [4, 5], 4), (reject, [0, 1], 5)]:
        with Gate(ref, tmp_path, expect=2) as gate:
            for i in range(6):
                ref.cast(i)
            assert ref.is_alive()  # a barrier: the casts above went first on the same path
            if ref is reject:
                with pytest.raises(MailboxFull):
                    ref.call("x", timeout=10)
            gate.release()
        assert ref.call("seen", timeout=10) == expect
        assert ref.call("dropped", timeout=10) == dropped


@pytest.mark.timeout(120)
@pytest.mark.parametrize("host", PLACES)
def test_block_across_nodes(node_a: Node, peer_b: NodeProcess, tmp_path, host) -> None:
    node_a.connect(peer_b.address)
    ref = node_a.spawn(Held, node="b", host=host, mailbox=2, overflow="block")
    assert ref.blocks  # the ref that came back from b says so
    done: queue.Queue[str] = queue.Queue()

    def sender() -> None:
        for i in range(6):
            ref.cast(i, timeout=30.0)
            done.put(f"sent {i}")

    with Gate(ref, tmp_path, expect=6) as gate:
        thread = threading.Thread(target=sender, daemon=True)
        thread.start()
        assert [done.get(timeout=20), done.get(timeout=20)] == ["sent 0", "sent 1"]
        with pytest.raises(queue.Empty):  # the third waits for room (a bounded negative check)
            done.get(timeout=0.5)
        gate.release()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert ref.call("seen", timeout=10) == [0, 1, 2, 3, 4, 5]
    with Gate(ref, tmp_path, expect=8) as gate:
        ref.cast("in 1", timeout=5)
        ref.cast("in 2", timeout=5)
        ref.cast("out", timeout=0.3)  # full past its timeout: dropped and counted on b
        gate.release()
    assert ref.call("seen", timeout=10)[-2:] == ["in 1", "in 2"]
    assert ref.call("dropped", timeout=10) == 1
