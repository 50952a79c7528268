"""``otpy sys RUNDIR NAME OP``: the command line reaches a process of a running node by name."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import actors.sys
from tests.sys.sys_actors import Vault

pytestmark = [pytest.mark.timeout(120), pytest.mark.integration]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def otpy(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
        stdin=subprocess.DEVNULL,
    )


def test_otpy_sys_get_state_status_suspend_and_statistics(node):
    v = node.spawn(Vault, "s3cret", name="vault", host="own")
    v.cast("a")
    out = otpy("sys", node.rundir, "vault", "get_state")
    assert out.returncode == 0, out.stderr
    assert "'count': 1" in out.stdout and "s3cret" in out.stdout
    out = otpy("sys", node.rundir, "vault", "get_status")
    assert out.returncode == 0 and "'***'" in out.stdout and "s3cret" not in out.stdout
    assert otpy("sys", node.rundir, "vault", "suspend").stdout.strip() == "ok"
    assert actors.sys.get_status(v)["suspended"] is True
    assert otpy("sys", node.rundir, "vault", "resume").returncode == 0
    assert otpy("sys", node.rundir, "vault", "statistics", "on").returncode == 0
    v.call("x")
    out = otpy("sys", node.rundir, "vault", "statistics", "get")
    assert "'messages_in': 1" in out.stdout


def test_otpy_sys_errors_are_one_line(node):
    node.spawn(Vault, "pw", name="vault")
    out = otpy("sys", node.rundir, "nobody", "get_state")
    assert out.returncode == 2 and "no process is registered as 'nobody'" in out.stderr
    out = otpy("sys", node.rundir, "vault", "statistics", "maybe")
    assert out.returncode == 2 and "statistics takes one of on, off, get" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
