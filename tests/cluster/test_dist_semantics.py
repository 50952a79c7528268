"""Distribution semantics through `Node`, with every other node a separate OS
process on 127.0.0.1: a node that comes back (new incarnation, old refs
dead), a node that stops answering (SIGSTOP past net_ticktime, no
resurrection on SIGCONT), connecting twice, a foreign key, and asyncio calls."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import pytest

import actors
from actors import CallTimeout, ConnectError, Exit, Node
from actors._core.net.keys import write_new
from tests.cluster.dist_actors import WatchedWorker, Watcher, Worker, watched
from tests.cluster.netkit import NodeProcess

TICK = 2.0  # net_ticktime of the SIGSTOP test: low, so the test is short, yet above a loaded machine's stalls


def test_connect_error_and_net_error_are_public() -> None:
    assert actors.ConnectError is ConnectError and issubclass(ConnectError, actors.NetError)


def test_a_restarted_node_reconnects_and_refs_to_its_old_incarnation_stay_dead(node_a: Node, key: str) -> None:
    b1 = NodeProcess("b", key)
    b2 = None
    try:
        assert node_a.connect(b1.address) == "b"
        old = node_a.spawn(Worker, "old", node="b", host="own")
        old_in_node = node_a.spawn(Worker, "old-n", node="b")  # in b's node process, proc "n"
        assert old.call("ping")[:2] == ("pong", "old") and old_in_node.call("ping")[:2] == ("pong", "old-n")
        down = node_a.monitor_node("b")
        b1.kill()
        assert down.wait(5.0) == ("nodedown", "b")
        assert node_a.nodes() == []

        # Same name, same address, new incarnation.
        b2 = NodeProcess("b", key, port=b1.port)
        assert b2.address == b1.address
        assert node_a.connect(b2.address) == "b"
        assert node_a.nodes() == ["b"]
        assert b2.ask("wait_for a", "WAITED") == "True"  # b's side of the handshake ends a moment later
        new = node_a.spawn(Worker, "new", node="b", host="own")
        new_in_node = node_a.spawn(Worker, "new-n", node="b")
        assert new != old and new.node_id != old.node_id and new.node_id.startswith("b@")
        # the same process name in the new incarnation: only the node id tells them apart
        assert new_in_node.proc.partition("|")[2] == old_in_node.proc.partition("|")[2] == "n"
        assert new.call("ping")[:2] == ("pong", "new") and new_in_node.call("ping")[:2] == ("pong", "new-n")

        # Refs of the old incarnation: calls fail, monitors fire at once, sends go nowhere.
        for ref in (old, old_in_node):
            with pytest.raises(Exit) as info:
                ref.call("ping", timeout=5.0)
            assert info.value.reason == "noconnection"
            assert node_a.monitor(ref).wait(2.0) == (ref, "noconnection")
        watcher = node_a.spawn(Watcher, host="own")
        watcher.call(("monitor", old_in_node))
        got = watched(watcher, 1)
        assert got[0][0] == "DOWN" and got[0][2] == old_in_node and got[0][3] == "noconnection"
        watcher.call(("link", old))  # trapping exits: the failed link is an EXIT message
        assert watched(watcher, 2)[1] == ("EXIT", old, "noconnection")
        old_in_node.cast("to-old")  # same proc in the new incarnation: must not land there
        old_in_node.send("to-old")
        new_in_node.cast("to-new")
        assert new_in_node.call("seen") == [("cast", "to-new")]
        # A ref of the old incarnation that went through pickling is still dead.
        with pytest.raises(Exit) as info:
            new.call(("echo", old)).call("ping", timeout=5.0)
        assert info.value.reason == "noconnection"
    finally:
        b1.close()
        if b2 is not None:
            b2.close()


def test_a_stopped_node_is_down_after_net_ticktime_and_never_comes_back(key: str) -> None:
    """SIGSTOP: nothing arrives, so after about net_ticktime the node is down
    with everything that pointed at it; after SIGCONT its old refs stay dead
    and that incarnation cannot reconnect (either way round)."""
    b = NodeProcess("b", key, ticktime=TICK)
    try:
        with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key, net_ticktime=TICK) as node_a:
            node_a.connect(b.address)
            ww = WatchedWorker.start(node_a, "b", "w")
            w = ww.worker
            assert w.call("ping")[:2] == ("pong", "w")
            stopped = time.monotonic()
            b.signal(signal.SIGSTOP)
            assert ww.nodemon.wait(10.0 + 4 * TICK) == ("nodedown", "b")
            # Not before silence of about net_ticktime (ticks go every ticktime/4).
            assert time.monotonic() - stopped >= 0.7 * TICK
            assert ww.mon.wait(5.0) == (w, "noconnection")
            assert ww.results.get(timeout=5.0) == "noconnection"
            ww.thread.join(5.0)
            got = watched(ww.watcher, 2)
            assert ("nodedown", "b") in got and ("EXIT", w, "noconnection") in got
            assert node_a.nodes() == []

            b.signal(signal.SIGCONT)
            # The stopped incarnation is quarantined: it cannot come back from either side.  Woken,
            # b may also have found itself on the minority side first and be ending that
            # incarnation (docs/distribution.md, "When the network fails"): refused either way.
            with pytest.raises(ConnectError, match="declared down|ending incarnation"):
                node_a.connect(b.address, timeout=5.0)
            # b, woken, may still count a up until it hears otherwise (a said goodbye).
            assert b.ask("wait_down a", "DOWN") == "nodedown"
            assert b.ask("nodes", "NODES") == ""
            # Refused by a, or, when b ended that incarnation, by b itself (it connects to nothing more).
            answer = b.ask(f"connect {node_a.address}", "CONNECT")
            assert answer.startswith("_FAILED") and ("declared down" in answer or "has ended" in answer)
            assert node_a.nodes() == []
            with pytest.raises(Exit) as info:
                w.call("ping", timeout=5.0)
            assert info.value.reason == "noconnection"
            assert node_a.monitor(w).wait(2.0) == (w, "noconnection")
            # A new incarnation of b at the same address is welcome.
            b.close()
            b = NodeProcess("b", key, ticktime=TICK, port=b.port)
            assert node_a.connect(b.address) == "b"
            fresh = node_a.spawn(Worker, "fresh", node="b")
            assert fresh.call("ping")[:2] == ("pong", "fresh")
    finally:
        b.close()


def test_connecting_twice_is_idempotent(node_a: Node, key: str) -> None:
    b = NodeProcess("b", key)
    try:
        assert node_a.connect(b.address) == "b"
        assert node_a.connect(b.address) == "b"
        # Another spelling of the same address: a second tcp connection, same node.
        other = b.address.replace("127.0.0.1", "localhost")
        assert node_a.connect(other, timeout=5.0) == "b"
        assert b.ask(f"connect {node_a.address}", "CONNECTED") == "a"  # and from the other side
        assert node_a.nodes() == ["b"] and b.ask("nodes", "NODES") == "a"
        w = node_a.spawn(Worker, "w", node="b")
        assert w.call("ping")[:2] == ("pong", "w")
    finally:
        b.close()


def test_connecting_to_a_node_with_another_key_says_so(node_a: Node, tmp_path: Any) -> None:
    other = str(tmp_path / "other.key")
    write_new(other)
    d = NodeProcess("d", other)
    try:
        with pytest.raises(ConnectError, match="cluster key"):
            node_a.connect(d.address, timeout=5.0)
        assert node_a.nodes() == []
        assert d.ask(f"connect {node_a.address}", "CONNECT").startswith("_FAILED")
    finally:
        d.close()


def test_acall_across_nodes_and_noconnection_when_the_node_is_killed(node_a: Node, key: str) -> None:
    c = NodeProcess("c", key)
    try:
        node_a.connect(c.address)
        w = node_a.spawn(Worker, "aw", node="c", host="own")

        async def scenario() -> tuple[Any, ...]:
            pong = await w.acall("ping")
            echoed = await asyncio.gather(*(w.acall(("echo", i)) for i in range(20)))
            with pytest.raises(CallTimeout):
                await w.acall("hang", timeout=0.2)
            hanging = asyncio.ensure_future(w.acall("hang", timeout=30.0))
            assert (await w.acall("ping"))[0] == "pong"  # the hang is at c before c dies
            killed = time.monotonic()
            c.kill()
            with pytest.raises(Exit) as info:
                await hanging
            return pong, echoed, info.value.reason, time.monotonic() - killed

        pong, echoed, reason, took = asyncio.run(scenario())
        assert pong[:2] == ("pong", "aw")
        assert echoed == list(range(20))
        assert reason == "noconnection"
        assert took < 5.0
    finally:
        c.close()
