"""Which active entities to passivate: idle too long, or least recently used past a limit (pure).

The region sees every message to its entities, so it keeps them in one
ordered map, most recently used last (``touch`` on every message; time
comes in as an argument).  `due` reads from the least recently used end
only: what has idled past ``idle`` seconds, then what is over
``max_active``, so a sweep costs what it passivates, not what is active.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

__all__ = ["Activity"]


class Activity:
    def __init__(self, idle: float | None, max_active: int | None) -> None:
        self.idle = idle
        self.max_active = max_active
        self._last: OrderedDict[Hashable, float] = OrderedDict()

    def touch(self, key: Hashable, now: float) -> None:
        self._last[key] = now
        self._last.move_to_end(key)

    def forget(self, key: Hashable) -> None:
        self._last.pop(key, None)

    def __len__(self) -> int:
        return len(self._last)

    def __contains__(self, key: object) -> bool:
        return key in self._last

    def due(self, now: float) -> list[Hashable]:
        """The entities to passivate now, least recently used first; they are forgotten."""
        out: list[Hashable] = []
        last = self._last
        while last:
            key, seen = next(iter(last.items()))
            idle = self.idle is not None and now - seen >= self.idle
            over = self.max_active is not None and len(last) > self.max_active
            if not (idle or over):
                break
            last.popitem(last=False)
            out.append(key)
        return out
