"""Three ``otpy node`` daemons on three hosts form a cluster over the network, with the cluster key."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.hosts.conftest import HOSTS, NET_TICKTIME, postgres_config
from tests.hosts.host_actors import Worker
from tests.hosts.nodes import Cluster


@pytest.mark.timeout(180)
def test_three_hosts_form_a_mesh(cluster):
    for name in ("h1", "h2", "h3"):
        assert cluster[name].ready.address == f"tcp://{cluster.topo[name].address}:4370"
    assert cluster.views() == {"h1": ["h2", "h3"], "h2": ["h1", "h3"], "h3": ["h1", "h2"]}


@pytest.mark.timeout(180)
def test_nodes_share_the_database_host_and_one_can_be_cut_off_from_it(topo, postgres, cluster_key, tmp_path):
    c = Cluster(
        topo, HOSTS, cluster_key, NET_TICKTIME, config=postgres_config(tmp_path, postgres), workdir=str(tmp_path)
    )
    try:
        c.wait_mesh(timeout=60.0)
        with psycopg.connect(postgres.local_url()) as conn:
            clients = {
                row[0]
                for row in conn.execute(
                    "SELECT host(client_addr) FROM pg_stat_activity WHERE datname = 'otpy' AND client_addr IS NOT NULL"
                )
            }
        assert {topo[h].address for h in HOSTS} <= clients
        topo.cut_pair("h3", "db")
        assert not topo["h3"].reaches(topo["db"]) and topo["h3"].reaches(topo["h1"])
        assert c["h3"].nodes() == ["h1", "h2"]
    finally:
        topo.heal()
        c.close()


@pytest.mark.timeout(180)
def test_a_slow_link_carrying_big_messages_is_not_a_dead_one(cluster):
    """h3's link at 256 kbit/s (tbf): each 40 kB echo takes over a second each way, ticks queue behind
    it, and still nobody declares anybody down."""
    worker = cluster["h1"].spawn(Worker, "slow", on="h3", host="own")
    cluster.topo.slow("h3", rate="256kbit", burst="16kb", latency="2s")
    blob = b"x" * 40_000
    started = time.monotonic()
    for _ in range(4):
        kind, reply, _took = cluster["h1"].call(worker, ("echo", blob), timeout=30.0)
        assert kind == "ok" and reply == blob
    assert time.monotonic() - started > 2 * NET_TICKTIME  # the link really was slow for a while
    assert cluster.views() == {"h1": ["h2", "h3"], "h2": ["h1", "h3"], "h3": ["h1", "h2"]}
    assert not [line for n in cluster.nodes.values() for line in n.log if "nodedown" in line]
