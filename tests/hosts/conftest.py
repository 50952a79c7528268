"""Fixtures of the namespace-host tests: a topology of hosts, PostgreSQL on a host of its own, a cluster key.

``hosts`` (one per test module: building it takes well under a second, the
database a few) gives hosts ``h1``, ``h2``, ``h3`` and the database host
``db``; each test starts its own `Cluster` of ``otpy node`` daemons on
them with `cluster`, so one test's faults never reach the next.  Every
test here needs root and iproute2 and skips with a line saying so.

To use them elsewhere::

    def test_x(topo, postgres, cluster_key, tmp_path):
        c = Cluster(topo, HOSTS, cluster_key, NET_TICKTIME, config=postgres_config(tmp_path, postgres),
                    workdir=str(tmp_path))          # otpy node on h1..h3, couch_jobs on PostgreSQL
        try:
            c.wait_mesh(60.0)
            topo.cut("h3")                         # or cut_pair("h1", "h3"), cut_pair("h3", "db"),
            ...                                    # slow("h2"), freeze("h3"), crash("h3")
            c["h3"].nodes()                        # asked through its rundir: no network involved
        finally:
            topo.heal()
            c.close()
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from tests.hosts.nodes import Cluster, make_key
from tests.hosts.postgres_host import PostgresHost, postgres_host_missing
from tests.hosts.topology import Topology, missing

HOSTS = ("h1", "h2", "h3")
#: Short in the tests: a cut is seen within it, and healed within 2 x it + 10 s.
NET_TICKTIME = 2.0


@pytest.fixture(scope="module")
def topo() -> Iterator[Topology]:
    """Hosts h1..h3 and the database host db on one switch; removed after the module."""
    why = missing()
    if why:
        pytest.skip(why)
    with Topology([*HOSTS]) as t:
        t.add_host("db", 100)
        yield t


@pytest.fixture(scope="module")
def postgres(topo: Topology) -> Iterator[PostgresHost]:
    """PostgreSQL on the database host (skips where the server is not installed)."""
    why = postgres_host_missing()
    if why:
        pytest.skip(why)
    server = PostgresHost(topo["db"])
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def cluster_key() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="otpy-hosts-key-")
    try:
        yield make_key(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def cluster(topo: Topology, cluster_key: str, tmp_path) -> Iterator[Cluster]:
    """``otpy node`` on h1, h2 and h3 (net_ticktime 2 s), seeded with each other, the mesh formed;
    every fault healed and every node stopped after the test."""
    c = Cluster(topo, HOSTS, cluster_key, NET_TICKTIME, workdir=str(tmp_path))
    try:
        c.wait_mesh(timeout=60.0)
        yield c
    finally:
        try:
            topo.heal()
        finally:
            c.close()


def postgres_config(tmp_path, postgres: PostgresHost) -> str:
    """An ini file pointing couch_jobs at the database host."""
    path = os.path.join(str(tmp_path), "node.ini")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"[couch_jobs]\nstore = {postgres.url}\n")
    return path
