"""actors.sys across nodes: node a asks processes of node b (its node process and a host
of their own), as it would call them; a trace of a process on b comes to a collector on a."""

from __future__ import annotations

import pytest

import actors.sys
from actors import CallTimeout, Node
from actors.sys import SysError
from tests.cluster.conftest import node_a, peer_b  # noqa: F401 - fixtures
from tests.cluster.netkit import NodeProcess
from tests.statem.machines import CodeLock, Collector, wait_for
from tests.sys.sys_actors import Vault, add_ten, unlock_code

pytestmark = [pytest.mark.timeout(90), pytest.mark.integration]


def test_sys_on_processes_of_another_node(node_a: Node, peer_b: NodeProcess) -> None:  # noqa: F811
    node_a.connect(peer_b.address)
    sink = node_a.spawn(Collector)
    for host in (None, "own"):
        v = node_a.spawn(Vault, "pw", node="b", host=host)
        v.cast("a")
        assert actors.sys.get_state(v) == {"password": "pw", "count": 1, "seen": ["a"]}
        assert actors.sys.get_status(v)["state"]["password"] == "***"
        assert actors.sys.replace_state(v, add_ten)["count"] == 11
        actors.sys.suspend(v)
        v.cast("b")
        with pytest.raises(CallTimeout):
            v.call("seen", timeout=0.3)
        assert actors.sys.get_status(v)["held"] == 2
        actors.sys.resume(v)
        assert v.call("seen") == ["a", "b"]
        actors.sys.statistics(v, True)
        actors.sys.trace(v, sink)
        assert v.call("q") == ("q", 12)
        assert actors.sys.statistics(v)["messages_out"] == 1
        actors.sys.trace(v, False)
        got = [t[2] for t in wait_for(sink, 2 * (2 if host else 1))[-2:]]
        assert got[0][:3] == ("in", "call", "q") and got[1][:2] == ("out", ("q", 12))
        with pytest.raises(SysError):
            actors.sys.replace_state(v, lambda s: None)

    lock = node_a.spawn(CodeLock, [3], 30.0, node="b", host="own")
    assert actors.sys.get_state(lock)[0] == "locked"
    assert actors.sys.replace_state(lock, unlock_code)[0] == "open"
    assert lock.call("state") == "open"
