"""Big messages stall nothing on a slow network link between two hosts.

Hosts h1 and h2 talk over a link slowed by a token bucket (``tc ... tbf``),
the nodes run with ``net_ticktime`` 2 s.  A frame above 32 KB crosses in
fragments, each a sign of life, so a link that takes longer than a tick
to carry one message is not taken for a dead one; and a sender hands the
link one fragment at a time, so a small call that another actor of the
same process sends to the same process of the other node (the one
connection they share) waits behind about 100 KB, not behind the
megabytes queued after it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from actors.attach import Attached
from tests.cluster.bulk_actors import Pinger, Streamer, Taker
from tests.hosts.nodes import Cluster

MB = 1 << 20
RATE = "100mbit"  # 48 MB at 12.5 MB/s: 4 s at best
#: The bucket's queue holds at most this much delay (its byte limit is rate x latency).
LATENCY = "20ms"


def _percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _stream_and_ping(
    cluster: Cluster, rate: str, count: int, ping_seconds: float, latency: str = LATENCY, burst: str = "64kb"
) -> tuple[list[Any], float, float, list[Any]]:
    """An actor of h1's node process streams ``count`` casts of 1 MB to a
    taker in a host of h2 while another actor of the same process calls an
    echo in the same host of h2: both share h1's one connection to h2.
    Returns the small calls' samples, when the stream began and ended, and
    the taker's stats."""
    h1 = cluster["h1"]
    streamer = h1.spawn(Streamer)  # host None: h1's node process, on its link to h2
    pinger = h1.spawn(Pinger)
    taker = h1.spawn(Taker, on="h2", host="bulk")
    echo = h1.spawn(Taker, on="h2", host="bulk")
    for host in ("h1", "h2"):
        cluster.topo.slow(host, rate=rate, burst=burst, latency=latency)
    streaming, pinging = Attached(h1.ready.rundir, timeout=30.0), Attached(h1.ready.rundir, timeout=30.0)
    taking = Attached(cluster["h2"].ready.rundir, timeout=30.0)
    samples: list[Any] = []
    pings = threading.Thread(
        target=lambda: samples.extend(pinging.call(pinger, ("pings", echo, ping_seconds), timeout=120.0)),
        daemon=True,
    )
    try:
        pinging.call(pinger, ("pings", echo, 0.5), timeout=60.0)  # both paths warm
        pings.start()
        began = streaming.call(streamer, ("stream", taker, count, MB), timeout=150.0)
        stats = taking.call(taker, "stats", timeout=30.0)
        deadline = time.monotonic() + 120.0
        while stats[0] < count and time.monotonic() < deadline:  # bounded: the last megabytes are on the wire
            threading.Event().wait(0.2)  # paces the polling of the taker, which announces nothing
            stats = taking.call(taker, "stats", timeout=30.0)
    finally:
        if pings.ident is not None:
            pings.join(timeout=150.0)
        assert not pings.is_alive()
        for view in (streaming, pinging, taking):
            view.close()
        for host in ("h1", "h2"):
            cluster.topo.unslow(host)
    return samples, began, stats[3] or began, stats


@pytest.mark.timeout(240)
def test_a_link_slower_than_a_tick_per_message_stays_up(cluster: Cluster) -> None:
    """At 2 Mbit/s a 1 MB message takes four seconds, twice the tick time:
    each fragment that arrives is a sign of life, so three of them arrive,
    in order, and neither side declares the other down."""
    samples, began, last, (count, total, _first, _last, in_order) = _stream_and_ping(
        cluster, "2mbit", 3, 1.0, latency="200ms", burst="32kb"
    )
    assert (count, total, in_order) == (3, 3 * MB, True)
    assert last - began > 2 * cluster.net_ticktime, "the link was not slow"
    assert cluster.views() == {"h1": ["h2", "h3"], "h2": ["h1", "h3"], "h3": ["h1", "h2"]}
    assert not [line for n in cluster.nodes.values() for line in n.log if "nodedown" in line]


@pytest.mark.timeout(240)
def test_small_calls_of_the_same_process_pass_its_stream_of_big_ones(cluster: Cluster) -> None:
    """The stream and the small calls share one connection: fragments, one
    of them at a time handed to ZeroMQ and a small kernel buffer keep each
    call behind a hundred kilobytes (8 ms at this rate), not behind the
    megabytes queued after them (seconds when a sender handed ZeroMQ every
    megabyte at once).  The bound on the tail leaves room for the two cores
    being shared with other work; the figures are printed."""
    samples, began, last, (count, total, _first, _last, in_order) = _stream_and_ping(cluster, RATE, 48, 12.0)
    assert (count, total, in_order) == (48, 48 * MB, True)
    during = sorted(latency for sent, latency in samples if began <= sent <= last)
    what = f"{len(during)} small calls during a {last - began:.2f} s stream of 48 x 1 MB on one connection"
    assert len(during) >= 20, what
    p50, p99 = _percentile(during, 0.5), _percentile(during, 0.99)
    what += f": p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, max {during[-1] * 1000:.1f} ms"
    print(what)
    assert p50 < 0.020, what
    assert p99 < 0.080, what
    assert not [line for n in cluster.nodes.values() for line in n.log if "nodedown" in line]
