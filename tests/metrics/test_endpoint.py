"""A real node's /metrics: counts from every host process, restarts per child, config and CLI."""

from __future__ import annotations

import socket

import pytest

from actors import Node
from actors.config import ConfigError
from supervision import ChildSpec, SupFlags, start_supervisor, which_children
from tests.metrics.scraping import scrape, value
from tests.metrics.workers import Worker
from tests.polling import poll_until

pytestmark = pytest.mark.integration


def _child(sup):
    return which_children(sup)[0].child


@pytest.mark.timeout(120)
def test_metrics_come_from_every_host_process_and_restarts_rise() -> None:
    with Node(metrics=0) as node:
        host, port = node.metrics_address
        assert host == "127.0.0.1" and port > 0
        url = node.metrics_server.url
        assert url == f"http://127.0.0.1:{port}/metrics"
        sup = start_supervisor(node, SupFlags(intensity=10, period=10),
                               [ChildSpec("worker", (Worker, ()), host="mw")], name="metrics_top", host="ms")
        child = _child(sup)
        for i in range(3):
            assert node.call(child, i) == i
        node.cast(child, "x")
        assert node.call(child, "casts") == 1  # the cast was handled before this call
        before = scrape(url)
        assert value(before, "otpy_actor_calls_total", **{"class": "Worker"}) == 4
        assert value(before, "otpy_actor_call_duration_seconds_count", **{"class": "Worker"}) >= 3
        assert value(before, "otpy_actor_casts_total", **{"class": "Worker"}) == 1
        assert value(before, "otpy_actors", **{"class": "Worker"}) == 1
        assert value(before, "otpy_hosts", state="up") >= 2
        assert value(before, "otpy_processes_scraped") >= 3  # the node's own, the supervisor's, the worker's
        restarts = value(before, "otpy_supervisor_restarts_total", supervisor="metrics_top", child="worker")

        node.kill(child)
        poll_until(lambda: _child(sup) not in (None, child), "the worker's restart")
        after = scrape(url)
        assert value(after, "otpy_supervisor_restarts_total", supervisor="metrics_top", child="worker") == restarts + 1
        assert value(after, "otpy_actor_exits_total", **{"class": "Worker", "reason": "killed"}) == 1
        # the dead worker's calls still count (its process lives on): counters never go back
        assert value(after, "otpy_actor_calls_total", **{"class": "Worker"}) >= 4
        assert not [k for k in after if "pid" in dict(k[1])]


@pytest.mark.timeout(60)
def test_config_port_and_bind() -> None:
    with Node({"metrics": {"port": "0", "bind": "127.0.0.1"}}) as node:
        assert node.metrics_address is not None and node.metrics_address[1] > 0
        assert value(scrape(node.metrics_server.url), "otpy_nodes_up") == 0
    assert node.metrics_server._server is None  # closing the node closed the endpoint
    with pytest.raises(ConfigError, match=r"\[metrics\] port"):
        Node({"metrics": {"port": "70000"}})


@pytest.mark.timeout(60)
def test_a_port_in_use_refuses_the_node() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        with pytest.raises(OSError):
            Node(metrics=taken.getsockname()[1])
