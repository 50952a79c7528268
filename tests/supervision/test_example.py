"""The supervision example runs end to end and shows what the supervisors did."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "supervision_tree.py")


@pytest.fixture(scope="module")
def run() -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, EXAMPLE], cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.timeout(90)
def test_example_exits_zero(run: subprocess.CompletedProcess[str]) -> None:
    assert run.returncode == 0, run.stdout + run.stderr
    assert "done: node closed, nothing left running" in run.stdout


@pytest.mark.timeout(90)
def test_example_rest_for_one_keeps_earlier_siblings(run: subprocess.CompletedProcess[str]) -> None:
    assert "call failed with: RuntimeError: transform was asked to crash" in run.stdout
    assert "source kept: True; sink restarted: True" in run.stdout


@pytest.mark.timeout(90)
def test_example_sigkilled_host_comes_back_with_same_cpus(
    run: subprocess.CompletedProcess[str],
) -> None:
    assert "DOWN reason: 'killed'" in run.stdout
    line = next(l for l in run.stdout.splitlines() if "transform host pid" in l)
    old_pid, new_pid = line.split("transform host pid ")[1].split(",")[0].split(" -> ")
    assert old_pid != new_pid
    assert "(same placement: True)" in line


@pytest.mark.timeout(90)
def test_example_one_for_all_and_escalation(run: subprocess.CompletedProcess[str]) -> None:
    assert "left restarted: True; right restarted: True" in run.stdout
    assert "pair supervisor exited: 'shutdown'" in run.stdout
    assert "top restarted pair:" in run.stdout


@pytest.mark.timeout(90)
def test_example_pool_and_restart_counts(run: subprocess.CompletedProcess[str]) -> None:
    out = run.stdout
    assert "job-2 finishes normally: finished" in out
    assert "count_children(pool) = {'specs': 1, 'active': 2, 'supervisors': 0, 'workers': 2}" in out
    assert "pair      shutdown           shutting down  x1" in out
    assert "total restart decisions: 5" in out
