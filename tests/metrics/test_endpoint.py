"""A real node's /metrics: counts from every host process, restarts per child, config and CLI."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from actors import Node
from actors.app.nodecmd import parse_ready
from actors.config import ConfigError
from supervision import ChildSpec, SupFlags, start_supervisor, which_children
from tests.metrics.scraping import scrape, scrape_answered, value
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
        sup = start_supervisor(
            node,
            SupFlags(intensity=10, period=10),
            [ChildSpec("worker", (Worker, ()), host="mw")],
            name="metrics_top",
            host="ms",
        )
        child = _child(sup)
        for i in range(3):
            assert node.call(child, i, timeout=30) == i
        node.cast(child, "x")
        assert node.call(child, "casts", timeout=30) == 1  # the cast was handled before this call
        before = scrape_answered(url)
        assert value(before, "otpy_actor_calls_total", **{"class": "Worker"}) == 4
        assert value(before, "otpy_actor_call_duration_seconds_count", **{"class": "Worker"}) >= 3
        assert value(before, "otpy_actor_casts_total", **{"class": "Worker"}) == 1
        assert value(before, "otpy_actors", **{"class": "Worker"}) == 1
        assert value(before, "otpy_hosts", state="up") >= 2
        assert value(before, "otpy_processes_scraped") >= 3  # the node's own, the supervisor's, the worker's
        restarts = value(before, "otpy_supervisor_restarts_total", supervisor="metrics_top", child="worker")

        node.kill(child)
        poll_until(lambda: _child(sup) not in (None, child), "the worker's restart")
        after = scrape_answered(url)
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


ROOT = str(Path(__file__).resolve().parents[2])
CLI = [sys.executable, "-m", "actors"]
ENV = {**os.environ, "PYTHONPATH": ROOT}


def _metrics_line(proc: subprocess.Popen[str], limit: int = 40) -> str:
    """The URL of the first ``metrics: URL`` line among the command's first ``limit`` lines."""
    assert proc.stdout is not None
    seen = []
    for _ in range(limit):
        line = proc.stdout.readline()
        seen.append(line)
        if line.startswith("metrics: "):
            return line.split()[1]
        if line == "":
            break
    raise AssertionError(f"no metrics line: {''.join(seen)[-2000:]}")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)


@pytest.mark.timeout(150)
def test_otpy_node_metrics_serves_the_whole_application(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*CLI, "node", "--name", "m1", "--metrics", "0", "--state-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "stderr", "w"),  # noqa: SIM115 - the node's log, apart from its stdout
        text=True,
        env=ENV,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        assert parse_ready(proc.stdout.readline()) is not None  # the ready line stays the first on stdout
        samples = scrape(_metrics_line(proc))
        assert value(samples, "otpy_actors", **{"class": "Ioq2Server"}) >= 1
        assert value(samples, "otpy_processes_scraped") >= 3
        assert value(samples, "otpy_supervisor_restarts_total", supervisor="couch_sup", child="ioq_sup") == 0
    finally:
        _stop(proc)


@pytest.mark.timeout(150)
def test_demo_metrics_prints_its_url_and_serves_the_workload(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*CLI, "demo", "--short", "--no-live", "--seed", "3", "--metrics", "0", "--state-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ENV,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        url = _metrics_line(proc)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        # the services' seed names, counted in the host processes they run in
        samples = poll_until(
            lambda: (
                (s := scrape(url))
                and value(s, "couchdb_io_queue2_queued_total") > 0
                and ("couch_replicator_jobs_running", ()) in s
                and s
            ),
            "IOQ and replicator numbers from the demo's workload",
            seconds=60,
        )
        assert value(samples, "otpy_actor_calls_total", **{"class": "Ioq2Server"}) > 0
        assert value(samples, "otpy_actors", **{"class": "WorkloadSup"}) == 1
    finally:
        _stop(proc)


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")


@pytest.mark.timeout(120)
def test_a_host_that_does_not_answer_keeps_its_last_counts() -> None:
    with Node(metrics=0) as node:
        worker = node.spawn(Worker, host="frozen")
        for i in range(3):
            node.call(worker, i, timeout=30)
        url = node.metrics_server.url
        assert value(scrape_answered(url), "otpy_actor_calls_total", **{"class": "Worker"}) == 3
        pid = next(h["pid"] for h in node.hosts() if h["label"] == "frozen")
        os.kill(pid, signal.SIGSTOP)
        try:
            # on a loaded machine the stop takes effect when the host next gets a CPU: wait for it
            poll_until(lambda: _stopped(pid), "the host to be stopped")
            frozen = scrape(url)  # waits out the collector's 2 s for the stopped host
        finally:
            os.kill(pid, signal.SIGCONT)
        assert value(frozen, "otpy_processes_unanswered") == 1
        assert value(frozen, "otpy_actor_calls_total", **{"class": "Worker"}) == 3  # not a dip to 0
        node.call(worker, "again", timeout=30)  # the host catches up first
        thawed = scrape_answered(url)
        assert value(thawed, "otpy_actor_calls_total", **{"class": "Worker"}) == 4


@pytest.mark.timeout(120)
def test_a_host_that_ends_keeps_its_counts_in_the_totals() -> None:
    with Node(metrics=0) as node:
        worker = node.spawn(Worker, host="doomed")
        for i in range(3):
            node.call(worker, i, timeout=30)
        url = node.metrics_server.url
        assert value(scrape_answered(url), "otpy_actor_calls_total", **{"class": "Worker"}) == 3
        pid = next(h["pid"] for h in node.hosts() if h["label"] == "doomed")
        down = node.monitor(worker)
        os.kill(pid, signal.SIGKILL)
        down.wait(20)  # the DOWN of the worker: its host is gone
        poll_until(lambda: all(h["pid"] != pid or h["state"] != "up" for h in node.hosts()), "the host's end")
        after = scrape_answered(url)
        assert value(after, "otpy_actor_calls_total", **{"class": "Worker"}) == 3
        assert value(after, "otpy_actors", **{"class": "Worker"}) == 0


@pytest.mark.timeout(300)
def test_demo_on_nodes_serves_every_nodes_metrics(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            *CLI,
            "demo",
            "--nodes",
            "2",
            "--short",
            "--no-live",
            "--seed",
            "4",
            "--metrics",
            "0",
            "--state-dir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ENV,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        controller = _metrics_line(proc)
        assert proc.stdout is not None
        urls: dict[str, str] = {}
        seen = []
        for _ in range(200):  # the node lines follow once every node is up
            line = proc.stdout.readline()
            seen.append(line)
            if line.startswith("  node ") and ", metrics: " in line:
                urls[line.split()[1]] = line.rsplit(", metrics: ", 1)[1].strip()
            if len(urls) == 2 or line == "":
                break
        assert sorted(urls) == ["n1", "n2"], "".join(seen)[-2000:]
        assert len({controller, *urls.values()}) == 3
        for url in urls.values():
            samples = scrape(url)
            assert value(samples, "otpy_nodes_up") >= 1  # the controller, at least
            assert value(samples, "otpy_actors", **{"class": "Ioq2Server"}) >= 1
        # (a node may be down this moment: the demo SIGKILLs nodes; connections that came up only grow)
        assert value(scrape(controller), "otpy_net_connections_up_total") >= 2
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, out[-3000:]
    finally:
        _stop(proc)
