"""``actors.pg`` on one node: scopes, subscriptions, errors (fast; the
three-node behaviour is tests/cluster/test_pg.py)."""

from __future__ import annotations

from typing import Iterator

import pytest

from actors import Node, SpawnError, pg
from tests.cluster.group_actors import Member, ViewWatcher


@pytest.fixture
def node() -> Iterator[Node]:
    with Node() as n:
        pg.start(n)
        yield n


def test_scopes_are_independent(node: Node) -> None:
    pg.start(node, scope="other")
    m = node.spawn(Member)
    pg.join("g", m, scope="other")
    assert pg.members("g", scope="other") == [m]
    assert pg.members("g") == [] and pg.which_groups() == []
    with pytest.raises(LookupError):
        pg.members("g", scope="never-started")
    with pytest.raises(SpawnError):
        pg.start(node, scope="other")  # one server per scope and node


def test_monitor_demonitor_and_a_dead_subscriber(node: Node) -> None:
    m1, m2 = node.spawn(Member), node.spawn(Member, host="own")
    pg.join("g", m1)
    w = node.spawn(ViewWatcher, ["g"])  # its init called pg.monitor: it saw m1 already there
    assert w.call(("view",)) == {"g": [m1]}
    pg.join("g", [m2, m2])  # twice: a member twice
    assert w.call(("await", {"g": [m1, m2, m2]})) == "ok"
    assert pg.leave("g", m2) is True
    assert sorted(map(repr, pg.local_members("g"))) == sorted(map(repr, [m1, m2]))
    assert w.call(("await", {"g": [m1, m2]})) == "ok"
    assert pg.demonitor("g", w) is True and pg.demonitor("g", w) is False
    pg.join("g", m1)
    assert w.call(("events",))[-1] == ("leave", "g", [m2])  # nothing after the demonitor
    w2 = node.spawn(ViewWatcher, ["g"])
    scope = node.whereis(pg.scope_name(pg.DEFAULT_SCOPE))
    node.stop(w2)
    pg.join("g", m2)  # the scope sends nothing to a dead subscriber, and forgets it
    assert pg.broadcast("g", "hi") == 4
    assert scope.is_alive()


def test_bad_requests_are_refused(node: Node) -> None:
    with pytest.raises(TypeError):
        pg.join("g", "not a ref")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        pg.monitor("g")  # outside an actor, the subscriber must be named
    assert pg.leave("g", node.spawn(Member)) is False
