"""The clustering server's state, the _replicator documents and the cluster options: pure
(and one SQLite file), no processes."""

from __future__ import annotations

from typing import Any

import pytest

from actors.config import Config
from actors.replicator import DocStore
from actors.replicator.cluster_options import ClusterOptions
from actors.replicator.cluster_state import ClusterState, PeerReport
from actors.replicator.clustering import owner, plan
from actors.replicator.replicator_db import (
    BadReplicationDoc,
    ReplicatorDb,
    delete_replication,
    put_replication,
    rep_from_doc,
    replication_id,
)
from actors.replicator.settings import InvalidSetting


def joined(me: str = "a", quiet: float = 10.0, start: float = 1.0) -> ClusterState:
    """a, with b and c members that agree, checked long after start."""
    state = ClusterState(me, 0.0, quiet, start)
    for node in ("b", "c"):
        state.hello(node, PeerReport(("a", "b", "c"), frozenset()), 0.0)
    return state


# -- membership through hello, stability, agreement ------------------------------


def test_members_are_the_nodes_that_said_hello_and_stability_waits_for_quiet() -> None:
    state = ClusterState("a", 0.0, 10.0, 1.0)
    assert state.live == ("a",)
    assert state.hello("b", PeerReport(("a", "b"), frozenset()), 0.5) is True
    assert state.hello("b", PeerReport(("a", "b"), frozenset({"j"})), 0.6) is False  # again: not new
    assert state.live == ("a", "b")
    assert not state.view(1.4).stable  # changed at 0.5: the start period (1 s) has not passed
    view = state.view(1.6)
    assert view.stable and view.quiet and view.disagree == () and view.elsewhere == {"j": "b"}
    with pytest.raises(ValueError):
        state.hello("a", PeerReport(("a",), frozenset()), 2.0)


def test_a_member_that_sees_other_members_holds_claims_back() -> None:
    state = ClusterState("a", 0.0, 10.0, 1.0)
    state.hello("b", PeerReport(("a", "b"), frozenset()), 0.0)
    state.hello("c", PeerReport(("a", "c"), frozenset()), 0.0)  # c is not connected to b
    view = state.view(5.0)
    assert view.quiet and not view.stable and view.disagree == ("b", "c")
    state.peer_report("b", PeerReport(("a", "b", "c"), frozenset()))
    state.peer_report("c", PeerReport(("a", "b", "c"), frozenset()))
    assert state.view(5.0).stable


def test_node_down_forgets_the_report_and_restarts_the_quiet_period() -> None:
    state = joined()
    state.peer_report("c", PeerReport(("a", "b", "c"), frozenset({"j1", "j2"})))
    assert state.view(20.0).stable and state.view(20.0).elsewhere == {"j1": "c", "j2": "c"}
    assert state.node_down("c", 30.0) is True
    assert state.node_down("c", 30.0) is False
    assert state.node_down("x", 30.0) is False  # never a member
    view = state.view(35.0)
    assert not view.stable and view.elsewhere == {}
    assert state.next_check() == 40.0  # quiet period after the change
    state.peer_report("b", PeerReport(("a", "b"), frozenset()))
    assert state.view(40.0).stable
    assert state.peer_report("c", PeerReport(("a", "b", "c"), frozenset())) is False  # not a member now


def test_set_running_is_the_report_sent_to_members() -> None:
    state = joined()
    assert state.set_running(["j1"]) is True
    assert state.set_running(("j1",)) is False
    assert state.report() == PeerReport(("a", "b", "c"), frozenset({"j1"}))


def test_failover_and_return_never_give_one_job_two_nodes() -> None:
    """The sequence of the three-node test on the states alone: c is lost, a takes its job
    after the quiet period, c returns and is stable first, yet starts the job only once a
    has stopped it and said so."""
    key = next(k for k in (f"_replicator/d{i}" for i in range(100)) if owner(k, "abc") == "c" and owner(k, "ab") == "a")
    jobs = {"j": key}
    a = joined("a")
    a.node_down("c", 100.0)
    a.peer_report("b", PeerReport(("a", "b"), frozenset()))
    assert plan(jobs, (), "a", a.live, a.view(105.0).stable, a.view(105.0).elsewhere).start == frozenset()
    v = a.view(110.0)
    assert plan(jobs, (), "a", v.live, v.stable, v.elsewhere).start == {"j"}
    a.set_running(["j"])
    # c comes back: its own state starts, hears a and b (a runs j)
    c = ClusterState("c", 200.0, 10.0, 1.0)
    c.hello("a", PeerReport(("a", "b", "c"), frozenset({"j"})), 200.0)
    c.hello("b", PeerReport(("a", "b", "c"), frozenset()), 200.0)
    a.hello("c", PeerReport(("a", "b", "c"), frozenset()), 200.0)
    a.peer_report("b", PeerReport(("a", "b", "c"), frozenset()))
    vc = c.view(202.0)  # c is past its start period, a is not past its quiet period
    assert vc.stable and plan(jobs, (), "c", vc.live, vc.stable, vc.elsewhere).start == frozenset()
    va = a.view(202.0)
    assert plan(jobs, ["j"], "a", va.live, va.stable, va.elsewhere).stop == frozenset()  # unstable: keeps it
    va = a.view(210.0)
    assert plan(jobs, ["j"], "a", va.live, va.stable, va.elsewhere).stop == {"j"}
    a.set_running([])
    c.peer_report("a", a.report())
    vc = c.view(210.5)
    assert plan(jobs, (), "c", vc.live, vc.stable, vc.elsewhere).start == {"j"}


# -- _replicator documents -----------------------------------------------------------


def test_rep_from_doc_and_a_stable_replication_id() -> None:
    rep = rep_from_doc(
        "d1", {"source": "/s", "target": "/t", "continuous": True, "worker_batch_size": 5, "owner": "bob"}
    )
    assert rep.db_name == "_replicator" and rep.doc_id == "d1" and rep.user == "bob"
    assert rep.source == "/s" and rep.target == "/t" and rep.continuous
    assert rep.options == {"continuous": True, "worker_batch_size": 5}
    assert rep.id.endswith("+continuous")
    # tuning options do not change the id (nor the checkpoint); what is replicated does
    assert rep.id == replication_id("/s", "/t", {"continuous": True, "worker_batch_size": 500})
    assert rep.id != replication_id("/s", "/t2", {"continuous": True})
    assert rep.id != replication_id("/s", "/t", {"continuous": False})
    assert rep_from_doc("d2", {"source": "/s", "target": "/t", "continuous": True}).id == rep.id


@pytest.mark.parametrize(
    "body, field",
    [
        ({"target": "/t"}, "source"),
        ({"source": "", "target": "/t"}, "source"),
        ({"source": "/s", "target": 3}, "target"),
        ({"source": "/s", "target": "/t", "continuous": "yes"}, "continuous"),
        ({"source": "/s", "target": "/t", "owner": 1}, "owner"),
        ([1, 2], "object"),
    ],
)
def test_bad_replication_docs_name_the_field(body: Any, field: str) -> None:
    with pytest.raises(BadReplicationDoc) as info:
        rep_from_doc("bad", body)
    assert field in str(info.value) and "'bad'" in str(info.value)


def test_the_replicator_db_changes_feed(tmp_path: Any) -> None:
    path = str(tmp_path / "_replicator.sqlite")
    db = ReplicatorDb(path)
    try:
        assert db.poll() == {}  # created on first use
        put_replication(path, "d1", "/s1", "/t1", continuous=True)
        put_replication(path, "d2", "/s2", "/t2")
        assert db.poll() == {
            "d1": {"source": "/s1", "target": "/t1", "continuous": True},
            "d2": {"source": "/s2", "target": "/t2", "continuous": False},
        }
        assert db.poll() == {}
        put_replication(path, "d1", "/s1", "/t9", continuous=True)  # replaced
        assert delete_replication(path, "d2") is True
        assert delete_replication(path, "d2") is False
        assert db.poll() == {"d1": {"source": "/s1", "target": "/t9", "continuous": True}, "d2": None}
        with pytest.raises(BadReplicationDoc):
            put_replication(path, "d3", "", "/t")
        with DocStore(path) as store:
            assert store.get("d3") is None  # a bad document is never written
    finally:
        db.close()


# -- [replicator] cluster, replicator_db, doc_poll_interval -----------------------------


def test_cluster_options_from_config() -> None:
    assert ClusterOptions.from_config(Config({})) == ClusterOptions(False, None, 1.0)
    got = ClusterOptions.from_config(
        Config({"replicator": {"cluster": "true", "replicator_db": "/r.sqlite", "doc_poll_interval": "0.25"}})
    )
    assert got == ClusterOptions(True, "/r.sqlite", 0.25)
    for section, key in (
        ({"cluster": "maybe"}, "cluster"),
        ({"cluster": "true"}, "replicator_db"),
        ({"doc_poll_interval": "0"}, "doc_poll_interval"),
        ({"doc_poll_interval": "soon"}, "doc_poll_interval"),
    ):
        with pytest.raises(InvalidSetting) as info:
            ClusterOptions.from_config(Config({"replicator": section}))
        assert info.value.key == key
