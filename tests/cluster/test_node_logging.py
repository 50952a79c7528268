"""What ``otpy node`` tells its operator by default: one line per event on stderr,
plain or JSON.

A node daemon runs as an operator runs it (no logging option), with a peer b
in a process of its own; then a node holding another cluster's key tries to
connect, a supervisor's child is killed, and b is SIGKILLed.  The daemon's
stderr must hold each of those events."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from actors.app.nodecmd import parse_ready
from actors.attach import Attached
from tests.cluster.netkit import ENV, NodeProcess
from tests.polling import poll_until

pytestmark = pytest.mark.timeout(180)


class Daemon:
    """``python -m actors node`` with the given options; its stderr goes to a file."""

    def __init__(self, key: str, seed: str, errfile: Path, *options: str) -> None:
        self.errfile = errfile
        self._err = open(errfile, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "actors", *options, "node", "--name", "a", "--listen", "tcp://127.0.0.1:0"]
            + ["--cluster-key", key, "--net-ticktime", "2", "--seeds", seed, "--stop-with-parent"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=ENV,
        )
        lines: queue.Queue[str] = queue.Queue()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                lines.put(line)
            lines.put("")

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 90.0
        ready = None
        while ready is None:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line, f"the node exited before its ready line: {errfile.read_text()[-2000:]}"
            ready = parse_ready(line)
        self.ready = ready

    def text(self) -> str:
        return self.errfile.read_text()

    def wait_for(self, *needles: str, seconds: float = 30.0) -> str:
        def found() -> str | None:
            text = self.text()
            return text if all(n in text for n in needles) else None

        return str(poll_until(found, f"{needles} in the node's log", seconds))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._err.close()


def _events(key: str, other_key: str, errfile: Path, *options: str) -> str:
    """Run the scenario; the daemon's stderr once every event is in it."""
    b = NodeProcess("b", key, ticktime=2.0)
    daemon = None
    try:
        daemon = Daemon(key, b.address, errfile, *options)
        assert b.ask("wait_for a", "WAITED") == "True"
        c = NodeProcess("c", other_key)
        try:
            assert c.ask(f"connect {daemon.ready.address}", "CONNECT").startswith("_FAILED")
        finally:
            c.close()
        with Attached(daemon.ready.rundir) as view:
            smoosh = view.whereis("smoosh_sup")
            assert smoosh is not None
            view.kill(smoosh)
        daemon.wait_for("smoosh_sup")
        b.kill()
        return daemon.wait_for("nodedown", "refused", "smoosh_sup")
    finally:
        if daemon is not None:
            daemon.stop()
        b.close()


@pytest.fixture
def other_key(tmp_path: Path) -> str:
    from actors._core.net.keys import write_new

    path = str(tmp_path / "other.key")
    write_new(path)
    return path


def test_a_node_daemon_logs_nodedown_a_refused_peer_and_a_supervisor_report_by_default(
    key: str, other_key: str, tmp_path: Path
) -> None:
    text = _events(key, other_key, tmp_path / "stderr")
    lines = text.splitlines()
    down = [ln for ln in lines if "nodedown: node b" in ln]
    assert down and "WARNING actors.node" in down[0] and "is down (" in down[0]
    refused = [ln for ln in lines if "refused" in ln and "CurveZMQ handshake failed" in ln]
    assert refused, text[-3000:]
    report = [ln for ln in lines if "supervisor couch_sup: child_terminated child='smoosh_sup'" in ln]
    assert report and "reason='killed'" in report[0] and "action=restarting" in report[0]
    assert any("nodeup: node b" in ln and " INFO " in ln for ln in lines)


def test_with_log_format_json_every_line_is_an_object_with_the_events_fields(
    key: str, other_key: str, tmp_path: Path
) -> None:
    text = _events(key, other_key, tmp_path / "stderr", "--log-format", "json")
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    for record in records:
        assert {"time", "level", "logger", "node", "incarnation", "message"} <= set(record), record
        assert record["node"] == "a" and str(record["incarnation"]).startswith("a@")
    down = next(r for r in records if r.get("event") == "nodedown")
    assert down["peer"] == "b" and down["reason"] and down["level"] == "WARNING"
    refused = next(r for r in records if r.get("event") == "handshake_failed")
    assert refused["reason"] == "not_cluster_key" and refused["count"] >= 1
    report = next(r for r in records if r.get("event") == "supervisor_report" and r.get("child_id") == "smoosh_sup")
    assert report["supervisor"] == "couch_sup" and report["reason"] == "killed" and report["action"] == "restarting"
    assert os.path.exists(tmp_path / "stderr")
