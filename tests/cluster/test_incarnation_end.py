"""An embedded node that ends its incarnation stops everything it runs, and with
``rejoin=`` comes back as a new incarnation with the program's tree started again.

Node a runs in the test's own process; b and c are nodes in OS processes of
their own.  Freezing b and c (SIGSTOP) leaves a alone, one of three: on the
minority side of a cut, it ends its incarnation (docs/distribution.md, "When
the network fails")."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from actors import INCARNATION_ENDED, Exit, IncarnationEnded, Node, SpawnError
from tests.cluster.dist_actors import Worker
from tests.cluster.netkit import NodeProcess
from tests.polling import poll_until

pytestmark = pytest.mark.timeout(180)

TICK = 2.0  # net_ticktime: low, so the test is short, yet above a loaded machine's stalls
#: From freezing the peers to a's end: silence past net_ticktime, with room for a loaded machine.
END_WITHIN = 4 * TICK + 10.0
#: How long the stop of an ended incarnation may take (its top actors' bound, then the rest).
STOP_WITHIN = 10.0


def _three(key: str, a: Node, rejoin: bool = False) -> tuple[NodeProcess, NodeProcess]:
    """b and c, each connected to a and to each other (a full mesh: a is one of three)."""
    b = NodeProcess("b", key, ticktime=TICK, rejoin=rejoin)
    try:
        c = NodeProcess("c", key, ticktime=TICK, seeds=(b.address,), rejoin=rejoin)
    except BaseException:
        b.close()
        raise
    assert a.connect(b.address) == "b" and a.connect(c.address) == "c"
    poll_until(lambda: a.nodes() == ["b", "c"], "a connected to b and c", 20.0)
    assert b.ask("wait_for c", "WAITED") == "True" and b.ask("wait_for a", "WAITED") == "True"
    return b, c


def test_an_ended_incarnation_stops_every_actor_and_refuses_new_work(key: str) -> None:
    with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key, net_ticktime=TICK) as a:
        b, c = _three(key, a)
        try:
            local = a.spawn(Worker, "local")
            hosted = a.spawn(Worker, "hosted", host="own")
            assert local is not None and hosted is not None
            assert local.call("ping")[:2] == ("pong", "local") and hosted.call("ping")[:2] == ("pong", "hosted")
            watches = [a.monitor(local), a.monitor(hosted)]
            told: list[str] = []
            ended = threading.Event()
            a.on_ended(lambda why: (told.append(why), ended.set()))

            b.signal(signal.SIGSTOP)
            c.signal(signal.SIGSTOP)
            frozen = time.monotonic()
            assert ended.wait(END_WITHIN + STOP_WITHIN), "node a did not end its incarnation"
            assert "minority" in told[0] and a.ended == told[0]
            # Every actor, in this process and in a host, exited with the documented reason,
            # before on_ended was told.
            for watch, ref in zip(watches, (local, hosted)):
                assert watch.wait(0.5) == (ref, INCARNATION_ENDED)
            assert time.monotonic() - frozen < END_WITHIN + STOP_WITHIN
            # New work fails clearly, naming the ended incarnation.
            with pytest.raises(IncarnationEnded) as info:
                a.spawn(Worker, "late")
            assert info.value.node_id == a.id and "minority" in str(info.value)
            with pytest.raises(IncarnationEnded):
                local.call("ping", timeout=2.0)
            with pytest.raises(Exit) as called:
                hosted.call("ping", timeout=2.0)
            assert called.value.reason in (INCARNATION_ENDED, "noproc")
            assert a.hosts() == [] or all(h["actors"] == 0 for h in a.hosts() if "actors" in h)
            # A late on_ended is told at once.
            late: list[str] = []
            a.on_ended(late.append)
            assert late == told
        finally:
            b.close()
            c.close()


def test_a_supervised_tree_stops_in_order_and_nothing_restarts(key: str) -> None:
    """The program's supervisor stops its children (their terminate runs) and restarts
    none; an actor an actor spawned, outside any tree, ends too."""
    from supervision import ChildSpec, SupFlags, start_supervisor

    with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key, net_ticktime=TICK) as a:
        b, c = _three(key, a)
        try:
            sup = start_supervisor(
                a,
                SupFlags("one_for_one", intensity=100, period=1),
                [ChildSpec("w1", (Worker, ("w1",)), host="tree"), ChildSpec("w2", (Worker, ("w2",)))],
                name="tree_sup",
            )
            assert sup is not None
            stray = a.spawn(Worker, "stray", host="tree")
            watches = {"sup": a.monitor(sup), "stray": a.monitor(stray)}
            b.signal(signal.SIGSTOP)
            c.signal(signal.SIGSTOP)
            assert watches["sup"].wait(END_WITHIN + STOP_WITHIN)[1] == INCARNATION_ENDED
            assert watches["stray"].wait(STOP_WITHIN)[1] == INCARNATION_ENDED
            with pytest.raises((IncarnationEnded, SpawnError)):
                a.spawn(Worker, "again", host="tree")
            assert "tree_sup" not in a.registered()
        finally:
            b.close()
            c.close()


def test_with_rejoin_the_tree_runs_again_on_a_new_incarnation_after_the_peers_thaw(key: str) -> None:
    started: list[str] = []

    def start(node: Node) -> None:
        node.spawn(Worker, node.id, name="worker", host="own")
        started.append(node.id)

    b = NodeProcess("b", key, ticktime=TICK, rejoin=True)
    c = None
    a = None
    try:
        c = NodeProcess("c", key, ticktime=TICK, seeds=(b.address,), rejoin=True)
        a = Node(
            name="a",
            listen="tcp://127.0.0.1:0",
            cluster_key=key,
            net_ticktime=TICK,
            seeds=(b.address, c.address),
            rejoin=start,
        )
        start(a)
        first, address = a.id, a.address
        poll_until(lambda: a.nodes() == ["b", "c"], "a connected to b and c", 20.0)
        assert b.ask("wait_for c", "WAITED") == "True"
        worker = a.whereis("worker")
        assert worker is not None and worker.call("ping")[:2] == ("pong", first)
        watch = a.monitor(worker)

        b.signal(signal.SIGSTOP)
        c.signal(signal.SIGSTOP)
        assert watch.wait(END_WITHIN + STOP_WITHIN) == (worker, INCARNATION_ENDED)
        b.signal(signal.SIGCONT)
        c.signal(signal.SIGCONT)
        healed = time.monotonic()
        # Back within the documented bound (2 x net_ticktime + 10 s after the heal), slack for a loaded machine.
        assert a.wait_incarnation(2, timeout=2 * TICK + 10.0 + 20.0), "no new incarnation of a"
        assert a.id != first and a.address == address and a.incarnation == 2
        poll_until(lambda: a.nodes() == ["b", "c"], "the cluster whole again", 2 * TICK + 10.0 + 20.0)
        took = time.monotonic() - healed
        assert started == [first, a.id]
        fresh = a.whereis("worker")
        assert fresh is not None and fresh.call("ping")[:2] == ("pong", a.id)
        assert b.ask("nodes", "NODES").split(",") == ["a", "c"]
        assert took < 2 * TICK + 10.0 + 20.0
    finally:
        for peer in (b, c):
            if peer is not None:
                peer.close()
        if a is not None:
            a.close()
