"""A bounded max-priority heap of non-negative float priorities (the seed's `hqueue`).

IOQ2 replaced IOQ1's lists and queues with `hqueue`, a mutable array heap that
only supports float priorities, because the request queue is the hot path of
every IO request.  This is the same structure over `heapq`: keys are stored
negated so `heapq`'s min-heap pops the highest priority first, and a sequence
number breaks ties so equal priorities come out first-in first-out.

`scale_by` multiplies every stored key by a positive factor.  Multiplying all
keys by the same positive number keeps every parent/child relation of the heap,
so the auto-scaling elevator needs no re-heapify; zero stays zero, which is
why zero-priority work never rises.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

__all__ = [
    "DEFAULT_MAX_SIZE",
    "Empty",
    "Full",
    "HQueue",
    "HQueueError",
    "InvalidPriority",
]

T = TypeVar("T")

#: Default bound on the number of queued items; a server queue that grows past
#: this is a runaway producer, and failing the producer beats exhausting memory.
DEFAULT_MAX_SIZE = 1 << 20

_FLOAT_MAX = float.fromhex("0x1.fffffffffffffp+1023")


class HQueueError(Exception):
    """Base class of the heap's errors."""


class Empty(HQueueError, LookupError):
    """`extract_max` on an empty heap."""


class Full(HQueueError):
    """`insert` on a heap that already holds ``max_size`` items."""


class InvalidPriority(HQueueError, ValueError):
    """A priority that is not a finite number >= 0."""


def _check_priority(priority: Any) -> float:
    if isinstance(priority, bool) or not isinstance(priority, (int, float)):
        raise InvalidPriority(f"priority must be a number >= 0, got {priority!r} ({type(priority).__name__})")
    value = float(priority)
    if not 0.0 <= value <= _FLOAT_MAX:
        raise InvalidPriority(f"priority must be a finite number >= 0, got {priority!r}")
    return value


class HQueue(Generic[T]):
    """Max-priority queue: O(log n) `insert` and `extract_max`, O(n) `scale_by`."""

    __slots__ = ("_heap", "_seq", "_max_size")

    def __init__(self, max_size: int = DEFAULT_MAX_SIZE) -> None:
        self._heap: list[tuple[float, int, T]] = []
        self._seq = 0
        self._max_size = self._check_max_size(max_size)

    @staticmethod
    def _check_max_size(max_size: Any) -> int:
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ValueError(f"max_size must be an integer >= 1, got {max_size!r}")
        return max_size

    # -- the hot path ------------------------------------------------------

    def insert(self, priority: float, item: T) -> None:
        """Queue ``item``; raises `InvalidPriority` or `Full`."""
        if type(priority) is not float or not 0.0 <= priority <= _FLOAT_MAX:
            priority = _check_priority(priority)
        heap = self._heap
        if len(heap) >= self._max_size:
            raise Full(f"hqueue is full ({self._max_size} items); cannot insert {item!r}")
        self._seq += 1
        heapq.heappush(heap, (-priority, self._seq, item))

    def extract_max(self) -> tuple[float, T]:
        """Remove and return ``(priority, item)`` of the highest priority; raises `Empty`."""
        if not self._heap:
            raise Empty("extract_max on an empty hqueue")
        key, _seq, item = heapq.heappop(self._heap)
        return -key, item

    def scale_by(self, factor: float) -> None:
        """Multiply every queued priority by ``factor`` (> 0), keeping the heap order."""
        if isinstance(factor, bool) or not isinstance(factor, (int, float)):
            raise ValueError(f"scale factor must be a number > 0, got {factor!r}")
        f = float(factor)
        if not 0.0 < f <= _FLOAT_MAX:
            raise ValueError(f"scale factor must be a finite number > 0, got {factor!r}")
        # Overflowing to infinity would tie every large key; cap at the largest
        # float instead, which keeps them ahead of everything finite.
        self._heap = [(max(key * f, -_FLOAT_MAX), seq, item) for key, seq, item in self._heap]

    # -- introspection -----------------------------------------------------

    def size(self) -> int:
        return len(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def is_empty(self) -> bool:
        return not self._heap

    @property
    def max_size(self) -> int:
        return self._max_size

    def set_max_size(self, max_size: int) -> None:
        """Change the bound; refuses to shrink below the current size."""
        value = self._check_max_size(max_size)
        if value < len(self._heap):
            raise ValueError(f"max_size {value} is below the current size {len(self._heap)}")
        self._max_size = value

    def to_list(self) -> list[tuple[float, T]]:
        """``(priority, item)`` pairs in the order `extract_max` would return them."""
        return [(-key, item) for key, _seq, item in sorted(self._heap, key=_order)]

    def __iter__(self) -> Iterator[tuple[float, T]]:
        return iter(self.to_list())

    def clear(self) -> list[tuple[float, T]]:
        """Remove everything; returns what was queued (in extraction order)."""
        items = self.to_list()
        self._heap = []
        return items

    def __repr__(self) -> str:
        return f"HQueue(size={len(self._heap)}, max_size={self._max_size})"


def _order(entry: tuple[float, int, Any]) -> tuple[float, int]:
    return entry[0], entry[1]
