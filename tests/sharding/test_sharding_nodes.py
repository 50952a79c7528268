"""Sharded counters on real nodes: this test's node a and node processes b and c.

Without a store: entities start where their shard lives, shards spread over
the three nodes, calls from a reach every key, a crashed entity restarts in
place, and when c leaves its shards move to a and b with calls still
answered.  With a store (PostgreSQL): a node SIGKILLed under load loses no
acknowledged increment, and the leases' audit shows no shard held by two
nodes at any instant.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from actors import Exit, Node, sharding
from actors.leases import PgStore, overlapping_runs
from actors.leases import sql as lease_sql
from tests.cluster.netkit import LineProcess
from tests.polling import poll_until
from tests.sharding.entities import Counter

PEER = os.path.join(os.path.dirname(__file__), "sharding_peer.py")
KEYS = [f"k{i}" for i in range(200)]


class Peer(LineProcess):
    what = "sharding node"

    def __init__(self, name: str, key: str) -> None:
        super().__init__([sys.executable, PEER, "--name", name, "--key", key])
        self.name = name

    def ask(self, line: str, answer: str, timeout: float = 30.0) -> str:
        self.command(line)
        return self.expect(answer, timeout)[len(answer) :].strip()


def _cluster(node_a: Node, key: str, names: tuple[str, ...], store: str) -> list[Peer]:
    peers: list[Peer] = []
    try:
        for name in names:
            peers.append(Peer(name, key))
        for peer in peers:
            assert node_a.connect(peer.address) == peer.name
        for peer in peers:
            assert peer.ask(f"start {store}", "STARTED") == ""
    except BaseException:
        for peer in peers:
            peer.close()
        raise
    return peers


def _call(key: str, request: object, deadline: float) -> object:
    """A call that retries while the entity's shard has no home yet (bounded)."""
    while True:
        try:
            return sharding.ref("counter", key).call(request, timeout=10.0)
        except Exit:
            if time.monotonic() > deadline:
                raise


@pytest.mark.timeout(120)
def test_entities_spread_restart_in_place_and_follow_a_leaving_node(node_a: Node, key: str) -> None:
    peers = _cluster(node_a, key, ("b", "c"), "-")
    b, c = peers
    try:
        sharding.start(node_a, "counter", Counter, shards=20, lease_ttl=3.0, rebalance_every=0.5)
        deadline = time.monotonic() + 60
        for k in KEYS:
            assert _call(k, 1, deadline) == 1
        poll_until(
            lambda: (
                sorted(len(s) for s in sharding.status("counter").get("table", {}).get("shards", {}).values())
                == [6, 7, 7]
            ),
            "shards spread over a, b and c",
            seconds=30.0,
        )
        where = {k: _call(k, "where", deadline) for k in KEYS}
        assert set(where.values()) == {"a", "b", "c"}
        active = set(c.ask("active", "ACTIVE").split(","))
        on_c = {k for k, n in where.items() if n == "c"}
        assert on_c <= active  # the entities asked run where they said
        # A crash restarts the entity in place: the call fails, the next is served.
        with pytest.raises(sharding.EntityError, match="entity_crashed"):
            sharding.ref("counter", "k1").call("boom")
        assert sharding.ref("counter", "k1").call("get") == 0  # a new object, no store: count anew
        c.close()  # c leaves: its shards move to a and b
        for k in sorted(on_c)[:50]:
            assert _call(k, 1, time.monotonic() + 30) == 1  # started again on a survivor
        assert {_call(k, "where", deadline) for k in on_c} <= {"a", "b"}
    finally:
        for peer in peers:
            peer.close()


@pytest.mark.timeout(150)
def test_with_a_store_a_killed_node_loses_no_acknowledged_increment(pg_url: str, node_a: Node, key: str) -> None:
    peers = _cluster(node_a, key, ("b",), pg_url)
    (b,) = peers
    try:
        sharding.start(node_a, "counter", Counter, shards=20, store=pg_url, lease_ttl=3.0, rebalance_every=0.5)
        acked = dict.fromkeys(KEYS[:60], 0)
        tried = dict.fromkeys(KEYS[:60], 0)
        deadline = time.monotonic() + 60
        for k in acked:
            tried[k] += 1
            _call(k, 1, deadline)
            acked[k] += 1
        poll_until(
            lambda: (
                sorted(len(s) for s in sharding.status("counter").get("table", {}).get("shards", {}).values())
                == [10, 10]
            ),
            "shards spread over a and b",
            seconds=30.0,
        )
        b.signal(signal.SIGKILL)
        deadline = time.monotonic() + 60
        for _ in range(3):
            for k in acked:
                tried[k] += 1
                while True:  # calls to b's shards fail until a takes them over under their leases
                    try:
                        sharding.ref("counter", k).call(1, timeout=10.0)
                        break
                    except Exit:
                        assert time.monotonic() < deadline, f"{k} never came back"
                acked[k] += 1
        for k in acked:
            got = sharding.ref("counter", k).call("get")
            assert acked[k] <= got <= tried[k] + 1, (k, acked[k], got)
        store = PgStore(pg_url, op_timeout=5.0)
        try:
            with store.transaction() as tx:
                runs = [r for r in lease_sql.runs(tx) if r.job.startswith("shard:counter:")]
        finally:
            store.close()
        assert {r.node for r in runs} == {"a", "b"}
        assert overlapping_runs(runs) == []
    finally:
        for peer in peers:
            peer.close()
