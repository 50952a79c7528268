"""smoosh's pure policy: the priority queue, the priority rules, windows, keys.

Everything here is plain data in, plain data out.  Time comes in as an
argument, nothing touches a file, so the seed's decisions can be tested in
isolation and the actors stay thin.

Keys name what is compacted, as in upstream smoosh:

* a database: its name, a ``str``;
* an index (a "view" in CouchDB): ``(db, index)``, a tuple of two ``str``;
* an index cleanup of a database: ``(INDEX_CLEANUP, db)``.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:  # pragma: no cover - import only for the type checker
    from actors.smoosh.settings import ChannelSettings

__all__ = [
    "INDEX_CLEANUP",
    "Key",
    "PriorityQueue",
    "get_priority",
    "in_window",
    "is_cleanup_key",
    "is_db_key",
    "is_view_key",
    "key_db",
    "parse_time",
    "quantize",
    "stringify",
    "utc_minutes",
    "validate_key",
]

#: The tag of an index cleanup key, ``(INDEX_CLEANUP, db)``.
INDEX_CLEANUP = "index_cleanup"

#: A database name, an ``(db, index)`` pair, or ``(INDEX_CLEANUP, db)``.
Key = Union[str, tuple[str, str]]

INF = math.inf


# -- keys ------------------------------------------------------------------


def validate_key(obj: Any) -> Key:
    """Normalise an object to enqueue, or raise naming what is wrong.

    Mirrors upstream `smoosh_utils:validate_arg/1`: bytes names become str,
    lists of two names become tuples (the shape persisted files hold).
    """
    if isinstance(obj, bytes):
        obj = obj.decode("utf-8")
    if isinstance(obj, str):
        if not obj:
            raise ValueError("smoosh key: database name is empty")
        return obj
    if isinstance(obj, (tuple, list)) and len(obj) == 2:
        first, second = (x.decode("utf-8") if isinstance(x, bytes) else x for x in obj)
        if isinstance(first, str) and isinstance(second, str) and first and second:
            return (first, second)
    raise ValueError(f"smoosh key {obj!r} is not a database name, a (db, index) pair or ({INDEX_CLEANUP!r}, db)")


def is_cleanup_key(key: Key) -> bool:
    return isinstance(key, tuple) and key[0] == INDEX_CLEANUP


def is_view_key(key: Key) -> bool:
    return isinstance(key, tuple) and key[0] != INDEX_CLEANUP


def is_db_key(key: Key) -> bool:
    return isinstance(key, str)


def key_db(key: Key) -> str:
    """The database a key belongs to."""
    if isinstance(key, str):
        return key
    return key[1] if key[0] == INDEX_CLEANUP else key[0]


def stringify(key: Key) -> str:
    """A key for log lines (`smoosh_utils:stringify/1`)."""
    if isinstance(key, str):
        return key
    if key[0] == INDEX_CLEANUP:
        return f"index_cleanup for {key[1]}"
    return f"{key[0]} {key[1]}"


# -- the priority queue ----------------------------------------------------


def _check_priority(priority: Any) -> float:
    if isinstance(priority, bool) or not isinstance(priority, (int, float)):
        raise TypeError(f"priority {priority!r} is not a number")
    if math.isnan(priority):
        raise ValueError("priority is NaN")
    return priority


def _check_capacity(capacity: Any) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise ValueError(f"capacity {capacity!r} is not a non-negative integer")
    return capacity


class PriorityQueue:
    """A bounded map of key -> priority that hands out the highest first.

    Port of upstream `smoosh_priority_queue` (a gb_tree keyed by
    ``{Priority, Time}`` plus a map from key to tree key):

    * `insert` of a key already queued with the same priority is a no-op (the
      key keeps its place); a different priority replaces the old one;
    * after an insert the queue is truncated to ``capacity`` by dropping the
      lowest entries;
    * `out` returns the highest priority key; ``float('inf')`` sorts above
      every number.  Among equal priorities the most recently inserted key
      comes out first and the oldest is evicted first, as the
      ``{Priority, Time}`` tree key orders them upstream.

    Two heaps with lazy deletion keep `insert`, `out` and eviction
    logarithmic; stale heap entries are dropped when they surface and the
    heaps are rebuilt when garbage outweighs live entries.
    """

    __slots__ = ("_entries", "_max_heap", "_min_heap", "_seq")

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[float, int]] = {}
        # max heap: (-priority, -seq, key); min heap: (priority, seq, key)
        self._max_heap: list[tuple[float, int, Hashable]] = []
        self._min_heap: list[tuple[float, int, Hashable]] = []
        self._seq = itertools.count()

    # -- mutation ----------------------------------------------------------

    def insert(self, key: Hashable, priority: float, capacity: int) -> None:
        """Queue ``key`` at ``priority``, then keep at most ``capacity`` entries."""
        priority = _check_priority(priority)
        capacity = _check_capacity(capacity)
        current = self._entries.get(key)
        if current is not None and current[0] == priority:
            return
        seq = next(self._seq)
        self._entries[key] = (priority, seq)
        heapq.heappush(self._max_heap, (-priority, -seq, key))
        heapq.heappush(self._min_heap, (priority, seq, key))
        self._truncate(capacity)
        self._maybe_compact()

    def out(self) -> Hashable | None:
        """Remove and return the highest priority key, or None when empty."""
        top = self._peek(self._max_heap, sign=-1)
        if top is None:
            return None
        key = top[2]
        heapq.heappop(self._max_heap)
        del self._entries[key]
        self._maybe_compact()
        return key

    def remove(self, key: Hashable) -> bool:
        """Forget ``key`` if queued; True when it was."""
        if self._entries.pop(key, None) is None:
            return False
        self._maybe_compact()
        return True

    def flush(self) -> None:
        """Drop every entry (`smoosh_priority_queue:flush/1`)."""
        self._entries.clear()
        self._max_heap.clear()
        self._min_heap.clear()

    # -- reading -----------------------------------------------------------

    def info(self) -> dict[str, float]:
        """``{"size": n, "min": lowest, "max": highest}``.

        As upstream's proplist, ``min`` and ``max`` are present only when the
        queue is not empty.
        """
        result: dict[str, float] = {"size": len(self._entries)}
        if self._entries:
            low = self._peek(self._min_heap, sign=1)
            high = self._peek(self._max_heap, sign=-1)
            assert low is not None and high is not None
            result["min"] = low[0]
            result["max"] = -high[0]
        return result

    def to_map(self) -> dict[Hashable, float]:
        """``{key: priority}`` of every queued key, highest first."""
        ordered = sorted(self._entries.items(), key=lambda kv: (-kv[1][0], -kv[1][1]))
        return {key: prio for key, (prio, _seq) in ordered}

    @classmethod
    def from_map(cls, entries: Mapping[Hashable, float], capacity: int = 9999) -> "PriorityQueue":
        """A queue holding ``entries`` (as `to_map` gives), bounded by ``capacity``."""
        queue = cls()
        # Insert lowest first, so that among equal priorities the order of
        # `to_map` (newest first) is kept when the entries come back out.
        items = list(entries.items())
        for key, priority in reversed(items):
            queue.insert(key, priority, capacity)
        return queue

    def priority(self, key: Hashable) -> float | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.to_map())

    def __repr__(self) -> str:
        return f"PriorityQueue({self.to_map()!r})"

    # -- internals ---------------------------------------------------------

    def _live(self, item: tuple[float, int, Hashable], sign: int) -> bool:
        entry = self._entries.get(item[2])
        return entry is not None and entry == (sign * item[0], sign * item[1])

    def _peek(self, heap: list[tuple[float, int, Hashable]], sign: int) -> tuple[float, int, Hashable] | None:
        while heap and not self._live(heap[0], sign):
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _truncate(self, capacity: int) -> None:
        while len(self._entries) > capacity:
            low = self._peek(self._min_heap, sign=1)
            assert low is not None
            heapq.heappop(self._min_heap)
            del self._entries[low[2]]

    def _maybe_compact(self) -> None:
        limit = 2 * len(self._entries) + 64
        if len(self._max_heap) > limit or len(self._min_heap) > limit:
            self._max_heap = [(-p, -s, k) for k, (p, s) in self._entries.items()]
            self._min_heap = [(p, s, k) for k, (p, s) in self._entries.items()]
            heapq.heapify(self._max_heap)
            heapq.heapify(self._min_heap)


# -- priorities ------------------------------------------------------------


def _check_size(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
        raise ValueError(f"{name} {value!r} is not a non-negative number")
    return value


def get_priority(
    channel_settings: "ChannelSettings",
    file_size: float,
    active_size: float,
    needs_upgrade: bool = False,
    changes: int | None = None,
) -> float:
    """How urgently a channel wants an object compacted; 0 means not at all.

    Upstream `smoosh_server:get_priority/4` (and `db_changed/2` in front of
    it), first rule that applies:

    * ``changes`` known and below ``min_changes`` -> 0 (databases only;
      pass ``changes=None`` when unknown, as for indexes);
    * an upgrade channel and an object that needs upgrading -> 1;
    * ``file_size <= min_size`` -> 0; ``file_size > max_size`` -> 0;
    * live data size 0 -> ``min_priority``;
    * ratio channel: ``r = file_size / active_size``; 0 when
      ``r <= min_priority`` or ``r > max_priority``, else ``r``;
    * slack channel: the same with ``s = file_size - active_size``;
    * anything else -> 0.
    """
    s = channel_settings
    file_size = _check_size("file_size", file_size)
    active_size = _check_size("active_size", active_size)
    if changes is not None and changes < s.min_changes:
        return 0
    if s.kind == "upgrade" and needs_upgrade:
        return 1
    if file_size <= s.min_size:
        return 0
    if file_size > s.max_size:
        return 0
    if active_size == 0:
        return s.min_priority
    if s.kind == "ratio":
        value = file_size / active_size
    elif s.kind == "slack":
        value = file_size - active_size
    else:
        return 0
    if value <= s.min_priority or value > s.max_priority:
        return 0
    return value


def quantize(priority: float) -> float:
    """Round a priority so that small changes do not reshuffle the queue.

    Upstream `smoosh_server:quantize/1`: an integer is returned unchanged; a
    float below 16 is rounded to the nearest sixteenth (a float result), a
    float at or above 16 to the nearest integer (an int result).  Halves
    round away from zero, as Erlang's ``round/1`` does (Python's ``round``
    would round them to even).  ``inf`` stays as it is.  Since re-inserting
    an unchanged priority is a no-op, a database whose ratio creeps from
    3.01 to 3.02 keeps its place.
    """
    priority = _check_priority(priority)
    if isinstance(priority, int) or math.isinf(priority):
        return priority
    if priority >= 16:
        return _round_half_away(priority)
    return _round_half_away(priority * 16) / 16


def _round_half_away(value: float) -> int:
    """Erlang ``round/1``: the nearest integer, halves away from zero.

    ``a - floor(a)`` is exact for a float ``a``, so unlike
    ``floor(a + 0.5)`` this never rounds a value just below a half up.
    """
    magnitude = abs(value)
    whole = math.floor(magnitude)
    if magnitude - whole >= 0.5:
        whole += 1
    return whole if value >= 0 else -whole


# -- windows ---------------------------------------------------------------


def parse_time(value: str | int | float, field: str = "time") -> int:
    """Minutes after midnight from ``"HH:MM"`` (00:00 .. 24:00) or a number."""
    if isinstance(value, bool):
        raise ValueError(f"{field} {value!r} is not HH:MM")
    if isinstance(value, (int, float)):
        if not 0 <= value <= 1440:
            raise ValueError(f"{field} {value!r} is not between 0 and 1440 minutes")
        return int(value)
    text = str(value).strip()
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        hours, minutes = int(parts[0]), int(parts[1])
    except ValueError:
        raise ValueError(f"{field} {value!r} is not HH:MM") from None
    if not (0 <= hours <= 24 and 0 <= minutes < 60) or (hours == 24 and minutes):
        raise ValueError(f"{field} {value!r} is not a time between 00:00 and 24:00")
    return hours * 60 + minutes


def in_window(now: str | int | float, from_: str | int | float, to: str | int | float) -> bool:
    """Whether ``now`` lies in the window ``[from_, to)`` (UTC, may cross midnight).

    Upstream `smoosh_utils:in_allowed_window/2`: when ``from_ < to`` the
    channel runs while ``from_ <= now < to``; otherwise (crossing midnight,
    or ``from_ == to`` meaning always) while ``now >= from_`` or
    ``now < to``.  Arguments are ``"HH:MM"`` strings or minutes after
    midnight.
    """
    n = parse_time(now, "now")
    f = parse_time(from_, "from")
    t = parse_time(to, "to")
    if f < t:
        return f <= n < t
    return n >= f or n < t


def utc_minutes(epoch_seconds: float) -> int:
    """Minutes after UTC midnight of a wall clock timestamp."""
    return int(epoch_seconds // 60) % 1440


def iter_keys(keys: Iterable[Any]) -> Iterator[Key]:
    """Validate many keys, for loaders of persisted data."""
    for key in keys:
        yield validate_key(key)
