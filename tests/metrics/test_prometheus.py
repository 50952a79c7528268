"""The real Prometheus scrapes a running node and sees a supervisor's restarts rise.

Needs the ``prometheus`` binary (Debian/Ubuntu: ``apt-get install prometheus``;
``.ci/run`` installs it).  The test runs its own server (not the system
service): its own config with a 1 s scrape interval, its own storage in the
test's temporary folder, on a free loopback port, and stops it by its pid.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from actors import Node
from supervision import ChildSpec, SupFlags, start_supervisor, which_children
from tests.metrics.workers import Worker
from tests.polling import poll_until

pytestmark = pytest.mark.integration

PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None
)
WAIT = 60.0  # seconds for Prometheus to come up and for a scrape to show a change (a loaded CI machine)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read().decode())


class _Prometheus:
    """One Prometheus server of this test's own."""

    def __init__(self, tmp: Path, target: tuple[str, int]) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = tmp / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: otpy\n    static_configs:\n"
            f"      - targets: ['{target[0]}:{target[1]}']\n"
        )
        self.log = open(tmp / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _alive_or_fail(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(
                f"prometheus exited with {self.proc.returncode}: {Path(self.log.name).read_text()[-2000:]}"
            )

    def query(self, promql: str) -> list[dict[str, Any]]:
        self._alive_or_fail()
        reply = _get(f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        assert reply["status"] == "success", reply
        return reply["data"]["result"]

    def wait_value(self, promql: str, accept: Any, what: str) -> float:
        """Ask until the query's single value satisfies ``accept``; each try waits on the server's process."""
        deadline = time.monotonic() + WAIT
        last = None
        while time.monotonic() < deadline:
            try:
                result = self.query(promql)
            except OSError:  # not listening yet
                result = []
            if result:
                last = float(result[0]["value"][1])
                if accept(last):
                    return last
            try:
                self.proc.wait(timeout=0.25)  # the pace of asking; returns early only if it died
            except subprocess.TimeoutExpired:
                continue
            self._alive_or_fail()
        raise AssertionError(f"Prometheus never showed {what} within {WAIT} s (last value {last})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.log.close()


@pytest.mark.timeout(240)
@pytest.mark.skipif(
    PROMETHEUS is None, reason="needs the prometheus binary: apt-get install prometheus (.ci/run installs it)"
)
def test_prometheus_sees_supervisor_restarts_rise(tmp_path: Path) -> None:
    with Node(metrics=0) as node:
        sup = start_supervisor(
            node, SupFlags(intensity=10, period=10), [ChildSpec("worker", (Worker, ()), host="pw")], name="prom_top"
        )
        prom = _Prometheus(tmp_path, node.metrics_address)
        try:
            restarts = 'otpy_supervisor_restarts_total{job="otpy",supervisor="prom_top",child="worker"}'
            prom.wait_value('up{job="otpy"}', lambda v: v == 1, "a successful scrape of the node")
            assert prom.wait_value(restarts, lambda v: True, "the restart counter") == 0
            for expected in (1, 2):
                child = which_children(sup)[0].child
                node.kill(child)
                poll_until(lambda: which_children(sup)[0].child not in (None, child), "the worker's restart")
                prom.wait_value(restarts, lambda v: v == expected, f"{expected} restart(s)")
            calls = prom.query('otpy_actor_exits_total{class="Worker",reason="killed"}')
            assert calls and float(calls[0]["value"][1]) >= 1
            # every query of the Grafana dashboard is valid PromQL to this Prometheus, and the
            # runtime's panels draw something from this node
            dashboard = json.loads((Path(__file__).resolve().parents[2] / "docs" / "grafana" / "otpy.json").read_text())
            drawn = 0
            for panel in dashboard["panels"]:
                for target in panel["targets"]:
                    result = prom.query(target["expr"].replace("$job", ".*"))  # raises unless it parses
                    drawn += bool(result)
            assert drawn >= 10, f"only {drawn} of the dashboard's queries returned data"
        finally:
            prom.stop()
