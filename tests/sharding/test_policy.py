"""Sharding's pure policy: hashing, allocation and rebalance, buffers, passivation order."""

from __future__ import annotations

import subprocess
import sys

import pytest

from actors.sharding.activity import Activity
from actors.sharding.buffer import BufferFull, Buffers
from actors.sharding.placement import allocate, move_limit, rebalance, shard_of


@pytest.mark.timeout(5)
def test_a_key_hashes_to_the_same_shard_everywhere_and_spreads() -> None:
    # Pinned values: a change of hash would move every entity of a running cluster.
    assert shard_of("user-42", 100) == 98
    assert shard_of(7, 1000) == shard_of("7", 1000)
    # Independent of the process's salted hash(): a fresh interpreter agrees.
    code = "from actors.sharding import shard_of; print(shard_of('cart-1', 1000))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert int(out.stdout) == shard_of("cart-1", 1000)
    counts = [0] * 10
    for i in range(10_000):
        counts[shard_of(f"k{i}", 10)] += 1
    assert min(counts) > 900 and max(counts) < 1100
    with pytest.raises(TypeError, match="str or an int"):
        shard_of(1.5, 10)
    with pytest.raises(ValueError, match="shards"):
        shard_of("a", 0)


@pytest.mark.timeout(5)
def test_a_homeless_shard_goes_to_the_least_loaded_region_ties_by_name() -> None:
    assert allocate({0: "a", 1: "a", 2: "b"}, ["a", "b", "c"]) == "c"
    assert allocate({0: "a", 1: "b"}, ["b", "a"]) == "a"
    # A region that just lost the shard is passed over while another exists.
    assert allocate({0: "b"}, ["a", "b"], avoid="a") == "b"
    assert allocate({}, ["a"], avoid="a") == "a"
    with pytest.raises(ValueError, match="no region"):
        allocate({}, [])


def _apply(alloc: dict[int, str], moves: list) -> dict[int, str]:
    out = dict(alloc)
    for m in moves:
        assert out[m.shard] == m.source
        out[m.shard] = m.target
    return out


@pytest.mark.timeout(5)
def test_a_join_is_balanced_in_one_round_when_the_limit_allows() -> None:
    alloc = {s: ("a" if s < 50 else "b") for s in range(100)}
    moves = rebalance(alloc, ["a", "b", "c"], limit=40)
    after = _apply(alloc, moves)
    loads = sorted(list(after.values()).count(r) for r in "abc")
    assert loads == [33, 33, 34] and len(moves) == 33  # the fewest moves that balance
    assert rebalance(after, ["a", "b", "c"], limit=40) == []  # converged: nothing more


@pytest.mark.timeout(5)
def test_rounds_are_bounded_and_converge_without_moving_back() -> None:
    alloc = {s: "a" for s in range(100)}
    limit = move_limit(100)
    assert limit == 10
    rounds = 0
    moved: set[int] = set()
    while True:
        moves = rebalance(alloc, ["a", "b", "c", "d"], limit)
        if not moves:
            break
        assert len(moves) <= limit
        assert not {m.shard for m in moves} & moved  # a shard moves at most once
        moved |= {m.shard for m in moves}
        alloc = _apply(alloc, moves)
        rounds += 1
        assert rounds < 20
    assert sorted(list(alloc.values()).count(r) for r in "abcd") == [25, 25, 25, 25]
    assert rounds == 8  # 75 moves, 10 a round


@pytest.mark.timeout(5)
def test_move_limit_is_akkas_default_rule() -> None:
    assert move_limit(1000) == 20 and move_limit(100) == 10 and move_limit(5) == 1


@pytest.mark.timeout(5)
def test_buffers_keep_order_and_refuse_past_their_limit() -> None:
    buffers = Buffers("cart", 2)
    buffers.push(3, "a")
    buffers.push(3, "b")
    with pytest.raises(BufferFull, match="shard 3 is moving"):
        buffers.push(3, "c")
    buffers.push(4, "x")
    assert len(buffers) == 3 and buffers.holds(3)
    assert buffers.take(3) == ["a", "b"] and not buffers.holds(3)
    assert buffers.take(3) == []


@pytest.mark.timeout(5)
def test_passivation_takes_the_idle_then_the_least_recently_used() -> None:
    activity = Activity(idle=10.0, max_active=2)
    activity.touch("a", 0.0)
    activity.touch("b", 1.0)
    activity.touch("a", 2.0)
    assert activity.due(5.0) == []
    activity.touch("c", 6.0)  # three active, limit two: the least recently used goes
    assert activity.due(6.0) == ["b"]
    assert activity.due(12.5) == ["a"]  # idle 10.5 s
    assert len(activity) == 1 and "c" in activity
