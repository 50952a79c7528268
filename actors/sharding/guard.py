"""What a region shares with its entities in one process: the shards' leases and the state store.

An entity must stop the moment its shard's lease deadline passes, even when
its region is busy or the process just thawed from a freeze: so before each
message it asks `expired` here -- two numbers compared, nothing that can
block.  The region registers its `Guard` when it starts and drops it when
it stops; entities find it by their type's name.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from actors.leases import LeaseSet

from .state import StateStore

__all__ = ["Guard", "drop", "find", "install"]

_guards: dict[str, "Guard"] = {}
_lock = threading.Lock()


def lease_name(type_name: str, shard: int) -> str:
    """A shard's lease in the store: one namespace with the replicator's jobs, apart by prefix."""
    return f"shard:{type_name}:{shard}"


@dataclass
class Guard:
    type_name: str
    leases: LeaseSet | None = None
    state: StateStore | None = None
    node: str = field(default="")

    def expired(self, shard: int) -> bool:
        """Entities of ``shard`` must stop: leases are on and this node's is gone or past
        its deadline.  Without a store, never (membership decides)."""
        return self.leases is not None and self.leases.expired(lease_name(self.type_name, shard))


def install(guard: Guard) -> None:
    with _lock:
        _guards[guard.type_name] = guard


def find(type_name: str) -> Guard | None:
    return _guards.get(type_name)


def drop(guard: Guard) -> None:
    with _lock:
        if _guards.get(guard.type_name) is guard:
            del _guards[guard.type_name]
