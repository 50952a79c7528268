"""Monitor references are unique across the cluster, as Erlang's are.

The process of a monitored actor keys its monitors by reference, and actor ids
repeat from node to node (every node process's first actor is ``n.1``), so a
reference made of an actor id and a per-process serial could name two monitors.
"""

from __future__ import annotations

import itertools

import pytest

from actors import Node
from actors._core.cell import gen_server
from tests.cluster.dist_actors import Watcher, Worker, watched
from tests.cluster.netkit import NodeProcess


def test_watchers_alike_on_two_nodes_each_get_their_down(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two watchers with the same actor id on two nodes ("n.1" on each), whose serials happen to
    coincide, monitoring one target, are two monitors, and each gets its DOWN.  (When one
    overwrote the other, a global name's holder kept its name on its own node after it died.)"""
    b = NodeProcess("b", key)
    try:
        with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key) as a:
            assert a.connect(b.address) == "b"
            wa, wb = a.spawn(Watcher), a.spawn(Watcher, node="b")
            assert wa is not None and wb is not None and wa.id == wb.id and wa.node_id != wb.node_id
            target = a.spawn(Worker, "target", host="own")
            assert target is not None
            mb = wb.call(("monitor", target))
            monkeypatch.setattr(gen_server, "_mrefs", itertools.count(mb[-1]))  # the same serial here
            ma = wa.call(("monitor", target))
            assert ma != mb
            a.kill(target)
            assert watched(wa, 1) == [("DOWN", ma, target, "killed")]
            assert watched(wb, 1) == [("DOWN", mb, target, "killed")]
    finally:
        b.close()
