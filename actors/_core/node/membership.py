"""Who a node counts as its cluster, and when a node must end its incarnation (pure policy).

Why a node ends its incarnation at all: a node declared down is quarantined
by the nodes that declared it (that incarnation never connects to them
again, so a ref that failed with ``noconnection`` never starts answering),
and after a network cut both sides may have declared each other down.
Reconnecting the same incarnation would bring back actors whose monitors
and links already fired, and a supervisor on each side may have restarted
the same child meanwhile.  So, as Akka's split-brain resolver does with
*keep majority*, one side of a cut carries on and the other ends its
incarnation: its application stops, and it comes back as a new incarnation
(a new node id) that every node admits, its supervision tree started
afresh.  Two rules decide which side ends, each from what one node sees:

* **minority** (`Membership.in_minority`): the node counts the nodes it was
  connected to and lost to silence (``net_tick_timeout``: a cut or a frozen
  host, not a process that died, whose tcp connection closed) as still
  members.  If the nodes it still reaches, itself included, are not more
  than half of those members, it is on the minority side and ends; on an
  even split the side holding the smallest node name stays.
* **quarantined** (`yields`): a node that is refused because a peer
  declared its incarnation down ends, unless it declared that peer down
  too (a pair cut: both stayed in the majority) and wins the tie-break:
  more nodes connected, then the smaller name.  Both sides evaluate the same
  rule, so exactly one of the two ends.

`Membership` also remembers, for ``otpy status`` and the observer, each
connected peer's address, incarnation and the wall-clock time it came up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SILENCE", "Membership", "PeerInfo", "RateLimit", "yields"]

#: The reason a link gives for a peer lost to silence (the only loss that may be a cut).
SILENCE = "net_tick_timeout"


@dataclass(frozen=True)
class PeerInfo:
    """A connected node as ``otpy status`` lists it."""

    name: str
    address: str | None
    incarnation: int
    up_since: float  # wall-clock seconds (time.time()) of its nodeup

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": self.address,
            "incarnation": f"{self.incarnation:x}",
            "up_since": self.up_since,
        }


@dataclass
class Membership:
    """What one incarnation of node ``me`` knows of its cluster (see the module's docstring)."""

    me: str
    up: dict[str, PeerInfo] = field(default_factory=dict)
    #: Nodes lost to silence and not back since (in any incarnation).
    unreachable: set[str] = field(default_factory=set)

    def node_up(self, info: PeerInfo) -> None:
        self.up[info.name] = info
        self.unreachable.discard(info.name)

    def node_down(self, name: str, reason: str) -> None:
        self.up.pop(name, None)
        if reason == SILENCE:
            self.unreachable.add(name)
        else:  # it closed, or its process died: gone, not on the far side of a cut
            self.unreachable.discard(name)

    def members(self) -> set[str]:
        return {self.me, *self.up, *self.unreachable}

    def in_minority(self) -> bool:
        """Whether the nodes reached now (this one too) are not a majority of the members."""
        reachable = {self.me, *self.up}
        members = self.members()
        if 2 * len(reachable) > len(members):
            return False
        if 2 * len(reachable) < len(members):
            return True
        return min(members) not in reachable  # an even split: the side of the smallest name stays

    def peers(self) -> list[dict[str, Any]]:
        """The connected peers, by name, as plain data."""
        return [self.up[name].to_dict() for name in sorted(self.up)]


def yields(me: str, my_up: int, other: str, other_up: int, mutual: bool) -> bool:
    """Whether node ``me``, refused by ``other`` because ``other`` declared it down, ends its incarnation.

    ``mutual``: ``me`` declared ``other``'s current incarnation down too.
    ``my_up``/``other_up``: how many nodes each is connected to now.
    """
    if not mutual:
        return True
    if my_up != other_up:
        return my_up < other_up
    return me > other


class RateLimit:
    """At most one event per key per ``period`` seconds (log lines about one peer)."""

    def __init__(self, period: float = 60.0) -> None:
        self.period = period
        self._last: dict[str, float] = {}

    def allow(self, key: str, now: float) -> bool:
        last = self._last.get(key)
        if last is not None and now - last < self.period:
            return False
        self._last[key] = now
        return True
