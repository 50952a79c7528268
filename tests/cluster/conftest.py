"""Fixtures of the distribution tests: node a in this process, nodes b and c in their own."""

from __future__ import annotations

import pytest

from actors import Node
from tests.cluster.netkit import NodeProcess


def _node_process(name: str, key: str):
    proc = NodeProcess(name, key)
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture
def peer_b(key: str):
    yield from _node_process("b", key)


@pytest.fixture
def peer_c(key: str):
    yield from _node_process("c", key)


@pytest.fixture
def node_a(key: str):
    node = Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key)
    try:
        yield node
    finally:
        node.close()
