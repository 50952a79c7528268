"""Big messages stall nothing: while one actor streams 64 x 1 MB to an actor
on another node, the link stays up (``net_ticktime`` 2 s) and small calls
between two other actors of the same two nodes answer within 100 ms."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from actors import Node
from tests.cluster.bulk_actors import Pinger, Streamer, Taker
from tests.cluster.netkit import NodeProcess

MB = 1 << 20


@pytest.fixture
def pair(key: str) -> Any:
    peer = NodeProcess("b", key, ticktime=2.0)
    try:
        with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key, net_ticktime=2.0) as node:
            node.connect(peer.address)
            yield node, peer
    finally:
        peer.close()


@pytest.mark.timeout(180)
def test_a_bulk_stream_stalls_neither_ticks_nor_small_calls(pair: Any) -> None:
    node, _peer = pair
    nodedown = node.monitor_node("b")
    streamer = node.spawn(Streamer, host="own")
    pinger = node.spawn(Pinger, host="own")
    taker = node.spawn(Taker, node="b", host="own")
    echo = node.spawn(Taker, node="b", host="own")  # the small calls' far end, another host of b
    assert pinger.call(("pings", echo, 0.2), timeout=30)  # both paths warm before the stream
    samples: list[Any] = []

    def ping() -> None:
        samples.extend(pinger.call(("pings", echo, 4.0), timeout=60))

    pings = threading.Thread(target=ping, daemon=True)
    pings.start()
    began = streamer.call(("stream", taker, 64, MB), timeout=120)
    pings.join(timeout=90)
    assert not pings.is_alive()
    count, total, first, last, in_order = taker.call("stats", timeout=60)
    for _ in range(600):  # bounded: the last megabytes may still be on their way
        if count == 64:
            break
        count, total, first, last, in_order = taker.call("stats", timeout=60)
    assert (count, total, in_order) == (64, 64 * MB, True)
    # The calls made while the stream was under way: from its first send
    # to the taker handling its last message.
    during = [latency for sent, latency in samples if began <= sent <= last]
    assert len(during) >= 5, f"only {len(during)} calls overlapped the stream ({last - began:.3f} s)"
    # Within 100 ms: the 99th percentile (on two cores shared with other
    # work a single call can be descheduled for longer, whatever the link
    # does), and no call near a second (a 64 MB batch frame held calls up to
    # 1.5 s before casts were split out of big batches).
    during.sort()
    p99 = during[min(len(during) - 1, int(len(during) * 0.99))]
    what = f"{len(during)} small calls during a {last - began:.3f} s stream"
    assert p99 < 0.100, f"99th percentile of {what}: {p99 * 1000:.1f} ms"
    assert during[-1] < 1.0, f"slowest of {what}: {during[-1] * 1000:.1f} ms"
    assert not nodedown.is_down()  # the link stayed up throughout
    assert "b" in node.nodes()
