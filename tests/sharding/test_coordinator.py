"""The coordinator on its own, in one node, with stand-in regions that report what they are told.

A stand-in region forwards every message it gets to a queue the test
reads, and answers nothing unless the test says so: that is how a hand-off
whose source never answers, and a leadership that flips quickly, are made
without a second node or a sleep.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from typing import Any

import pytest

from actors import ActorRef, GenServer, Node
from actors.sharding.coordinator import Coordinator
from actors.sharding.names import TAG
from actors.sharding.settings import Settings
from tests.polling import take_first

STORE = "postgresql://nobody@127.0.0.1:1/none"  # never connected to: the coordinator only reads the mode


class StandIn(GenServer):
    """A region that tells the test, by queue, every tagged message it receives."""

    def init(self, name: str, seen: "queue.Queue[tuple[str, tuple[Any, ...]]]") -> None:
        self.name = name
        self.seen = seen

    def handle_info(self, message: Any) -> None:
        self.seen.put((self.name, message))


@pytest.fixture
def node() -> Iterator[Node]:
    with Node() as n:
        yield n


def _start(
    node: Node, settings: Settings, names: tuple[str, ...], handoff_timeout: float = 10.0
) -> tuple[ActorRef, dict[str, ActorRef], "queue.Queue[tuple[str, tuple[Any, ...]]]"]:
    seen: queue.Queue[tuple[str, tuple[Any, ...]]] = queue.Queue()
    coordinator = node.spawn(Coordinator, "t", settings, handoff_timeout)
    assert coordinator is not None
    regions: dict[str, ActorRef] = {}
    for name in names:
        region = node.spawn(StandIn, name, seen)
        assert region is not None
        regions[name] = region
    return coordinator, regions, seen


def _lead(coordinator: ActorRef, regions: dict[str, ActorRef], held: dict[str, list[int]]) -> None:
    coordinator.send((TAG, "leader", True, list(regions.values())))
    for name, region in regions.items():
        coordinator.send((TAG, "register", region, name, False, held.get(name, [])))


def _next(seen: "queue.Queue[tuple[str, tuple[Any, ...]]]", who: str, kind: str, timeout: float) -> tuple[Any, ...]:
    got = take_first(seen, lambda e: e[0] == who and e[1][1] == kind, timeout)
    assert got is not None, f"{who} was not sent {kind!r} within {timeout} s"
    return got[1]


@pytest.mark.timeout(20)
def test_with_a_store_a_handoff_that_is_never_answered_names_the_target_after_a_timeout(node: Node) -> None:
    settings = Settings(shards=4, store=STORE, rebalance_every=0.1, max_moves=2)
    coordinator, regions, seen = _start(node, settings, ("a", "b"), handoff_timeout=0.5)
    _lead(coordinator, regions, {"a": [0, 1, 2, 3]})
    handoff = _next(seen, "a", "handoff", 10.0)  # a never answers
    began = time.monotonic()
    home = _next(seen, "b", "home", 10.0)
    assert (home[2], home[3]) == (handoff[2], regions["b"])  # b serves it once a's lease is gone
    assert time.monotonic() - began >= 0.4  # only after the timeout
    # The round was not held up for good: the second shard it moved goes the same way.
    assert _next(seen, "b", "home", 10.0)[2] != handoff[2]


@pytest.mark.timeout(20)
def test_without_a_store_a_stalled_handoff_keeps_its_shard_but_not_the_other_rounds(node: Node) -> None:
    settings = Settings(shards=6, rebalance_every=0.1, max_moves=1)
    coordinator, regions, seen = _start(node, settings, ("a", "b"), handoff_timeout=0.3)
    _lead(coordinator, regions, {"a": [0, 1, 2, 3, 4, 5]})
    first = _next(seen, "a", "handoff", 10.0)[2]  # never answered
    # The next round still runs: another shard is asked of a (stalled moves do not block rounds).
    second = _next(seen, "a", "handoff", 10.0)[2]
    assert second != first
    # a is alive: its unanswered shard is given to nobody.
    coordinator.send((TAG, "handed_off", second, regions["a"]))
    home = _next(seen, "b", "home", 5.0)
    assert home[2] == second
    assert first in coordinator.call("table")["moving"]
    # Its node lost: only now is the stalled shard placed elsewhere.
    node.exit(regions["a"], "kill")
    placed = take_first(seen, lambda e: e[0] == "b" and e[1][1] == "home" and e[1][2] == first, 5.0)
    assert placed is not None and placed[1][3] == regions["b"]


@pytest.mark.timeout(20)
def test_a_quick_leadership_flip_leaves_one_chain_of_rebalance_rounds(node: Node) -> None:
    every = 0.2
    settings = Settings(shards=10, rebalance_every=every, max_moves=1)
    coordinator, regions, seen = _start(node, settings, ("a", "b"))
    coordinator.send((TAG, "leader", True, list(regions.values())))
    coordinator.send((TAG, "leader", False, []))
    _lead(coordinator, regions, {"a": list(range(10))})
    # Each round with no move in flight moves one shard, which a hands off as soon as the test hears of it.
    first = 0.0
    for moved in range(1, 6):
        shard = _next(seen, "a", "handoff", 10.0)[2]
        first = first or time.monotonic()
        assert coordinator.call("table")["rounds"] <= moved + 1
        coordinator.send((TAG, "handed_off", shard, regions["a"]))
    took = time.monotonic() - first
    # One chain moves a shard per period, so five moves span four periods (a timer never fires
    # early; one period of slack for the test's own delays); a second chain, out of phase with
    # the first, moves two per period (seen: 0.40 s).
    assert took >= 3 * every, f"five moves in {took:.2f} s: more than one chain of rebalance rounds"
