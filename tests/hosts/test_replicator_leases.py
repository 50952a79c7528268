"""The clustered replicator on PostgreSQL with leases, on namespace hosts, under host and network faults.

Each test starts ``otpy node`` on h1, h2 and h3 with ``[replicator] store``
(and ``replicator_db``) on the database host's PostgreSQL (a database of its
own per test), six continuous replications and a writer updating their
sources; it injects one fault, heals it, and reads the history with the
checkers of ``tests/replicator/pg_fault_kit.py``:

- the store's audit of runs: no two runs of one job overlap (`overlapping_runs`);
- liveness: every job runs again within ``cluster_quiet_period + lease TTL +
  10 s`` of the fault;
- every write the store acknowledged at a source is in its target, at the
  source's latest revision.

The faults: a node's host SIGKILLed (then the node started again), frozen
(SIGSTOP) past the lease, cut from the other nodes only (the store reachable
by all), cut from the store only, and one pair of nodes cut apart.  The test
reads the store over its unix socket, so no fault reaches it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from actors.replicator import put_replication
from actors.replicator.lease import read_runs
from tests.hosts.conftest import HOSTS, NET_TICKTIME
from tests.hosts.nodes import PORT, Cluster, HostNode
from tests.hosts.postgres_host import PostgresHost
from tests.hosts.topology import Topology
from tests.replicator.pg_fault_kit import (
    LIVENESS,
    QUIET,
    TTL,
    Writer,
    assert_all_replicated,
    assert_no_overlap,
    running_jobs,
    wait_until,
)
from tests.replicator.pg_kit import make_pg_sources

JOBS = 6
HEAL_WITHIN = 2 * NET_TICKTIME + 10.0
_count = iter(range(1_000_000))


@dataclass
class Env:
    url: str  # the test's way to the store (unix socket)
    cluster: Cluster
    config: str
    key: str
    pairs: list[tuple[str, str]]
    jobs: list[str]
    writer: Writer


def _config(tmp_path, node_url: str) -> str:
    """The nodes' ini file: the clustered replicator on the database host's PostgreSQL, short periods."""
    path = os.path.join(str(tmp_path), "node.ini")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(
            "[couch]\nreplicator_job_host = none\n"  # jobs run in the node process: a freeze stops them
            f"[replicator]\ncluster = true\ncluster_quiet_period = {QUIET:g}\ncluster_start_period = 0.5\n"
            f"doc_poll_interval = 0.2\nbackoff_interval = 0.5\nreplicator_db = {node_url}\n"
            f"store = {node_url}\nlease_ttl = {TTL:g}\n"
        )
    return path


@pytest.fixture
def env(topo: Topology, postgres: PostgresHost, cluster_key: str, tmp_path) -> Iterator[Env]:
    import psycopg

    database = f"repl_{os.getpid()}_{next(_count)}"
    with psycopg.connect(postgres.local_url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    url = postgres.local_url(database)
    node_url = f"postgresql://postgres@{postgres.host.address}:{postgres.port}/{database}"
    cluster = writer = None
    try:
        reps = make_pg_sources(url, JOBS, 10)
        for doc_id, source, target in reps:
            put_replication(
                url,
                doc_id,
                source,
                target,
                continuous=True,
                create_target=True,
                checkpoint_interval=300,
                worker_batch_size=5,
                worker_processes=1,
            )
        config = _config(tmp_path, node_url)
        cluster = Cluster(topo, HOSTS, cluster_key, NET_TICKTIME, config=config, workdir=str(tmp_path))
        cluster.wait_mesh(60.0)
        running = wait_until(
            f"all {JOBS} jobs run", lambda: (lambda r: r if len(r) == JOBS else None)(running_jobs(url)), timeout=90.0
        )
        writer = Writer(url, [s for _d, s, _t in reps])
        yield Env(url, cluster, config, cluster_key, [(s, t) for _d, s, t in reps], sorted(running), writer)
    finally:
        if writer is not None:
            writer.stop()
        try:
            topo.heal()
        finally:
            if cluster is not None:
                cluster.close()
            with psycopg.connect(postgres.local_url("postgres"), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def busiest(env: Env) -> str:
    """The host whose node runs the most jobs (the fault's victim)."""
    counts = {h: 0 for h in HOSTS}
    for node in running_jobs(env.url).values():
        counts[node] += 1
    name = max(counts, key=lambda k: (counts[k], k))
    assert counts[name] > 0, counts
    return name


def all_running_again(env: Env, since: float, on: set[str] | None = None) -> float:
    """Waits until every job has a live run (on one of ``on``); the seconds it took after ``since``."""

    def check() -> dict | None:
        live = running_jobs(env.url)
        return live if len(live) == JOBS and (on is None or set(live.values()) <= on) else None

    wait_until("every job runs again" + (f" on {sorted(on)}" if on else ""), check, timeout=LIVENESS + 30.0)
    starts = [max(r.start for r in read_runs(env.url, job)) for job in env.jobs]
    took = max(0.0, max(starts) - since)
    print(f"every job running again {took:.2f} s after the fault (the heal, for a pair cut)")
    assert took <= LIVENESS, f"jobs ran again only {took:.1f} s after the fault (bound {LIVENESS} s)"
    return took


def finish(env: Env) -> None:
    """After the heal: the writer stops, every acknowledged write reaches its target, no run overlapped."""
    env.writer.stop()
    assert env.writer.acked, "the writer got nothing acknowledged"
    assert assert_all_replicated(env.url, env.pairs, env.writer, timeout=90.0) == len(env.writer.acked)
    assert_no_overlap(env.url)


@pytest.mark.timeout(300)
def test_a_node_sigkilled_then_started_again(env: Env) -> None:
    victim = busiest(env)
    others = set(HOSTS) - {victim}
    t0 = time.time()
    env.cluster.topo.crash(victim)
    env.cluster[victim].proc.wait(timeout=30)
    all_running_again(env, t0, on=others)
    seeds = [f"tcp://{env.cluster.topo[h].address}:{PORT}" for h in HOSTS]
    env.cluster.nodes[victim] = HostNode(
        env.cluster.topo[victim], victim, env.key, seeds, env.cluster.workdir, NET_TICKTIME, env.config
    )
    env.cluster[victim].wait_ready(timeout=120.0)
    env.cluster.wait_mesh(60.0)
    finish(env)


@pytest.mark.timeout(300)
def test_a_node_frozen_past_its_leases_then_thawed(env: Env) -> None:
    victim = busiest(env)
    others = set(HOSTS) - {victim}
    t0 = time.time()
    env.cluster.topo.freeze(victim)
    try:
        all_running_again(env, t0, on=others)
    finally:
        env.cluster.topo.thaw(victim)
    env.cluster[victim].wait_ready(2, timeout=HEAL_WITHIN + 30.0)  # declared down: a new incarnation
    env.cluster.wait_mesh(HEAL_WITHIN + 30.0)
    finish(env)


@pytest.mark.timeout(300)
def test_a_node_cut_from_the_others_but_not_from_the_store(env: Env) -> None:
    """The cut-off node ends its incarnation (a minority) and its new one sees itself alone and
    wants every job, but the store's leases keep it from running one the others hold."""
    victim = busiest(env)
    others = set(HOSTS) - {victim}
    t0 = time.time()
    for other in others:
        env.cluster.topo.cut_pair(victim, other)
    all_running_again(env, t0, on=others)
    env.cluster[victim].wait_ready(2, timeout=30.0)
    env.cluster.topo.heal()
    env.cluster.wait_mesh(HEAL_WITHIN + 30.0)
    finish(env)


@pytest.mark.timeout(300)
def test_a_node_cut_from_the_store_only(env: Env) -> None:
    victim = busiest(env)
    others = set(HOSTS) - {victim}
    t0 = time.time()
    env.cluster.topo.cut_pair(victim, "db")
    all_running_again(env, t0, on=others)
    env.cluster.topo.heal()
    finish(env)


@pytest.mark.timeout(300)
def test_a_pair_of_nodes_cut_apart(env: Env) -> None:
    """Liveness counts from the heal here: while the pair cut lasts the three nodes' views of the
    cluster differ (h2 lists h1 and h3, they list only h2) and some jobs may run nowhere until it
    heals (seen: 3 of 6 jobs without a run for as long as the cut lasted)."""
    env.cluster.topo.cut_pair("h1", "h3")
    env.cluster.wait_views({"h1": ["h2"], "h2": ["h1", "h3"], "h3": ["h2"]}, 20.0, "the pair cut")
    cut = time.time()
    # held past a lease TTL, so leases of jobs the views moved run out while the cut lasts
    wait_until("the pair cut outlasts a lease", lambda: time.time() > cut + TTL + 1.0, timeout=3 * TTL)
    env.cluster.topo.heal()
    healed = time.time()
    env.cluster.wait_mesh(HEAL_WITHIN + 30.0)  # after the tie-break's loser came back as a new incarnation
    assert len(env.cluster["h1"].readies) + len(env.cluster["h3"].readies) == 3
    all_running_again(env, healed)
    finish(env)
