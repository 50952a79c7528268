"""An operator sees the cluster: ``otpy status`` and the observer list a node's peers, and the log says
every nodeup and nodedown."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from actors.attach import Attached
from actors.tools.observer.collector import Collector
from actors.tools.observer.source import Source
from tests.hosts.nodes import Cluster


def _incarnation(cluster: Cluster, name: str) -> str:
    """The incarnation of node ``name`` as its own view says (its id is name@incarnation)."""
    view = Attached(cluster[name].ready.rundir)
    try:
        return view.node_id.partition("@")[2]
    finally:
        view.close()


@pytest.mark.timeout(180)
def test_status_and_the_observer_list_the_peers(cluster: Cluster):
    out = subprocess.run(
        [sys.executable, "-m", "actors", "status", cluster["h1"].ready.rundir],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=os.getcwd()),
    )
    assert out.returncode == 0, out.stderr
    assert "peers: 2" in out.stdout
    for name in ("h2", "h3"):
        inc = _incarnation(cluster, name)
        assert re.search(
            rf"^  {name}  tcp://{re.escape(cluster.topo[name].address)}:4370  incarnation {inc}  "
            rf"up since \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC",
            out.stdout,
            re.M,
        ), out.stdout
        assert any(f"nodeup: node {name} (incarnation {inc})" in line for line in cluster["h1"].log)
    view = Attached(cluster["h1"].ready.rundir)
    collector = Collector(Source(view))
    try:
        picture = collector.poll()
        assert picture["distributed"] is True
        assert [(p["name"], p["address"]) for p in picture["peers"]] == [
            ("h2", "tcp://10.77.0.2:4370"),
            ("h3", "tcp://10.77.0.3:4370"),
        ]
        cluster.topo.cut("h3")
        cluster.wait_views({"h1": ["h2"]}, 20.0)
        assert [p["name"] for p in collector.poll()["peers"]] == ["h2"]
        assert any("nodedown: node h3" in line and "net_tick_timeout" in line for line in cluster["h1"].log)
    finally:
        collector.close()
        view.close()
