"""The replicator across nodes: three node processes on 127.0.0.1 sharing a
``_replicator`` file and the databases, every job start/stop and every
nodeup/nodedown written to a shared SQLite audit (`cluster_kit`)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from actors import Node
from actors.replicator import DocStore, delete_replication, put_replication
from actors.replicator.clustering import owner
from actors.replicator.replication import LOCAL_PREFIX
from tests.cluster.netkit import LineProcess
from tests.replicator import cluster_kit

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "cluster_peer.py")
QUIET = 2.0
START = 0.5


class ClusterNode(LineProcess):
    what = "replicator node"

    def __init__(self, name: str, db: str, audit: str, connect_all: bool = True) -> None:
        self.name = name
        super().__init__(
            [
                sys.executable,
                PEER,
                "--name",
                name,
                "--db",
                db,
                "--audit",
                audit,
                "--quiet",
                str(QUIET),
                "--start",
                str(START),
            ]
            + ([] if connect_all else ["--no-connect-all"])
        )

    def connect(self, other: "ClusterNode") -> None:
        self.command(f"connect {other.address}")
        assert self.expect("CONNECT", timeout=20.0) == f"CONNECTED {other.name}"

    def start(self) -> None:
        self.command("start")
        self.expect("STARTED", timeout=30.0)

    def status(self) -> dict[str, Any]:
        self.command("status")
        return json.loads(self.expect("STATUS", timeout=20.0).split(" ", 1)[1])


def wait_until(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Ask ``check`` until it returns something true; fails after ``timeout`` (bounded)."""
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        pause.wait(0.1)
    raise AssertionError(f"not within {timeout} s: {what} (last: {last!r})")


def running_map(nodes: list[ClusterNode]) -> dict[str, list[str]]:
    """job id -> the nodes whose scheduler holds it."""
    where: dict[str, list[str]] = {}
    for node in nodes:
        for job in node.status()["running"]:
            where.setdefault(job, []).append(node.name)
    return where


def make_sources(tmp: Any, count: int, docs: int) -> list[tuple[str, str, str]]:
    out = []
    for i in range(count):
        source, target = str(tmp / f"src{i}.sqlite"), str(tmp / f"tgt{i}.sqlite")
        with DocStore(source, create=True) as store:
            for d in range(docs):
                store.put(f"d{d:03d}", {"i": i, "d": d})
        out.append((f"rep{i}", source, target))
    return out


def checkpointed(source: str, target: str, job_id: str, seq: int) -> bool:
    with DocStore(source) as src:
        log = src.get_local(LOCAL_PREFIX + job_id)
    if not os.path.exists(target):
        return False
    with DocStore(target) as tgt:
        count = len(tgt.changes(0))
    return count >= seq and log is not None and log.body.get("source_last_seq", 0) >= seq


def intervals(audit: list[tuple], dead_until: dict[str, float]) -> dict[str, list[tuple[float, float, str]]]:
    """job -> [(start, end, node)]; a job a killed node left open ends at that node's
    nodedown (the latest a survivor saw), one still running at infinity."""
    open_: dict[tuple[str, str], float] = {}
    out: dict[str, list[tuple[float, float, str]]] = {}
    for kind, node, job, _seq, t in audit:
        if kind == "start":
            begun = open_.pop((job, node), None)
            if begun is not None:  # only a killed incarnation may leave a job open
                assert begun < dead_until.get(node, float("-inf")) < t, f"{job} started twice on {node}"
                out.setdefault(job, []).append((begun, dead_until[node], node))
            open_[(job, node)] = t
        elif kind == "stop":
            out.setdefault(job, []).append((open_.pop((job, node)), t, node))
    for (job, node), t in open_.items():
        dead = dead_until.get(node, float("-inf"))
        out.setdefault(job, []).append((t, dead if t < dead else float("inf"), node))
    return out


def assert_never_twice(audit: list[tuple], dead_until: dict[str, float]) -> int:
    checked = 0
    for job, spans in intervals(audit, dead_until).items():
        spans.sort()
        for (s1, e1, n1), (s2, e2, n2) in zip(spans, spans[1:]):
            assert e1 <= s2, f"job {job} ran on {n1} [{s1}, {e1}] and {n2} [{s2}, {e2}] at once"
            checked += 1
    return checked


@pytest.fixture
def cluster(tmp_path: Any):
    db, audit = str(tmp_path / "_replicator.sqlite"), str(tmp_path / "audit.sqlite")
    cluster_kit.create(audit)
    nodes: list[ClusterNode] = []
    try:
        for name in ("a", "b", "c"):
            nodes.append(ClusterNode(name, db, audit))
        a, b, c = nodes
        a.connect(b)
        a.connect(c)
        b.connect(c)  # a full mesh: nodes do not connect transitively
        started = time.monotonic()
        for node in nodes:
            node.start()
        yield db, audit, nodes, started
    finally:
        for node in nodes:
            node.close()


@pytest.mark.timeout(180)
def test_jobs_spread_fail_over_from_checkpoints_and_move_back(cluster: Any, tmp_path: Any) -> None:
    db, audit, nodes, started = cluster
    a, b, c = nodes
    reps = make_sources(tmp_path, 9, 30)
    for doc_id, source, target in reps:
        put_replication(
            db,
            doc_id,
            source,
            target,
            continuous=True,
            create_target=True,
            checkpoint_interval=200,
            worker_batch_size=10,
        )
    docs = a.status()
    wait_until("every node read the 9 documents", lambda: all(len(n.status()["docs"]) == 9 for n in nodes))
    job_of = {doc_id: job for doc_id, job in a.status()["docs"].items()}
    key_of = {job: f"_replicator/{doc_id}" for doc_id, job in job_of.items()}
    everyone = ["a", "b", "c"]
    want = {job: [owner(key, everyone)] for job, key in key_of.items()}
    assert len(set(w[0] for w in want.values())) >= 2, f"owners not spread: {want}"  # crc32 spreads these 9
    wait_until("each job runs on its owner only", lambda: running_map(nodes) == want)
    for node in nodes:
        status = node.status()
        assert status["stable"] and status["live"] == everyone
        assert sorted(status["owned"]) == sorted(status["running"])
    paths = {job_of[doc_id]: (source, target) for doc_id, source, target in reps}
    wait_until(
        "every job copied and checkpointed its 30 documents",
        lambda: all(checkpointed(s, t, job, 30) for job, (s, t) in paths.items()),
    )

    # SIGKILL c: its jobs move to a and b, but only after the quiet period (a change
    # within a node's first quiet period would need only the start period: mem3's rule)
    wait_until("the nodes' first quiet period is over", lambda: time.monotonic() - started > QUIET + 0.2)
    c_jobs = sorted(j for j, w in want.items() if w == ["c"])
    assert c_jobs, "c owns no job"
    c.signal(9)
    c.proc.wait(timeout=20)
    survivors = ["a", "b"]
    want_after = {job: [owner(key, survivors)] for job, key in key_of.items()}
    wait_until("c's jobs run on their new owners", lambda: running_map([a, b]) == want_after, timeout=40.0)
    events = cluster_kit.read(audit)
    down_at = {node: t for kind, node, name, _s, t in events if kind == "nodedown" and name == "c"}
    assert set(down_at) == {"a", "b"}
    for kind, node, job, seq, t in events:
        if kind == "start" and job in c_jobs and node in survivors:
            # the audit actor and the clustering server hear of nodedown at slightly different
            # times; 0.3 s of slack still tells the quiet period (2 s) from the start period (0.5 s)
            assert t - down_at[node] >= QUIET - 0.3, f"{job} started on {node} {t - down_at[node]:.2f} s after nodedown"
            assert seq == 30, f"{job} on {node} resumed from seq {seq}, not from its checkpoint (30)"

    # c comes back (a new incarnation, same name): its jobs move back to it
    c2 = ClusterNode("c", db, audit)
    nodes.append(c2)
    c2.connect(a)
    c2.connect(b)
    c2.start()
    wait_until("c's jobs are back on c", lambda: running_map([a, b, c2]) == want, timeout=40.0)
    events = cluster_kit.read(audit)
    back = [(node, seq) for kind, node, job, seq, t in events if kind == "start" and node == "c" and job in c_jobs]
    assert len(back) == 2 * len(c_jobs)  # the first incarnation's starts and the second's
    assert all(seq == 30 for node, seq in back[len(c_jobs) :]), back

    # nobody ran a job while another node ran it; c's first incarnation counts until its nodedown
    assert assert_never_twice(events, {"c": max(down_at.values())}) >= 2 * len(c_jobs)
    # the documents: every target has all of its source's, none lost
    for _doc, source, target in reps:
        with DocStore(source) as s, DocStore(target) as t:
            assert {ch.id for ch in s.changes(0)} == {ch.id for ch in t.changes(0)}
    assert docs["node"] == "a"
    # a deleted document's job stops wherever it runs
    first = reps[0][0]
    assert delete_replication(db, first)
    gone = job_of[first]
    wait_until("the deleted document's job stopped", lambda: gone not in running_map([a, b, c2]))


@pytest.mark.timeout(120)
def test_a_partial_mesh_claims_nothing_and_a_node_without_replicator_owns_nothing(tmp_path: Any) -> None:
    """c is connected to a only: a sees members a, b, c while b sees a, b and c sees a, c.
    Owners computed from different lists could run a job twice, so nobody claims until
    b and c connect.  A node that runs no replicator (this test's own) is no member.
    (Nodes with ``connect_all`` on, the default, would close the mesh themselves.)"""
    db, audit = str(tmp_path / "_replicator.sqlite"), str(tmp_path / "audit.sqlite")
    cluster_kit.create(audit)
    reps = make_sources(tmp_path, 6, 5)
    for doc_id, source, target in reps:
        put_replication(db, doc_id, source, target, continuous=True, create_target=True)
    nodes: list[ClusterNode] = []
    try:
        with Node(name="driver", listen="tcp://127.0.0.1:0", connect_all=False) as driver:
            for name in ("a", "b", "c"):
                nodes.append(ClusterNode(name, db, audit, connect_all=False))
            a, b, c = nodes
            a.connect(b)
            a.connect(c)
            for node in nodes:
                driver.connect(node.address)
                node.start()
            views = wait_until(
                "every node is past its quiet period, seeing its own members",
                lambda: (
                    [s for s in (n.status() for n in nodes) if s["quiet"] and len(s["docs"]) == 6]
                    if all(n.status()["quiet"] for n in nodes)
                    else None
                ),
                timeout=30.0,
            )
            assert {s["node"]: s["live"] for s in views} == {"a": ["a", "b", "c"], "b": ["a", "b"], "c": ["a", "c"]}
            assert all(s["disagree"] and not s["stable"] and s["running"] == [] for s in views)
            assert sorted(driver.nodes()) == ["a", "b", "c"]
            b.connect(c)
            job_of = a.status()["docs"]
            want = {job_of[doc_id]: [owner(f"_replicator/{doc_id}", "abc")] for doc_id, _s, _t in reps}
            wait_until("each job runs on its owner among a, b, c", lambda: running_map(nodes) == want)
            assert all(n.status()["live"] == ["a", "b", "c"] for n in nodes)  # never "driver"
            settled = time.time()
    finally:
        for node in nodes:
            node.close()
    # Up to here each job ran once, on its owner.  (The nodes close one by one, and a node
    # still closing may take over the jobs of one already gone: failover, not a double claim.)
    rows = [row for row in cluster_kit.read(audit) if row[4] <= settled]
    assert assert_never_twice(rows, {}) == 0, intervals(rows, {})


@pytest.mark.timeout(60)
def test_one_clustered_node_from_the_config_alone(tmp_path: Any) -> None:
    """``[replicator] cluster = true`` is all a tree started without options (as couch_sup
    starts it, in a host process) needs; a lone node owns every job, and a document's
    deletion stops its job."""
    from actors.replicator import ReplicationJob, ReplicatorSup, cluster_status

    db = str(tmp_path / "_replicator.sqlite")
    reps = make_sources(tmp_path, 3, 4)
    for doc_id, source, target in reps:
        put_replication(db, doc_id, source, target, continuous=True, create_target=True)
    config = {
        "replicator": {
            "cluster": "true",
            "replicator_db": db,
            "cluster_start_period": "0.2",
            "doc_poll_interval": "0.1",
        }
    }
    with Node(config, name="solo", listen="tcp://127.0.0.1:0") as node:
        node.spawn(ReplicatorSup, ReplicationJob, None, name="couch_replicator_sup", host="own")
        status = wait_until(
            "the lone node runs the three jobs",
            lambda: (lambda s: s if len(s["running"]) == 3 else None)(cluster_status(node)),
        )
        assert status["live"] == ["solo"] and status["stable"] and status["owned"] == status["running"]
        assert delete_replication(db, reps[1][0])
        wait_until("the deleted document's job stopped", lambda: len(cluster_status(node)["running"]) == 2)
