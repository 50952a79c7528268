"""An actor's own monitor (``self.monitor(ref)`` inside a GenServer) of an
actor on another node gets ``DOWN ... noconnection`` when that node is
SIGKILLed, as the host program's ``node.monitor`` does.

The watchers sit where actors live: in node a's own process and in a host
process of their own; the watched workers in node b's process and in a host
of b's.  Only node b is killed, so every DOWN here is the node-loss path,
never a host's death seen on the same node."""

from __future__ import annotations

from typing import Any

from actors import Node
from tests.cluster.dist_actors import Watcher, Worker, watched
from tests.cluster.netkit import NodeProcess


def test_an_actors_own_monitor_of_a_remote_actor_gets_noconnection_on_sigkill(node_a: Node, key: str) -> None:
    peer = NodeProcess("b", key)
    try:
        assert node_a.connect(peer.address) == "b"
        targets = [node_a.spawn(Worker, "in-host", node="b", host="own"), node_a.spawn(Worker, "in-node", node="b")]
        watchers = [node_a.spawn(Watcher), node_a.spawn(Watcher, host="own")]
        mrefs: dict[Any, dict[Any, Any]] = {}
        for watcher in watchers:
            mrefs[watcher] = {t: watcher.call(("monitor", t)) for t in targets}
        for t in targets:
            assert t.call("ping")[0] == "pong"  # both alive and reachable before the kill
        for watcher in watchers:
            assert watcher.call(("got",)) == []  # nothing before the kill
        peer.kill()
        for watcher in watchers:
            got = watched(watcher, len(targets), 15.0)
            downs = {(m[1], m[2], m[3]) for m in got if m[0] == "DOWN"}
            want = {(mrefs[watcher][t], t, "noconnection") for t in targets}
            assert downs == want, f"watcher {watcher} got {got}"
    finally:
        peer.close()
