"""The sharding tests' own node: this test process's node ``a``, beside the node processes they start."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors import Node


@pytest.fixture
def node_a(key: str) -> Iterator[Node]:
    node = Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key, net_ticktime=4.0)
    try:
        yield node
    finally:
        node.close()
