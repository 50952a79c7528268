"""Remembered entities on real nodes: an active entity comes back by itself after its node goes.

Without a store the coordinator (on this test's node a, the leader) keeps
each shard's set and hands it to the shard's next home, so when c leaves its
active entities start again on a and b with no message sent to them, and
one that was passivated before stays stopped.  With a store the set is a
table written under the shard's fencing token: when b is SIGKILLed, a
starts b's entities once it holds their shards' leases.
"""

from __future__ import annotations

import signal
import time

import pytest

from actors import Node, sharding
from tests.polling import poll_until
from tests.sharding.entities import Counter
from tests.sharding.test_sharding_nodes import KEYS, Peer, _call, _cluster


def _active(peers: list[Peer]) -> set[str]:
    """Every key active on a and on the live ``peers``."""
    keys = set(map(str, sharding.status("counter")["active_keys"]))
    for peer in peers:
        keys |= set(filter(None, peer.ask("active", "ACTIVE").split(",")))
    return keys


def _placed(keys: list[str], deadline: float) -> dict[str, str]:
    """Activate ``keys`` once each (a call), and say where each one runs."""
    for k in keys:
        _call(k, 1, deadline)
    return {k: str(_call(k, "where", deadline)) for k in keys}


def _pick_passivated(on_node: set[str]) -> tuple[str, set[str]]:
    """A key of the node to passivate, among a shard that keeps another remembered key
    (so once that one is back, the shard's set was read and the passivated key was not in it)."""
    by_shard: dict[int, list[str]] = {}
    for k in sorted(on_node):
        by_shard.setdefault(sharding.shard_of(k, 20), []).append(k)
    shard_keys = next(ks for ks in by_shard.values() if len(ks) >= 2)
    return shard_keys[0], on_node - {shard_keys[0]}


@pytest.mark.timeout(90)
def test_without_a_store_a_leaving_nodes_active_entities_come_back_by_themselves(node_a: Node, key: str) -> None:
    peers = _cluster(node_a, key, ("b", "c"), "- remember")
    b, c = peers
    try:
        sharding.start(node_a, "counter", Counter, shards=20, lease_ttl=3.0, rebalance_every=0.5, remember=True)
        deadline = time.monotonic() + 60
        _placed(KEYS[:60], deadline)
        poll_until(
            lambda: (
                sorted(len(s) for s in sharding.status("counter").get("table", {}).get("shards", {}).values())
                == [6, 7, 7]
            ),
            "shards spread over a, b and c",
            seconds=30.0,
        )
        where = _placed(KEYS[:60], deadline)  # after the rebalance: where each runs now
        on_c = {k for k, n in where.items() if n == "c"}
        passivated, remembered = _pick_passivated(on_c)
        assert sharding.ref("counter", passivated).call("passivate") == "ok"
        poll_until(lambda: passivated not in c.ask("active", "ACTIVE").split(","), "the passivation on c")
        c.close()  # c leaves: its shards move to a and b, with their remembered entities
        poll_until(lambda: remembered <= _active([b]), "c's active entities started again on a and b", seconds=30.0)
        assert passivated not in _active([b])  # forgotten when passivated: not started again
        assert sharding.status("counter")["remember"]
        assert {_call(k, "where", deadline) for k in remembered} <= {"a", "b"}
    finally:
        for peer in peers:
            peer.close()


@pytest.mark.timeout(120)
def test_with_a_store_a_killed_nodes_entities_start_again_under_the_leases(
    postgres_url: str, node_a: Node, key: str
) -> None:
    peers = _cluster(node_a, key, ("b",), f"{postgres_url} remember")
    (b,) = peers
    try:
        sharding.start(
            node_a, "counter", Counter, shards=20, store=postgres_url, lease_ttl=3.0, rebalance_every=0.5, remember=True
        )
        deadline = time.monotonic() + 60
        _placed(KEYS[:40], deadline)
        poll_until(
            lambda: (
                sorted(len(s) for s in sharding.status("counter").get("table", {}).get("shards", {}).values())
                == [10, 10]
            ),
            "shards spread over a and b",
            seconds=30.0,
        )
        where = _placed(KEYS[:40], deadline)
        on_b = {k for k, n in where.items() if n == "b"}
        passivated, remembered = _pick_passivated(on_b)
        assert sharding.ref("counter", passivated).call("passivate") == "ok"
        poll_until(lambda: passivated not in b.ask("active", "ACTIVE").split(","), "the passivation on b")
        poll_until(  # the passivation is written to the store (a later one would bring it back)
            lambda: sharding.status("counter", node="b")["remember_unwritten"] == 0, "b's set written"
        )
        b.signal(signal.SIGKILL)  # no hand-off, no goodbye: the set comes from the store
        poll_until(lambda: remembered <= _active([]), "b's active entities started again on a", seconds=45.0)
        assert passivated not in _active([])
        for k in remembered:  # their stored state came with them
            assert sharding.ref("counter", k).call("get") == 2
    finally:
        for peer in peers:
            peer.close()
