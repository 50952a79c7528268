"""`GenServer.reads_host_endpoint`: who reads a host's endpoint for its first actor."""

from __future__ import annotations

from typing import Any

import pytest

from actors._core.wire import system as sysop
from actors.ioq.server1 import Ioq1Server
from actors.ioq.server2 import Ioq2Server
from tests.kernel.probes import Echo

pytestmark = pytest.mark.timeout(60)


class FedByTheIoThread(Echo):
    reads_host_endpoint = False


def _lent_frames(node: Any, proc: str) -> int:
    return node.runtime.sys_request(proc, sysop.Stats())["counters"].get("actors.transport.lent_frames", 0)


@pytest.mark.parametrize("cls, reads", [(Echo, True), (FedByTheIoThread, False)])
def test_a_first_actor_reads_its_hosts_endpoint_unless_it_says_not(node, cls, reads):
    b = node.spawn(cls, host="own")
    for i in range(30):
        assert b.call(("n", i)) == ("n", i)
    assert (_lent_frames(node, b.proc) > 0) is reads


def test_the_ioq_servers_leave_their_endpoint_to_the_io_thread():
    assert Ioq1Server.reads_host_endpoint is False
    assert Ioq2Server.reads_host_endpoint is False
