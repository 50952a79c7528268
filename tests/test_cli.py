"""The command line: demo in short mode, chaos, and status attaching to a node."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from actors.attach import Attached
from actors.cli import main, status_text
from actors.tree import render_tree
from tests.kernel.probes import Echo

ENV = dict(os.environ, PYTHONPATH=os.getcwd())


@pytest.mark.timeout(120)
def test_demo_short_reports_nothing_lost():
    out = subprocess.run([sys.executable, "-m", "actors", "demo", "--short", "--no-live", "--seed", "1"],
                         capture_output=True, text=True, timeout=110, env=ENV)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "RESULT: nothing lost" in out.stdout
    assert "0 hung" in out.stdout
    for service in ("couch_jobs:", "replicator:", "smoosh:", "ioq:"):
        assert service in out.stdout, service
    assert "finished exactly once" in out.stdout and ", 0 missing" in out.stdout


@pytest.mark.timeout(60)
def test_chaos_reports_restarts_and_no_hangs(capsys):
    assert main(["chaos", "--rate", "10", "--duration", "2", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert "0 hung" in text and "restarts per supervisor" in text
    assert "OK: no call hung" in text


@pytest.mark.timeout(30)
def test_status_attaches_to_a_running_node(node, capsys):
    ref = node.spawn(Echo, name="echo", host="own", cpus={0})
    with Attached(node.rundir) as view:
        actors = view.actors()
        assert any(a["id"] == ref.id and a["registered"] == "echo" and a["cpus"] == [0] for a in actors)
        assert any(h["pid"] == ref.os_pid for h in view.hosts())
    assert main(["status", node.rundir]) == 0
    text = capsys.readouterr().out
    assert "echo" in text and str(ref.os_pid) in text
    assert sorted(os.listdir(node.rundir)) == sorted(f for f in os.listdir(node.rundir))
    assert not [f for f in os.listdir(node.rundir) if f.startswith("cli")]


def test_status_on_a_directory_without_node(tmp_path, capsys):
    assert main(["status", str(tmp_path)]) == 2
    assert "not the runtime directory" in capsys.readouterr().err


def test_render_tree_nests_children_under_parents():
    actors = [
        {"id": "n.1", "name": "top", "class": "Sup", "pid": 1, "mailbox": 0, "parent": None},
        {"id": "n.2", "name": None, "class": "W", "pid": 2, "mailbox": 3, "parent": "n.1", "cpus": [0]},
        {"id": "h1.1", "name": None, "class": "W", "pid": 3, "mailbox": 0, "parent": "n.2"},
    ]
    lines = render_tree(actors)
    assert lines[0].startswith("top (n.1)")
    assert lines[1].startswith("  └─ n.2") and "cpus 0" in lines[1] and "mbox 3" in lines[1]
    assert lines[2].startswith("    └─ h1.1")
    assert "1 host processes" in status_text("x", 1, actors, [{"state": "up", "label": None, "proc": "h1",
                                                               "pid": 3, "cpus": None}], {})
