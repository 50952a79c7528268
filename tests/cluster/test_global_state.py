"""`actors._core.cluster.global_state`: the name table, its locks and the clash rule (no processes)."""

from __future__ import annotations

from actors._core.cluster.global_state import NameTable, keeps, node_name_of
from actors._core.wire.ref import ActorRef


def ref(node_id: str, actor: str) -> ActorRef:
    return ActorRef(node_id, "n", actor, 0)


A1, B1, C1 = ref("a@1", "n.1"), ref("b@2", "n.1"), ref("c@3", "n.7")


def test_lock_commit_and_the_holder_each_copy_reports() -> None:
    t = NameTable()
    assert t.lock("x", ("a@1", "t1")) == ("ok", None)
    assert t.lock("x", ("b@2", "t2")) == ("busy", None)  # another registration holds it
    assert t.lock("x", ("a@1", "t1")) == ("ok", None)  # the owner asking again
    assert t.commit("x", A1, ("a@1", "t1"))
    assert t.whereis("x") == A1 and t.locks == {}
    assert t.lock("x", ("b@2", "t2")) == ("ok", A1)  # free to lock, but held: b's register fails
    assert t.unlock("x", ("b@2", "t2")) and not t.unlock("x", ("b@2", "t2"))


def test_a_commit_without_the_lock_is_refused() -> None:
    t = NameTable()
    assert not t.commit("x", A1, ("a@1", "late"))  # its lease ran out
    t.lock("x", ("a@1", "t"))
    assert not t.commit_drop("x", A1, ("b@2", "u"))
    assert t.commit("x", A1, ("a@1", "t"))
    t.lock("x", ("b@2", "u"))
    assert t.commit_drop("x", A1, ("b@2", "u")) and t.whereis("x") is None


def test_a_lost_requester_node_releases_its_locks_and_a_dead_holder_its_names() -> None:
    t = NameTable()
    t.lock("x", ("a@1", "t"))
    t.lock("y", ("b@2", "u"))
    assert t.release_locks_of("a@1") == ["x"]
    assert list(t.locks) == ["y"]
    t.names.update({"p": A1, "q": A1, "r": B1})
    assert t.holder_gone(A1) == ["p", "q"] and t.names == {"r": B1}
    assert t.held_on("b@2") == {"r": B1} and t.held_on("a@1") == {}


def test_the_clash_rule_is_the_same_on_every_node() -> None:
    assert keeps(A1, B1) is A1 and keeps(B1, A1) is A1
    assert keeps(C1, B1) is B1
    assert node_name_of(C1) == "c"
    # on a's side and on b's side, each merging the other's names
    side_a, side_b = NameTable(), NameTable()
    side_a.names["x"] = A1
    side_b.names.update({"x": B1, "y": B1})
    assert side_a.merge(side_b.held_on("b@2")) == (["y"], [("x", A1, B1)])
    assert side_b.merge({"x": A1}) == ([], [("x", A1, B1)])
    assert side_a.names == side_b.names == {"x": A1, "y": B1}
    assert side_a.merge({"x": A1}) == ([], [])  # already agreed: nothing to do
