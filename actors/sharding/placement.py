"""Where a key lives: key -> shard by a stable hash, shard -> node by an allocation (pure).

``shard_of`` hashes the key's text with BLAKE2b: the same shard on every
node, every Python process (``hash()`` of a str is salted per process) and
every version of this library.

The allocation is the coordinator's table ``shard -> region``.  It changes
in two ways, both pure functions here:

- `allocate`: a shard without a home (first message, or its region left)
  goes to the region holding fewest shards (ties: the name that sorts first,
  so every coordinator picks the same).
- `rebalance`: after a join, shards move from regions above their fair share
  to regions below it.  Fair shares are exact (``n // r`` each, one more for
  the first ``n % r`` regions by load), so one round reaches a spread of at
  most one shard whenever the round's limit allows every move; Akka 2.6.10's
  ``LeastShardAllocationStrategy`` reaches the same in one or two rounds.
  A round moves at most `move_limit` shards (Akka's default rule: 10 % of
  the shards, at most 20), so a rolling restart never hands off everything
  at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Move", "allocate", "key_text", "move_limit", "rebalance", "shard_of"]

R = TypeVar("R", bound=Hashable)


def key_text(key: object) -> str:
    """The key as the hash sees it: a str as is, an int in decimal; anything else refused
    (a key must mean the same on every node)."""
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise TypeError(f"an entity key is a str or an int, got {key!r}")
    return key if isinstance(key, str) else str(key)


def shard_of(key: object, shards: int) -> int:
    """The shard of ``key`` among ``shards`` (0 .. shards-1), the same everywhere."""
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise ValueError(f"shards must be an int >= 1, got {shards!r}")
    digest = hashlib.blake2b(key_text(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def move_limit(shards: int, relative: float = 0.1, absolute: int = 20) -> int:
    """How many shards one rebalance round may move: ``relative`` of them, at most
    ``absolute``, at least one."""
    return max(1, min(absolute, int(shards * relative)))


def _loads(allocation: Mapping[int, R], regions: Iterable[R]) -> dict[R, list[int]]:
    loads: dict[R, list[int]] = {r: [] for r in regions}
    for shard, region in allocation.items():
        if region in loads:
            loads[region].append(shard)
    return loads


def _order(region: R) -> str:
    return str(region)


def allocate(allocation: Mapping[int, R], regions: Iterable[R], avoid: R | None = None) -> R:
    """The region a homeless shard goes to: the least loaded, ties by name.

    ``avoid`` is a region that just lost the shard (its lease ran out: cut
    off from the store, say): another takes it when there is one, or it
    would be handed straight back to the region least able to serve it."""
    loads = _loads(allocation, regions)
    if not loads:
        raise ValueError("no region hosts shards: start a region that is not a proxy")
    if avoid is not None and len(loads) > 1:
        loads.pop(avoid, None)
    return min(loads, key=lambda r: (len(loads[r]), _order(r)))


@dataclass(frozen=True)
class Move:
    shard: int
    source: Hashable
    target: Hashable


def rebalance(allocation: Mapping[int, R], regions: Iterable[R], limit: int) -> list[Move]:
    """At most ``limit`` moves that bring every region to its fair share.  Only shards
    allocated to one of ``regions`` count; the rest are `allocate`'s business."""
    loads = _loads(allocation, regions)
    if len(loads) < 2 or limit < 1:
        return []
    total = sum(len(s) for s in loads.values())
    order = sorted(loads, key=lambda r: (-len(loads[r]), _order(r)))
    base, extra = divmod(total, len(order))
    # The most loaded keep the extra shards, so as few shards move as possible.
    target = {r: base + (1 if i < extra else 0) for i, r in enumerate(order)}
    surplus: list[tuple[int, R]] = []
    for r in order:
        give = len(loads[r]) - target[r]
        if give > 0:
            # The highest-numbered shards move: the same choice on every coordinator.
            surplus.extend((s, r) for s in sorted(loads[r])[-give:])
    moves: list[Move] = []
    for r in sorted(loads, key=lambda r: (len(loads[r]), _order(r))):
        need = target[r] - len(loads[r])
        while need > 0 and surplus and len(moves) < limit:
            shard, source = surplus.pop(0)
            moves.append(Move(shard, source, r))
            need -= 1
    return moves
