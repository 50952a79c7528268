"""Messages held while their shard has no home or their entity is moving (pure).

A region buffers per shard while it asks where the shard lives, while the
shard is handed off, and while an entity passivates.  Each buffer is
bounded (``limit`` messages per shard), so a shard that cannot be placed
(no region, the store away) costs bounded memory: the message past the
limit is refused with `BufferFull`, which a call raises in its caller and a
cast or send counts as dropped.  Order is kept: what is drained comes out
in the order it went in, and what arrives during a drain queues behind it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Any

__all__ = ["BufferFull", "Buffers"]


class BufferFull(Exception):
    """A message for an entity whose shard is moving found that shard's buffer full."""

    def __init__(self, type_name: str, shard: Hashable, limit: int) -> None:
        super().__init__(
            f"sharding {type_name!r}: shard {shard!r} is moving and already buffers {limit} messages; "
            "retry later, or raise [sharding] buffer"
        )
        self.type_name = type_name
        self.shard = shard
        self.limit = limit


class Buffers:
    """One bounded FIFO per key (a shard, or a shard's entity)."""

    def __init__(self, type_name: str, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"a buffer limit is an int >= 1, got {limit!r}")
        self.type_name = type_name
        self.limit = limit
        self._queues: dict[Hashable, deque[Any]] = {}

    def push(self, key: Hashable, item: Any) -> None:
        """Hold ``item`` for ``key``; `BufferFull` when ``key`` already holds ``limit``."""
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
        elif len(queue) >= self.limit:
            raise BufferFull(self.type_name, key, self.limit)
        queue.append(item)

    def holds(self, key: Hashable) -> bool:
        return key in self._queues

    def take(self, key: Hashable) -> list[Any]:
        """Everything held for ``key``, oldest first; ``key`` holds nothing after."""
        queue = self._queues.pop(key, None)
        return list(queue) if queue is not None else []

    def keys(self) -> list[Hashable]:
        return list(self._queues)

    def __len__(self) -> int:
        """Messages held in all."""
        return sum(len(q) for q in self._queues.values())
