"""Liveness of node connections: Erlang's ``net_ticktime`` as pure policy.

Erlang sends a tick on a connection every ``net_ticktime / 4`` when nothing
else went out, and declares the peer down when nothing at all came in for
about ``net_ticktime``.  Any frame counts as proof of life, so a busy
connection costs no ticks.  This module only decides; the link that owns
the sockets tells it what was sent and received and when, with times from
an injected clock, and acts on the answers.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

__all__ = ["DEFAULT_NET_TICKTIME", "Liveness", "TickPlan", "check_ticktime"]

#: Erlang's ``net_ticktime`` default is 60 s; 15 s here, so a lost node is seen in seconds
#: (a supervisor moves its work sooner), at the price of a tick every few seconds per link.
DEFAULT_NET_TICKTIME = 15.0


def check_ticktime(value: float) -> float:
    """``value`` as a float, or `ValueError` unless it is finite and > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"net_ticktime must be a finite number of seconds > 0, got {value!r}")
    return float(value)


@dataclass
class _Peer:
    last_received: float
    last_sent: float


@dataclass(frozen=True)
class TickPlan:
    """What to do now: send a tick to ``tick``, declare ``down`` lost, wake at ``next_at``."""

    tick: tuple[Hashable, ...]
    down: tuple[Hashable, ...]
    next_at: float | None


class Liveness:
    """Per-peer last-sent and last-received times, and the decisions drawn from them."""

    def __init__(self, net_ticktime: float = DEFAULT_NET_TICKTIME) -> None:
        self.net_ticktime = check_ticktime(net_ticktime)
        self._peers: dict[Hashable, _Peer] = {}

    @property
    def tick_interval(self) -> float:
        return self.net_ticktime / 4.0

    def add(self, peer: Hashable, now: float) -> None:
        """Start watching ``peer``; a new connection counts as both sent and received."""
        self._peers[peer] = _Peer(now, now)

    def remove(self, peer: Hashable) -> None:
        self._peers.pop(peer, None)

    def __contains__(self, peer: Hashable) -> bool:
        return peer in self._peers

    def peers(self) -> list[Hashable]:
        return list(self._peers)

    def received(self, peer: Hashable, now: float) -> None:
        """Anything came in from ``peer`` (a tick or data)."""
        state = self._peers.get(peer)
        if state is not None and now > state.last_received:
            state.last_received = now

    def sent(self, peer: Hashable, now: float) -> None:
        """Anything went out to ``peer``; no tick is needed for a while."""
        state = self._peers.get(peer)
        if state is not None and now > state.last_sent:
            state.last_sent = now

    def is_down(self, peer: Hashable, now: float) -> bool:
        state = self._peers.get(peer)
        return state is not None and now - state.last_received >= self.net_ticktime

    def plan(self, now: float) -> TickPlan:
        """Who needs a tick, who is down, and when the next decision falls due.

        A peer that is down is not also ticked.  The caller removes down
        peers and records the ticks it sends (`sent`), then asks again at
        ``next_at`` at the latest.
        """
        tick: list[Hashable] = []
        down: list[Hashable] = []
        next_at: float | None = None
        interval = self.tick_interval
        for peer, state in self._peers.items():
            down_at = state.last_received + self.net_ticktime
            if now >= down_at:
                down.append(peer)
                continue
            tick_at = state.last_sent + interval
            if now >= tick_at:
                tick.append(peer)
                tick_at = now + interval
            due = min(down_at, tick_at)
            next_at = due if next_at is None else min(next_at, due)
        return TickPlan(tuple(tick), tuple(down), next_at)
