"""A network fault heals by itself: after a cut, a pair cut or a freeze, every node lists every other
within 2 x net_ticktime + 10 s, with no restart by hand.

What each test proves, with ``otpy node`` daemons on three namespace hosts (net_ticktime 2 s):

* the side that ends its incarnation (the minority of a cut, the loser of a pair cut, the frozen
  host) comes back as a new incarnation, which every node admits;
* a call to a ref of the old incarnation, made during the fault or after the heal, fails with
  ``noconnection`` at once instead of waiting for its timeout;
* new spawns on the node that was cut off, and calls to them, succeed from the other side;
* a singleton child (`SingletonSup` on h1, child placed on h3 first) runs on exactly one node.
"""

from __future__ import annotations

import time

import pytest

from tests.hosts.conftest import NET_TICKTIME
from tests.hosts.host_actors import Singleton, SingletonSup, Worker
from tests.hosts.nodes import Cluster
from tests.polling import poll_until

HEAL_WITHIN = 2 * NET_TICKTIME + 10.0
PROMPT = 2.0  # "at once": far below the 10 s timeout the calls are given


def _singletons(cluster: Cluster) -> dict[str, int]:
    counts = {}
    for name, node in cluster.nodes.items():
        try:
            counts[name] = sum(1 for a in node.ask("actors") if a.get("class") == Singleton.__name__)
        except Exception:  # noqa: BLE001 -- a node restarting has none
            counts[name] = 0
    return counts


def _before(cluster: Cluster) -> tuple[object, object]:
    """A worker on h3 made from h1, and the singleton's supervisor on h1 (its child starts on h3)."""
    old = cluster["h1"].spawn(Worker, "old", on="h3", host="own")
    assert cluster["h1"].call(old, "ping")[0] == "ok"
    sup = cluster["h1"].spawn(SingletonSup, ["h3", "h2"])
    assert poll_until(lambda: _singletons(cluster) == {"h1": 0, "h2": 0, "h3": 1}, "the singleton on h3", 20.0)
    return old, sup


def _old_ref_fails_at_once(cluster: Cluster, caller: str, old: object) -> None:
    kind, reason, took = cluster[caller].call(old, "ping", timeout=10.0)
    assert (kind, reason) == ("exit", "noconnection") and took < PROMPT, (kind, reason, took)


def _after_heal(cluster: Cluster, old: object, callers: tuple[str, ...]) -> None:
    for caller in callers:
        _old_ref_fails_at_once(cluster, caller, old)
    fresh = cluster["h1"].spawn(Worker, "fresh", on="h3", host="own")
    kind, reply, _ = cluster["h1"].call(fresh, "ping")
    assert kind == "ok" and reply[:2] == ("pong", "fresh")
    back = cluster["h3"].spawn(Worker, "back", on="h1")
    assert cluster["h3"].call(back, "ping")[1][:2] == ("pong", "back")
    seen: list[dict[str, int]] = []

    def one_singleton() -> bool:
        seen.append(_singletons(cluster))
        return sum(seen[-1].values()) == 1 and seen[-1]["h3"] == 0

    poll_until(one_singleton, "exactly one singleton, not on h3", 20.0)
    assert all(sum(s.values()) <= 1 for s in seen), seen


@pytest.mark.timeout(240)
def test_a_host_cut_off_rejoins_as_a_new_incarnation(cluster: Cluster):
    old, _sup = _before(cluster)
    cluster.topo.cut("h3")
    cluster.wait_views({"h1": ["h2"], "h2": ["h1"]}, 20.0, "h3 seen down")
    cluster["h3"].wait_ready(2, timeout=30.0)  # h3, alone, ended its incarnation and started a new one
    _old_ref_fails_at_once(cluster, "h1", old)
    assert cluster["h3"].nodes() == []
    cluster.topo.heal()
    took = cluster.wait_mesh(HEAL_WITHIN)
    print(f"healed {took:.1f} s after the cut ended")
    assert len(cluster["h1"].readies) == len(cluster["h2"].readies) == 1  # the majority carried on
    _after_heal(cluster, old, ("h1", "h2"))
    assert any("nodedown: node h3" in line for line in cluster["h1"].log)
    assert any("ends incarnation" in line and "minority" in line for line in cluster["h3"].log)


@pytest.mark.timeout(240)
def test_a_pair_cut_heals_and_exactly_one_of_the_pair_starts_again(cluster: Cluster):
    old, _sup = _before(cluster)
    cluster.topo.cut_pair("h1", "h3")
    # Membership differs per node: h2 still sees both.
    cluster.wait_views({"h1": ["h2"], "h2": ["h1", "h3"], "h3": ["h2"]}, 20.0, "the pair cut")
    _old_ref_fails_at_once(cluster, "h1", old)
    cluster.topo.heal()
    took = cluster.wait_mesh(HEAL_WITHIN)
    print(f"healed {took:.1f} s after the cut ended")
    # Both declared each other down; the tie-break ends h3 (same number of peers, larger name).
    assert len(cluster["h1"].readies) == 1 and len(cluster["h3"].readies) == 2
    _after_heal(cluster, old, ("h1", "h2"))


@pytest.mark.timeout(240)
def test_a_frozen_host_rejoins_after_it_thaws(cluster: Cluster):
    old, _sup = _before(cluster)
    cluster.topo.freeze("h3")
    cluster.wait_views({"h1": ["h2"], "h2": ["h1"]}, 20.0, "h3 seen down")
    _old_ref_fails_at_once(cluster, "h2", old)
    cluster.topo.thaw("h3")
    start = time.monotonic()
    cluster["h3"].wait_ready(2, timeout=HEAL_WITHIN)  # it learns it was declared down, and starts again
    cluster.wait_mesh(HEAL_WITHIN - (time.monotonic() - start))
    assert len(cluster["h1"].readies) == len(cluster["h2"].readies) == 1
    _after_heal(cluster, old, ("h1", "h2"))
