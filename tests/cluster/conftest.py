"""Fixtures of the distribution tests: node a in this process, node b in its own."""

from __future__ import annotations

import pytest

from actors import Node
from tests.cluster.netkit import NodeProcess


@pytest.fixture
def peer_b(key: str):
    proc = NodeProcess("b", key)
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture
def node_a(key: str):
    node = Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key)
    try:
        yield node
    finally:
        node.close()
