"""``actors.global_names`` on three nodes, each its own OS process on
127.0.0.1 (a is the test's): concurrent registrations (exactly one winner),
a holder killed, its node SIGKILLed, two groups of nodes that registered
one name meeting (one survives), and a supervised singleton failing over."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from actors import ActorRef, ConnectError, Node
from actors import global_names as gn
from supervision import ChildSpec, SupFlags, start_supervisor, which_children
from tests.cluster.group_actors import Member
from tests.cluster.netkit import NodeProcess
from tests.polling import poll_until


def mesh(node_a: Node, *peers: NodeProcess) -> None:
    for peer in peers:
        assert node_a.connect(peer.address) == peer.name
    for peer in peers:
        for other in peers:
            if other is not peer:
                assert peer.ask(f"wait_for {other.name}", "WAITED") == "True"


def start_servers(node_a: Node, *names: str) -> list[ActorRef]:
    return [gn.start(node_a)] + [node_a.spawn(gn.NameServer, node=n) for n in names]


def answers(asker: ActorRef, name: str) -> Any:
    return asker.call(("whereis", name))


@pytest.mark.timeout(180)
def test_concurrent_registrations_from_three_nodes_have_exactly_one_winner(node_a: Node, key: str) -> None:
    b, c = NodeProcess("b", key), NodeProcess("c", key)
    try:
        mesh(node_a, b, c)
        start_servers(node_a, "b", "c")
        racers = [
            node_a.spawn(Member, "ra", host="own"),
            node_a.spawn(Member, "rb", node="b", host="own"),
            node_a.spawn(Member, "rc", node="c", host="own"),
        ]
        names = [f"trial{i}" for i in range(100)]
        results: dict[ActorRef, list[bool]] = {}
        go = threading.Barrier(len(racers))

        def race(racer: ActorRef) -> None:
            go.wait(30.0)
            results[racer] = racer.call(("race", names), timeout=120.0)

        threads = [threading.Thread(target=race, args=(r,)) for r in racers]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(150.0)
        took = time.monotonic() - started
        assert len(results) == 3
        wins = {r.node_id.partition("@")[0]: sum(results[r]) for r in racers}
        print(f"\n100 names raced for by 3 nodes in {took:.2f} s; wins per racer {wins}")
        for i, name in enumerate(names):
            winners = [r for r in racers if results[r][i]]
            assert len(winners) == 1, (name, winners)
            for asker in racers:  # every node's copy names the winner
                assert answers(asker, name) == winners[0]
    finally:
        b.close()
        c.close()


@pytest.mark.timeout(120)
def test_the_name_is_released_when_its_holder_dies_or_its_node_is_killed(node_a: Node, key: str) -> None:
    b, c = NodeProcess("b", key), NodeProcess("c", key)
    try:
        mesh(node_a, b, c)
        start_servers(node_a, "b", "c")
        ma = node_a.spawn(Member, "a", host="own")
        mb = node_a.spawn(Member, "b", node="b", host="own")
        mc = node_a.spawn(Member, "c", node="c")
        b_asker = node_a.spawn(Member, "b2", node="b")
        # a holder that is killed
        assert mb.call(("register", "k")) is True
        assert mc.call(("register", "k")) is False
        for asker in (ma, mb, mc):
            assert answers(asker, "k") == mb
        node_a.kill(mb)
        for asker in (ma, b_asker, mc):  # each copy frees it once it sees the death
            poll_until(lambda: answers(asker, "k") is None, f"k released at {asker}")
        assert ma.call(("register", "k")) is True

        # a holder whose node is SIGKILLed
        assert mc.call(("register", "s")) is True
        assert gn.whereis("s") == mc and gn.registered()["s"] == mc
        c.kill()
        for asker in (ma, b_asker):
            poll_until(lambda: answers(asker, "s") is None, f"s released at {asker}")
        assert gn.register("s", ma) is True  # the survivors take it over
        assert gn.whereis("s") == ma
        assert gn.unregister("s") is True and gn.unregister("s") is False
        assert gn.whereis("s") is None and ma.call(("ping",)) == ("pong", "a")  # the holder lives on
    finally:
        b.close()
        c.close()


@pytest.mark.timeout(120)
def test_two_sides_that_registered_one_name_meet_and_one_holder_survives(node_a: Node, key: str) -> None:
    """Side {a} and side {b, c} run apart (a cut; here they are nodes started
    apart, as nodes whose seeds were cut off at start) and both register
    "x"; when they connect, every node keeps a's holder (a sorts first) and
    b's holder exits with ("global_name_conflict", "x").  No node's copy
    ever names two holders or goes back to the loser once it named the survivor."""
    b, c = NodeProcess("b", key), NodeProcess("c", key)
    try:
        assert b.ask(f"connect {c.address}", "CONNECTED") == "c"
        for peer in (b, c):
            assert peer.ask("groups_start", "GROUPS") == "started"
        assert b.ask("gregister x", "GREGISTERED") == "x True"
        assert c.ask("gwhereis x", "GWHEREIS") == "x b"
        gn.start(node_a)
        ma = node_a.spawn(Member, "a", host="own")
        assert gn.register("x", ma) is True

        node_a.connect(b.address)  # the sides meet (connect_all brings c along)
        assert node_a.wait_for_node("c", 20.0)
        servers = {name: node_a.whereis(gn.SERVER_NAME, node=name) for name in ("b", "c")}
        history: dict[str, list[Any]] = {name: [] for name in ("a", "b", "c")}
        deadline = time.monotonic() + 30.0
        for _ in range(100_000):  # every copy, asked in turn until all name the survivor
            history["a"].append(gn.whereis("x"))
            for name, server in servers.items():
                history[name].append(server.call(("whereis", "x")))
            if all(h[-1] == ma for h in history.values()) or time.monotonic() > deadline:
                break
        assert b.expect("GEXIT x", 20.0) == "GEXIT x ('global_name_conflict', 'x')"
        assert set(history["a"]) == {ma}
        loser = next((h for name in ("b", "c") for h in history[name] if h not in (None, ma)), None)
        for name in ("b", "c"):
            seen = history[name]
            assert seen[-1] == ma, (name, seen[-5:])
            # b's holder, then (on a node the exchange reaches after b ended it) nothing
            # for a moment, then a's holder for good: never two, never back
            first = seen.index(ma)
            assert all(h == ma for h in seen[first:]), name
            before = seen[:first]
            assert set(before) <= {loser, None}, (name, set(before))
            if None in before:
                assert all(h is None for h in before[before.index(None) :]), name
        assert c.ask("gwhereis x", "GWHEREIS") == "x a"
        assert b.ask("gregister x", "GREGISTERED") == "x False"  # the survivor holds it
    finally:
        b.close()
        c.close()


@pytest.mark.timeout(120)
def test_a_supervised_singleton_is_found_from_every_node_and_fails_over(node_a: Node, key: str) -> None:
    b, c = NodeProcess("b", key), NodeProcess("c", key)
    try:
        mesh(node_a, b, c)
        start_servers(node_a, "b", "c")
        spec = ChildSpec("solo", (Member, ("solo",)), name=gn.GlobalName("solo"), node=["b", "c"])
        sup = start_supervisor(node_a, SupFlags(intensity=5, period=10), [spec])
        asker = node_a.spawn(Member, "c-asker", node="c")
        first = poll_until(lambda: gn.whereis("solo"), "the singleton registered")
        assert first.node_id.startswith("b@")
        poll_until(lambda: answers(asker, "solo") == first, "c's copy naming the singleton")
        assert first.call(("ping",)) == ("pong", "solo")
        # a second start of it anywhere fails: the name is held by a live actor
        with pytest.raises(Exception) as info:
            node_a.spawn(gn.named(Member, "solo"), node="c")
        assert "already_started" in repr(info.value)
        b.kill()  # its node is lost: the child exits noconnection and restarts on c
        moved = poll_until(
            lambda: (r := gn.whereis("solo")) is not None and r != first and r, "the singleton restarted on c"
        )
        assert moved.node_id.startswith("c@")
        # each copy is written in turn (a's, then c's): c's may be a moment behind a's
        poll_until(lambda: answers(asker, "solo") == moved, "c's copy naming the moved singleton")
        assert moved.call(("ping",)) == ("pong", "solo")
        assert which_children(sup)[0].child == moved
    finally:
        b.close()
        c.close()


@pytest.mark.timeout(120)
def test_a_cut_link_leaves_no_node_with_two_holders(node_a: Node, key: str) -> None:
    """The link a-b is cut (a test hook severs it; each side declares the
    other down) while c still sees both: a's copy frees b's holder, but a
    registration on a still finds it held in c's copy and fails, so no node
    ever names a second holder.  The cut cannot heal without a restart (a
    lost incarnation is quarantined; docs/distribution.md)."""
    b, c = NodeProcess("b", key), NodeProcess("c", key)
    try:
        mesh(node_a, b, c)
        start_servers(node_a, "b", "c")
        ma = node_a.spawn(Member, "a", host="own")
        mb = node_a.spawn(Member, "b", node="b", host="own")
        mc = node_a.spawn(Member, "c", node="c")
        assert mb.call(("register", "x")) is True
        down = node_a.monitor_node("b")
        assert node_a._dist.net is not None
        node_a._dist.net.disconnect("b")  # the cut: a and b each see the other down
        assert down.wait(10.0) == ("nodedown", "b")
        poll_until(lambda: gn.whereis("x") is None, "a's copy freeing b's holder")
        assert answers(mc, "x") == mb  # c still sees b and its holder
        assert gn.register("x", ma) is False  # c's copy says it is held: no second holder
        assert mc.call(("register", "x")) is False
        assert answers(mc, "x") == mb and gn.whereis("x") is None
        with pytest.raises(ConnectError):
            node_a.connect(b.address, timeout=5.0)  # quarantined until b restarts
    finally:
        b.close()
        c.close()


def _reports(node: Node, sup: ActorRef) -> list[dict[str, Any]]:
    entry = next(a for a in node.actors() if a["id"] == sup.id)
    return entry["status"]["detail"]["reports"]


@pytest.mark.timeout(120)
def test_a_supervised_holder_that_loses_a_clash_is_an_ordinary_exit_to_its_supervisor(key: str) -> None:
    """Side {z} runs a supervisor whose child holds "x" cluster-wide; side
    {b, c} registered "x" too.  They meet: b's holder keeps it (b sorts
    before z), and z's supervisor sees its child exit with
    ("global_name_conflict", "x"), a report like any child's exit."""
    b, c = NodeProcess("b", key), NodeProcess("c", key)
    try:
        assert b.ask(f"connect {c.address}", "CONNECTED") == "c"
        for peer in (b, c):
            assert peer.ask("groups_start", "GROUPS") == "started"
        assert b.ask("gregister x", "GREGISTERED") == "x True"
        with Node(name="z", listen="tcp://127.0.0.1:0", cluster_key=key) as z:
            gn.start(z)
            spec = ChildSpec("x", (Member, ("z",)), name=gn.GlobalName("x"), restart="temporary")
            sup = start_supervisor(z, SupFlags(), [spec])
            assert sup is not None
            child = which_children(sup)[0].child
            assert isinstance(child, ActorRef) and gn.whereis("x") == child
            watch = z.monitor(child)
            z.connect(b.address)
            assert watch.wait(20.0) == (child, ("global_name_conflict", "x"))
            report = poll_until(
                lambda: [r for r in _reports(z, sup) if r["report"] == "child_terminated"],
                "the supervisor's report of its child's exit",
            )[0]
            assert report["child"] == "x" and report["action"] == "not restarted", report
            assert report["reason"] == "('global_name_conflict', 'x')", report
            assert which_children(sup) == []  # temporary: not restarted
            holder = poll_until(lambda: gn.whereis("x"), "z's copy naming b's holder")
            assert holder.node_id.startswith("b@") and holder.call(("ping",)) == ("pong", "x")
    finally:
        b.close()
        c.close()
