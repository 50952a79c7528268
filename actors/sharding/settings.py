"""A sharded type's settings: `start`'s arguments, with ``[sharding]`` from the config as defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from actors.leases import LeaseTimes
from actors.leases.pg import is_postgres, redact

from .placement import move_limit

__all__ = ["DEFAULT_IDLE", "SECTION", "Settings"]

SECTION = "sharding"
#: Seconds without a message after which an entity is passivated (Akka's default too).
DEFAULT_IDLE = 120.0


def _seconds(name: str, value: Any, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"sharding {name} must be a number of seconds > 0, got {value!r}")


def _count(name: str, value: Any, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"sharding {name} must be an int >= 1, got {value!r}")


@dataclass(frozen=True)
class Settings:
    """``shards``: how many shards the keys hash onto (the same on every node, for the
    type's lifetime); ``idle``: seconds before an unused entity is passivated (None:
    never); ``max_active``: entities active on one node before the least recently
    used is passivated; ``buffer``: messages held per moving shard; ``store``: a
    PostgreSQL URL whose leases hold the shards (None: membership alone);
    ``lease_ttl``; ``rebalance_every``: seconds between rebalance rounds;
    ``max_moves``: shards moved per round (default 10 % of them, at most 20);
    ``remember``: the entities active in a shard are started again wherever the
    shard goes next (until passivated)."""

    shards: int = 100
    idle: float | None = DEFAULT_IDLE
    max_active: int | None = None
    buffer: int = 10_000
    store: str | None = None
    lease_ttl: float = 15.0
    rebalance_every: float = 2.0
    max_moves: int | None = None
    remember: bool = False

    def __post_init__(self) -> None:
        _count("shards", self.shards)
        _seconds("idle", self.idle, allow_none=True)
        _count("max_active", self.max_active, allow_none=True)
        _count("buffer", self.buffer)
        _seconds("lease_ttl", self.lease_ttl)
        _seconds("rebalance_every", self.rebalance_every)
        _count("max_moves", self.max_moves, allow_none=True)
        if not isinstance(self.remember, bool):
            raise ValueError(f"sharding remember must be True or False, got {self.remember!r}")
        if self.store is not None and not is_postgres(self.store):
            raise ValueError(f"sharding store must be a postgresql:// URL, got {redact(str(self.store))!r}")

    @property
    def moves_per_round(self) -> int:
        return self.max_moves if self.max_moves is not None else move_limit(self.shards)

    @property
    def times(self) -> LeaseTimes:
        return LeaseTimes.from_ttl(self.lease_ttl)

    @classmethod
    def from_config(cls, config: Any, **given: Any) -> "Settings":
        """``given`` (start's keyword arguments) over ``[sharding]``'s keys."""
        section = config.section(SECTION) if config is not None else {}
        values: dict[str, Any] = {}
        store = str(section.get("store") or "").strip()
        if store:
            values["store"] = store
        for name, kind in (("lease_ttl", float), ("rebalance_every", float), ("buffer", int), ("max_active", int)):
            raw = section.get(name)
            if raw not in (None, ""):
                try:
                    values[name] = kind(raw)
                except ValueError:
                    raise ValueError(f"[sharding] {name}: not a number: {raw!r}") from None
        values.update({k: v for k, v in given.items() if v is not None or k in ("idle",)})
        return cls(**values)
