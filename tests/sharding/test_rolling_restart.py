"""A rolling restart of three sharding nodes under load: how long calls fail, how many shards move.

This test's node a is a proxy region (it hosts nothing) and the driver: a
thread calls the counter entities of 60 keys round robin while node
processes b, c and d are stopped and started again one at a time, each
restart waiting for the shards to spread again.  The bounds asserted (and
the figures printed, run with ``-s``) are the ones docs/sharding.md gives:

- a key's *outage*, from the start of its first failed call to the end of
  its next successful one, and the slowest call that succeeded (held in a
  buffer while its shard moved), stay under `OUTAGE_BOUND` seconds;
- the shards a restart moves (counted by the regions: every shard a region
  begins to host) are at most twice a node's fair share: its shards go to
  the others when it stops, and as many come back when it returns.
"""

from __future__ import annotations

import math
import threading
import time

import pytest

from actors import CallTimeout, Exit, Node, sharding
from tests.polling import poll_until
from tests.sharding.test_sharding_nodes import Peer

SHARDS = 20
NODES = ("b", "c", "d")
KEYS = [f"r{i}" for i in range(60)]
#: Seconds a key may stay unanswered during a restart: a new coordinator waits up to SETTLE (2 s) for
#: the regions to register, plus round trips on a loaded machine (measured: docs/sharding.md).
OUTAGE_BOUND = 5.0
#: Shards one restart may move: the node's fair share out, and as many back.
MOVES_BOUND = 2 * math.ceil(SHARDS / len(NODES))


class Driver:
    """Calls every key in turn from one thread; keeps each key's longest outage."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.calls = 0
        self.failed = 0
        self.acked: dict[str, int] = dict.fromkeys(KEYS, 0)
        self.down_since: dict[str, float] = {}
        self.longest = 0.0
        self.slowest = 0.0
        self.errors: dict[str, int] = {}
        self.thread = threading.Thread(target=self._run, name="rolling-driver", daemon=True)

    def _run(self) -> None:
        for i in range(10_000_000):  # until stopped; bounded as a backstop
            if self.stop.is_set():
                return
            k = KEYS[i % len(KEYS)]
            began = time.monotonic()
            try:
                sharding.ref("counter", k).call(1, timeout=5.0)
            except (Exit, CallTimeout) as exc:
                self.failed += 1
                what = str(exc)[:120]
                self.errors[what] = self.errors.get(what, 0) + 1
                self.down_since.setdefault(k, began)
            else:
                self.acked[k] += 1
                self.slowest = max(self.slowest, time.monotonic() - began)
                since = self.down_since.pop(k, None)
                if since is not None:
                    self.longest = max(self.longest, time.monotonic() - since)
            self.calls += 1


def _started(name: str) -> int:
    return int(sharding.status("counter", node=name)["shards_started"])


def _spread(names: tuple[str, ...]) -> bool:
    table = sharding.status("counter", node=min(names)).get("table", {})
    loads = sorted(len(s) for s in table.get("shards", {}).values())
    return table.get("moving") == [] and loads == [6, 7, 7]


def _start(name: str, key: str, node_a: Node) -> Peer:
    peer = Peer(name, key)
    try:
        assert node_a.connect(peer.address) == name
        assert peer.ask("start -", "STARTED") == ""
    except BaseException:
        peer.close()
        raise
    return peer


@pytest.mark.timeout(60)
def test_a_rolling_restart_fails_no_key_for_long_and_moves_a_bounded_number_of_shards(node_a: Node, key: str) -> None:
    peers: dict[str, Peer] = {}
    driver = Driver()
    try:
        for name in NODES:
            peers[name] = _start(name, key, node_a)
        sharding.start(node_a, "counter", None, shards=SHARDS, rebalance_every=0.5, proxy=True)
        driver.thread.start()
        poll_until(lambda: _spread(NODES), "shards spread over b, c and d", seconds=30.0)
        moved: dict[str, int] = {}
        for name in NODES:
            others = tuple(n for n in NODES if n != name)
            before = {n: _started(n) for n in others}
            peers.pop(name).close()  # a clean stop: the node closes, its region stops
            peers[name] = _start(name, key, node_a)
            poll_until(lambda: _spread(NODES), f"shards spread again after {name}'s restart", seconds=30.0)
            moved[name] = sum(_started(n) - before[n] for n in others) + _started(name)
        driver.stop.set()
        driver.thread.join(timeout=10.0)
        print(
            f"\nrolling restart of {', '.join(NODES)} ({SHARDS} shards, {len(KEYS)} keys): "
            f"{driver.calls} calls, {driver.failed} failed {driver.errors}, longest outage of a key "
            f"{driver.longest:.2f} s, slowest call {driver.slowest:.2f} s, shards moved per restart {moved}"
        )
        assert driver.longest < OUTAGE_BOUND and driver.slowest < OUTAGE_BOUND, (driver.longest, driver.slowest)
        assert all(0 < n <= MOVES_BOUND for n in moved.values()), moved
        assert driver.calls > 10 * len(KEYS)  # the load ran through all of it
    finally:
        driver.stop.set()
        for peer in peers.values():
            peer.close()
