"""The clustered replicator on PostgreSQL under faults, three node processes on 127.0.0.1.

Each test starts three nodes (a, b, c) on one store, six continuous
replications and a writer updating the sources, injects one fault, heals it,
and then reads the history (Jepsen-style):

- the store's audit of runs: no two runs of one job overlap (`overlapping_runs`);
- liveness: every job was running again within ``cluster_quiet_period + lease
  TTL + 10 s`` of the fault (of the heal, when the fault took the store away
  from every node);
- every write the store acknowledged at a source is in its target, at the
  source's latest revision.

(These run on several node processes on 127.0.0.1; a node is cut off from the
store through its own TCP proxy, and the store as a whole by stopping the
PostgreSQL server.  Variants on network-namespace hosts are not here.)
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from actors.replicator import put_replication
from actors.replicator.lease import read_runs
from tests.replicator.pg_fault_kit import (
    LIVENESS,
    TTL,
    PgNode,
    Writer,
    assert_all_replicated,
    assert_no_overlap,
    running_jobs,
    wait_until,
)
from tests.replicator.pg_kit import make_pg_sources
from tests.replicator.pg_proxy import PgProxy

JOBS = 6


@dataclass
class Env:
    url: str
    nodes: list[PgNode]
    pairs: list[tuple[str, str]]
    jobs: list[str]
    writer: Writer


@pytest.fixture
def env(postgres_cluster, postgres_database) -> Iterator[Env]:
    schema = postgres_cluster.create_schema(postgres_database)
    url = postgres_cluster.url(postgres_database, schema)
    sock = f"{postgres_cluster.socket_dir}/.s.PGSQL.{postgres_cluster.port}"
    proxies: list[PgProxy] = []
    nodes: list[PgNode] = []
    writer = None
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
        for name in ("a", "b", "c"):
            proxies.append(PgProxy(sock))
            nodes.append(
                PgNode(name, proxies[-1].url(postgres_cluster.admin_url, postgres_database, schema), proxies[-1])
            )
        a, b, c = nodes
        a.connect(b)
        a.connect(c)
        b.connect(c)
        for node in nodes:
            node.start()
        running = wait_until(
            f"all {JOBS} jobs run", lambda: (lambda r: r if len(r) == JOBS else None)(running_jobs(url)), timeout=90.0
        )
        writer = Writer(url, [s for _d, s, _t in reps])
        yield Env(url, nodes, [(s, t) for _d, s, t in reps], sorted(running), writer)
    finally:
        if writer is not None:
            writer.stop()
        for node in nodes:
            node.close()
        for proxy in proxies:
            proxy.close()
        postgres_cluster.drop_schema(postgres_database, schema)


def busiest(env: Env) -> PgNode:
    """The node running the most jobs (the fault's victim)."""
    counts = {n.name: 0 for n in env.nodes}
    for node in running_jobs(env.url).values():
        counts[node] += 1
    name = max(counts, key=lambda k: (counts[k], k))
    assert counts[name] > 0
    return next(n for n in env.nodes if n.name == name)


def all_running_again(env: Env, since: float, on: set[str] | None = None) -> float:
    """Waits until every job has a live run (on one of ``on``); the seconds it took after ``since``."""

    def check() -> dict | None:
        live = running_jobs(env.url)
        return live if len(live) == JOBS and (on is None or set(live.values()) <= on) else None

    wait_until("every job runs again", check, timeout=LIVENESS + 30.0)
    # when each job's current run started, by the store's audit
    starts = [max(r.start for r in read_runs(env.url, job)) for job in env.jobs]
    took = max(0.0, max(starts) - since)
    print(f"every job running again {took:.2f} s after the fault or heal")
    return took


def finish(env: Env) -> None:
    env.writer.stop()
    assert env.writer.acked, "the writer got nothing acknowledged"
    assert assert_all_replicated(env.url, env.pairs, env.writer, timeout=60.0) == len(env.writer.acked)
    assert_no_overlap(env.url)


@pytest.mark.timeout(240)
def test_sigkill_of_a_node(env: Env) -> None:
    victim = busiest(env)
    others = {n.name for n in env.nodes} - {victim.name}
    t0 = time.time()
    victim.signal(signal.SIGKILL)
    victim.proc.wait(timeout=30)
    took = all_running_again(env, t0, on=others)
    assert took <= LIVENESS, f"jobs ran again only {took:.1f} s after the kill (bound {LIVENESS} s)"
    finish(env)


@pytest.mark.timeout(240)
def test_sigstop_past_the_lease_then_continue(env: Env) -> None:
    """The frozen node's leases expire, the others take its jobs; when it wakes it is cut off
    from the others (declared down: a lost incarnation never reconnects), so it ends its
    incarnation, and with it every actor it runs: it runs no job from then on."""
    victim = busiest(env)
    others = {n.name for n in env.nodes} - {victim.name}
    t0 = time.time()
    victim.signal(signal.SIGSTOP)
    try:
        took = all_running_again(env, t0, on=others)
    finally:
        victim.signal(signal.SIGCONT)
    woke = time.time()
    assert took <= LIVENESS, f"jobs ran again only {took:.1f} s after the freeze (bound {LIVENESS} s)"
    status = wait_until(
        "the woken node ends its incarnation",
        lambda: (lambda s: s if s.get("ended") else None)(victim.status()),
        timeout=60.0,
    )
    assert "declared this incarnation down" in status["ended"] or "minority" in status["ended"]
    wait_until(
        "two lease TTLs after the wake: time for any run it might still start",
        lambda: time.time() > woke + 2 * TTL,
        timeout=3 * TTL,
    )
    assert not [r for r in read_runs(env.url) if r.node == victim.name and r.start >= woke]
    assert set(running_jobs(env.url).values()) <= others
    finish(env)


@pytest.mark.timeout(240)
def test_one_node_cut_off_from_the_store_then_healed(env: Env) -> None:
    victim = busiest(env)
    others = {n.name for n in env.nodes} - {victim.name}
    t0 = time.time()
    victim.proxy.cut()
    took = all_running_again(env, t0, on=others)
    assert took <= LIVENESS, f"jobs ran again only {took:.1f} s after the cut (bound {LIVENESS} s)"
    # the cut-off node stopped its runs by its own clock: each ended at its lease's expiry at the
    # latest, and the next run of that job started no sooner
    victim.proxy.heal()
    healed = time.time()
    wait_until(
        "the healed node is a member again",
        lambda: all(victim.name in n.status()["live"] for n in env.nodes),
        timeout=60.0,
    )
    took = all_running_again(env, healed)
    assert took <= LIVENESS
    finish(env)


@pytest.mark.timeout(300)
def test_the_store_stops_for_everyone_then_comes_back(env: Env, postgres_cluster) -> None:
    postgres_cluster.stop()
    stopped = time.time()
    try:
        wait_until(
            "the leases run out: no job runs without the store",
            lambda: time.time() > stopped + TTL + 1.0,
            timeout=3 * TTL,
        )
    finally:
        restarting = time.time()  # the server is down from `stopped` (stop returned) to here
        postgres_cluster.start()
    back = time.time()
    took = all_running_again(env, back)
    assert took <= LIVENESS, f"jobs ran again only {took:.1f} s after the store came back (bound {LIVENESS} s)"
    runs = read_runs(env.url)
    # nothing ran while the store was away: every run open at the stop ended by its lease, and
    # none began before the restart (a grant between the server's readiness and `back` is fine)
    assert not [r for r in runs if stopped + TTL < r.end and r.start < restarting]
    finish(env)
