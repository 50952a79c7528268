"""The fixture itself: hosts reach each other, faults cut what they say, and nothing is left behind."""

from __future__ import annotations

import subprocess

import pytest

from tests.hosts.topology import Topology, missing
from tests.polling import poll_until

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.split()}


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def test_faults_cut_what_they_say_and_close_removes_everything():
    before = _namespaces()
    with Topology(["a", "b", "c"]) as t:
        a, b, c = t["a"], t["b"], t["c"]
        assert a.reaches(b) and b.reaches(c) and a.reaches(c)
        t.cut("c")
        assert not a.reaches(c) and not c.reaches(b) and a.reaches(b)
        t.heal()
        assert a.reaches(c)
        t.cut_pair("a", "c")
        assert not a.reaches(c) and not c.reaches(a) and a.reaches(b) and b.reaches(c)
        t.heal()
        assert a.reaches(c) and c.reaches(a)
        t.slow("a")
        assert "tbf" in a.sh("tc", "qdisc", "show", "dev", "eth0").stdout
        t.heal()
        assert "tbf" not in a.sh("tc", "qdisc", "show", "dev", "eth0").stdout
        made = _namespaces() - before
        assert len(made) == 4 and all(ns.startswith(t.prefix) for ns in made)
    assert _namespaces() <= before


def test_freeze_and_crash_reach_every_process_on_the_host():
    with Topology(["a"]) as t:
        proc = subprocess.Popen([*t["a"].exec_prefix(), "sleep", "60"])
        try:
            # `ip netns exec` joins the namespace after the fork Popen returns from.
            poll_until(lambda: proc.pid in t["a"].pids(), "the process in the host's namespace", 10.0)
            t.freeze("a")
            poll_until(lambda: _state(proc.pid) == "T", "the process stopped", 10.0)
            t.thaw("a")
            t.crash("a")
            assert proc.wait(timeout=10) == -9
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
