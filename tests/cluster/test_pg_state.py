"""`actors._core.cluster.pg_state`: the bookkeeping of a pg scope, as plain data (no processes)."""

from __future__ import annotations

from actors._core.cluster.pg_state import PgState


def test_local_join_leave_with_multiplicity() -> None:
    s = PgState()
    assert s.join_local("g", ["x", "y"]) == [("join", "g", ["x", "y"])]
    assert s.join_local("g", ["x"]) == [("join", "g", ["x"])]
    assert s.local_members("g") == ["x", "y", "x"]
    assert s.leave_local("g", ["x"]) == [("leave", "g", ["x"])]
    assert s.local_members("g") == ["y", "x"]
    assert s.leave_local("g", ["nobody"]) == []
    assert s.leave_local("other", ["x"]) == []
    assert s.local_groups_of("x") == ["g"]


def test_a_dead_local_member_leaves_every_group_and_every_membership() -> None:
    s = PgState()
    s.join_local("a", ["x", "x", "y"])
    s.join_local("b", ["x"])
    assert s.local_died("x") == [("leave", "a", ["x", "x"]), ("leave", "b", ["x"])]
    assert s.local_members("a") == ["y"] and s.local_members("b") == []
    assert s.which_groups() == ["a"]
    assert not s.is_local_member("x")


def test_peer_sync_replaces_and_reports_only_the_difference() -> None:
    s = PgState()
    s.join_local("g", ["l1"])
    assert s.add_peer("p1") and not s.add_peer("p1")
    assert s.sync_peer("p1", {"g": ["r1", "r2"], "h": ["r3"]}) == [("join", "g", ["r1", "r2"]), ("join", "h", ["r3"])]
    assert s.members("g") == ["l1", "r1", "r2"]
    # a second sync (the peer reconnected): r2 gone, r4 new, h unchanged
    assert s.sync_peer("p1", {"g": ["r1", "r4"], "h": ["r3"]}) == [("join", "g", ["r4"]), ("leave", "g", ["r2"])]
    assert s.sync_peer("p1", {"g": ["r1", "r4"], "h": ["r3"]}) == []


def test_deltas_from_unknown_peers_are_ignored_and_a_dropped_peer_leaves() -> None:
    s = PgState()
    assert s.remote_join("ghost", "g", ["r"]) == []
    s.sync_peer("p", {})
    assert s.knows("p")
    assert s.remote_join("p", "g", ["r1", "r2"]) == [("join", "g", ["r1", "r2"])]
    assert s.remote_leave("p", "g", ["r1", "nope"]) == [("leave", "g", ["r1"])]
    assert s.remote_leave("p", "none", ["r1"]) == []
    s.remote_join("p", "h", ["r3"])
    assert s.drop_peer("p") == [("leave", "g", ["r2"]), ("leave", "h", ["r3"])]
    assert s.members("g") == [] and s.which_groups() == []
    assert s.drop_peer("p") == []


def test_incarnations_are_distinct_peers() -> None:
    """A restarted node's scope is another peer: the old one's members go with it."""
    s = PgState()
    s.sync_peer("b@1|scope", {"g": ["b@1|w"]})
    s.sync_peer("b@2|scope", {"g": ["b@2|w"]})
    assert s.drop_peer("b@1|scope") == [("leave", "g", ["b@1|w"])]
    assert s.members("g") == ["b@2|w"]


def test_watchers() -> None:
    s = PgState()
    assert s.watch("g", "w") and not s.watch("g", "w")
    s.watch("h", "w")
    assert s.watchers_of("g") == ["w"] and s.is_watching("w")
    assert s.unwatch("g", "w") and not s.unwatch("g", "w")
    s.watcher_died("w")
    assert not s.is_watching("w") and s.watchers_of("h") == []
