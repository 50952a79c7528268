"""Sharded entities: an actor per key, anywhere in the cluster, at most one at a time.

``sharding.start(node, "cart", Cart, shards=100, idle=120.0)`` starts the
type's region on a node; ``sharding.ref("cart", "user-42").call(...)``
reaches the key's entity from anywhere, starting it where its shard lives.
docs/sharding.md says what is guaranteed, with and without a store.

Modules, pure first: `placement` (key -> shard, shard -> region), `buffer`,
`activity` (idle and LRU passivation), `settings`; then the store
(`state`) and what a process shares (`guard`); then the actors:
`entity`, `coordinator`, `region`; and `api`.
"""

from __future__ import annotations

from .api import EntityError, EntityRef, ref, spec, start, status
from .buffer import BufferFull
from .entity import EntityContext
from .placement import shard_of
from .settings import Settings

__all__ = [
    "BufferFull",
    "EntityContext",
    "EntityError",
    "EntityRef",
    "Settings",
    "ref",
    "shard_of",
    "spec",
    "start",
    "status",
]
