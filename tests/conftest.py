"""Shared fixtures: a node per test that must leave nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from actors import Node


def pytest_configure(config):
    """Give SIGINT back its default handler when the suite was started with it ignored.

    A shell without job control starts a background command (``pytest &`` in
    a script, some CI runners) with SIGINT ignored, and an ignored signal stays
    ignored across exec: every command the tests start would then be deaf to
    Ctrl-C, and the tests of what Ctrl-C does would hang.  A handler, unlike
    ``SIG_IGN``, is reset to the default in the children.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def node():
    before = {t.ident for t in threading.enumerate()}
    n = Node()
    try:
        yield n
    finally:
        n.close()
    assert not os.path.exists(n.rundir), "runtime directory left behind"
    leftover = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    for t in leftover:
        t.join(timeout=5.0)
    leftover = [t.name for t in leftover if t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"


@pytest.fixture
def key(tmp_path) -> str:
    """A fresh cluster key file made as a user makes one (``python -m actors keygen``)."""
    path = str(tmp_path / "cluster.key")
    subprocess.run([sys.executable, "-m", "actors", "keygen", path], check=True, timeout=60, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert os.stat(path).st_mode & 0o777 == 0o600
    return path
