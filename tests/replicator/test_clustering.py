"""Replication jobs over nodes: upstream's owner hash and cluster stability, pure."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.clock import FakeClock
from actors.config import Config
from actors.replicator.clustering import DEFAULT_QUIET_PERIOD, DEFAULT_START_PERIOD, Membership, job_key, owner, plan
from actors.replicator.settings import InvalidSetting, Settings

# -- owner: hd(rotate_list(Key, lists:usort(Nodes))) --------------------------


def rotate_list(key: bytes, nodes: list[str]) -> list[str]:
    """mem3_util:rotate_list/2, transcribed as the reference."""
    if not nodes:
        return []
    n = zlib.crc32(key) % len(nodes)
    return nodes[n:] + nodes[:n]


@given(st.text(min_size=1), st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=8))
def test_owner_is_the_head_of_the_rotated_sorted_node_list(key, nodes):
    assert owner(key, nodes) == rotate_list(key.encode(), sorted(set(nodes)))[0]


def test_owner_known_values_and_order_independence():
    key = "_replicator/doc1"
    crc = zlib.crc32(key.encode())
    nodes = ["c", "a", "b"]
    assert owner(key, nodes) == ["a", "b", "c"][crc % 3]
    assert owner(key, ["b", "c", "a", "a"]) == owner(key, nodes)
    assert owner(key.encode(), nodes) == owner(key, nodes)
    assert owner("anything", ["solo"]) == "solo"
    with pytest.raises(ValueError, match="no live node"):
        owner(key, [])
    with pytest.raises(TypeError):
        owner(12, nodes)


def test_jobs_spread_over_nodes():
    nodes = ["n1", "n2", "n3"]
    counts = {n: 0 for n in nodes}
    for i in range(3000):
        counts[owner(f"_replicator/doc{i}", nodes)] += 1
    assert all(800 < c < 1200 for c in counts.values()), counts


def test_job_key():
    assert job_key("_replicator", "d") == "_replicator/d"
    assert job_key(None, "d") is None and job_key("db", None) is None


# -- Membership: mem3_cluster's stability (upstream's t_stable/t_unstable_callback) --


def test_defaults_are_upstreams():
    assert (DEFAULT_QUIET_PERIOD, DEFAULT_START_PERIOD) == (60.0, 5.0)
    s = Settings()
    assert (s.cluster_quiet_period, s.cluster_start_period) == (60.0, 5.0)
    s = Settings.from_config(Config({"replicator": {"cluster_quiet_period": "2", "cluster_start_period": "0.5"}}))
    assert (s.cluster_quiet_period, s.cluster_start_period) == (2.0, 0.5)
    with pytest.raises(InvalidSetting, match="cluster_quiet_period"):
        Settings.from_config(Config({"replicator": {"cluster_quiet_period": "-1"}}))
    assert s.with_value("cluster_quiet_period", "30").cluster_quiet_period == 30.0


def test_starts_unstable_and_is_stable_after_the_start_period():
    clock = FakeClock(1000.0)
    m = Membership("a", clock.now())
    assert not m.is_stable(clock.now())
    assert m.next_check() == 1005.0
    clock.advance(4.999)
    assert not m.is_stable(clock.now())
    clock.advance(0.001)
    assert m.is_stable(clock.now()) and m.next_check() is None
    assert m.live == ("a",)


def test_a_change_makes_it_unstable_then_stable_again():
    m = Membership("a", 0.0, nodes=["b"])
    assert m.is_stable(10.0)
    assert m.node_up("c", 100.0)  # after the first quiet period: full quiet period
    assert not m.is_stable(100.0) and m.next_check() == 160.0
    assert not m.is_stable(159.9)
    assert m.is_stable(160.0)
    assert m.live == ("a", "b", "c")


def test_changes_during_start_up_use_the_start_period():
    m = Membership("a", 0.0)
    assert m.node_up("b", 50.0)
    assert not m.is_stable(54.9) and m.is_stable(55.0)


def test_a_change_near_the_end_of_start_up_waits_a_full_quiet_period():
    m = Membership("a", 0.0)
    m.node_up("b", 58.0)  # check at 63 is past start-up: needs 60 s of quiet
    assert not m.is_stable(63.0)
    assert m.next_check() == 123.0
    assert not m.is_stable(122.9) and m.is_stable(123.0)


def test_every_change_restarts_the_quiet_period_and_repeats_are_not_changes():
    m = Membership("a", 0.0, nodes=["b", "c"])
    m.is_stable(100.0)
    assert m.node_down("c", 100.0)
    assert not m.node_down("c", 110.0)  # already down
    assert not m.node_up("b", 110.0)  # already up
    assert m.node_up("d", 130.0)
    assert not m.is_stable(189.9) and m.is_stable(190.0)
    assert m.changes == 2 and m.last_change == 130.0
    with pytest.raises(ValueError, match="this node"):
        m.node_down("a", 200.0)


def test_a_late_question_runs_the_checks_that_fell_due():
    m = Membership("a", 0.0)
    assert m.is_stable(10_000.0)


def test_quiet_period_can_change_at_run_time():
    m = Membership("a", 0.0, quiet_period=60, start_period=5)
    m.is_stable(100.0)
    m.node_up("b", 100.0)
    m.set_quiet_period(10, 101.0)
    assert m.next_check() == 110.0
    assert not m.is_stable(109.0) and m.is_stable(110.0)
    with pytest.raises(ValueError):
        m.set_quiet_period(-1, 120.0)
    with pytest.raises(ValueError):
        Membership("", 0.0)


# -- plan: what this node starts and stops ------------------------------------------

JOBS = {f"job{i}": f"_replicator/doc{i}" for i in range(60)}


def test_stable_plan_runs_exactly_the_owned_jobs():
    live = ["a", "b", "c"]
    p = plan(JOBS, running=[], me="a", live_nodes=live, stable=True)
    assert p.stable and p.start == p.owned
    assert p.owned == {j for j, k in JOBS.items() if owner(k, live) == "a"}
    p2 = plan(JOBS, running=["job0", "job1", "job2"], me="a", live_nodes=live, stable=True)
    assert p2.stop == {"job0", "job1", "job2"} - p.owned
    assert p2.start == p.owned - {"job0", "job1", "job2"}


def test_unstable_plan_claims_and_releases_nothing():
    running = [j for j, k in JOBS.items() if owner(k, ["a", "b"]) == "a"]
    p = plan(JOBS, running=running, me="a", live_nodes=["a"], stable=False)
    assert not p.stable and p.start == frozenset() and p.stop == frozenset()


def test_transient_jobs_belong_to_their_node_and_deleted_jobs_always_stop():
    jobs = {"t1": None, "d1": "_replicator/x"}
    p = plan(jobs, running=["gone"], me="a", live_nodes=["a", "b"], stable=False)
    assert p.start == {"t1"} and p.stop == {"gone"}
    p = plan(jobs, running=["t1", "gone"], me="a", live_nodes=["a", "b"], stable=True)
    assert "t1" in p.owned and "t1" not in p.stop and "gone" in p.stop


def test_a_job_another_live_node_still_runs_is_not_started():
    live = ["a", "b"]
    mine = next(j for j, k in JOBS.items() if owner(k, live) == "a")
    p = plan(JOBS, running=[], me="a", live_nodes=live, stable=True, running_elsewhere={mine: "b"})
    assert mine in p.owned and mine not in p.start
    p = plan(JOBS, running=[], me="a", live_nodes=live, stable=True, running_elsewhere={mine: "dead"})
    assert mine in p.start


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1))
def test_with_one_membership_every_job_has_exactly_one_runner(live):
    owners = {n: plan(JOBS, [], n, live, True).owned for n in live}
    for job in JOBS:
        assert sum(job in owned for owned in owners.values()) == 1


class Cluster:
    """Three nodes, each with its own Membership and running set, on one fake clock."""

    def __init__(self, clock: FakeClock, names=("a", "b", "c"), quiet=60.0, start=5.0) -> None:
        self.clock = clock
        self.quiet, self.start = quiet, start
        self.members = {n: Membership(n, clock.now(), quiet, start, nodes=names) for n in names}
        self.running: dict[str, set[str]] = {n: set() for n in names}

    def step(self) -> None:
        now = self.clock.now()
        elsewhere = {j: n for n, js in self.running.items() for j in js}
        for name, m in self.members.items():
            p = plan(
                JOBS,
                self.running[name],
                name,
                m.live,
                m.is_stable(now),
                {j: n for j, n in elsewhere.items() if n != name},
            )
            self.running[name] -= p.stop
            self.running[name] |= p.start
        self.assert_no_job_twice()

    def assert_no_job_twice(self) -> None:
        seen: dict[str, str] = {}
        for name, jobs in self.running.items():
            for j in jobs:
                assert j not in seen, f"{j} runs on {seen[j]} and {name}"
                seen[j] = name

    def kill(self, name: str) -> None:
        del self.members[name]
        del self.running[name]
        for m in self.members.values():
            m.node_down(name, self.clock.now())

    def revive(self, name: str) -> None:
        names = list(self.members) + [name]
        for m in self.members.values():
            m.node_up(name, self.clock.now())
        self.members[name] = Membership(name, self.clock.now(), self.quiet, self.start, nodes=names)
        self.running[name] = set()

    def run_for(self, seconds: float, step: float = 1.0) -> None:
        for _ in range(int(seconds / step)):
            self.clock.advance(step)
            self.step()


def test_failover_after_the_quiet_period_and_failback_without_a_job_on_two_nodes():
    clock = FakeClock(0.0)
    c = Cluster(clock)
    c.step()
    assert not any(c.running.values())  # unstable at start: nothing claimed
    c.run_for(6)
    assert set().union(*c.running.values()) == set(JOBS)
    c_jobs = set(c.running["c"])
    assert c_jobs
    c.run_for(100)
    c.kill("c")  # t = 106: survivors unstable for 60 s
    c.run_for(59)
    assert not (c_jobs & (c.running["a"] | c.running["b"]))
    c.run_for(2)
    assert set(c.running["a"] | c.running["b"]) == set(JOBS)
    c.run_for(100)
    c.revive("c")  # c is stable after 5 s, a and b after 60 s
    c.run_for(30)
    assert c.running["c"] == set()  # its jobs still run on a and b
    c.run_for(40)
    assert c.running["c"] == c_jobs  # handed back once a and b released them
    assert set().union(*c.running.values()) == set(JOBS)
