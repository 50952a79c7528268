"""Erlang's net_ticktime as pure policy, driven by a fake clock."""

from __future__ import annotations

import math

import pytest

from actors._core.net.tick import DEFAULT_NET_TICKTIME, Liveness, check_ticktime
from actors.clock import FakeClock


def test_defaults_and_validation():
    assert DEFAULT_NET_TICKTIME == 15.0
    assert Liveness().tick_interval == 3.75
    for bad in (0, -1, math.inf, math.nan, "5", True):
        with pytest.raises(ValueError, match="net_ticktime"):
            check_ticktime(bad)


def test_idle_connection_ticks_every_quarter_and_stays_up_while_peer_ticks():
    clock = FakeClock(100.0)
    live = Liveness(4.0)
    live.add("b", clock.now())
    plan = live.plan(clock.now())
    assert plan.tick == () and plan.down == () and plan.next_at == 101.0
    for _ in range(20):
        clock.advance(1.0)
        live.received("b", clock.now())  # the peer ticks too
        plan = live.plan(clock.now())
        assert plan.tick == ("b",) and plan.down == ()
        live.sent("b", clock.now())
        assert live.plan(clock.now()).next_at == clock.now() + 1.0


def test_silent_peer_is_down_exactly_at_ticktime():
    clock = FakeClock()
    live = Liveness(4.0)
    live.add("b", 0.0)
    for t in (1.0, 2.0, 3.0, 3.999):
        clock.set(t)
        plan = live.plan(t)
        assert plan.down == ()
        live.sent("b", t)  # we keep ticking; only receipt counts for liveness
    assert not live.is_down("b", 3.999)
    plan = live.plan(4.0)
    assert plan.down == ("b",) and plan.tick == ()
    assert live.is_down("b", 4.0)


def test_any_receipt_postpones_down():
    live = Liveness(2.0)
    live.add("b", 0.0)
    live.received("b", 1.5)
    assert live.plan(3.0).down == ()
    assert live.plan(3.5).down == ("b",)


def test_traffic_out_replaces_ticks():
    live = Liveness(4.0)
    live.add("b", 0.0)
    live.sent("b", 0.9)
    live.received("b", 0.9)
    plan = live.plan(1.0)
    assert plan.tick == () and plan.next_at == pytest.approx(1.9)


def test_times_never_move_backwards():
    live = Liveness(4.0)
    live.add("b", 10.0)
    live.received("b", 5.0)
    live.sent("b", 5.0)
    assert live.plan(13.9).down == ()
    assert live.plan(14.0).down == ("b",)


def test_several_peers_are_independent_and_next_deadline_is_the_earliest():
    live = Liveness(8.0)
    live.add("b", 0.0)
    live.add("c", 1.0)
    live.received("b", 6.0)
    plan = live.plan(2.0)
    assert set(plan.tick) == {"b"} and plan.next_at == 3.0  # c's tick at 1 + 2
    plan = live.plan(9.0)
    assert plan.down == ("c",) and "b" in plan.tick
    live.remove("c")
    assert "c" not in live and live.peers() == ["b"]
    live.remove("c")  # idempotent


def test_unknown_peers_are_ignored():
    live = Liveness(1.0)
    live.received("x", 5.0)
    live.sent("x", 5.0)
    assert not live.is_down("x", 100.0)
    assert live.plan(100.0) == live.plan(100.0)
    assert live.plan(100.0).next_at is None
