"""The staleness access table of `smoosh_server` (the ``smoosh_access`` ETS table).

A busy database sends an update event per write; smoosh computes its
priority at most once per ``staleness`` minutes.  The table remembers when
each object was last handed to a channel, is capped in size so a flood of
distinct names cannot grow it without bound, and is swept periodically by
the access cleaner.  Time is passed in (seconds, monotonic).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

__all__ = ["NEVER", "AccessTable"]

#: "Never accessed" (upstream ``-1 bsl 58``): older than any real timestamp.
NEVER = -float(1 << 58)


class AccessTable:
    """Last enqueue time per object; safe to share between threads.

    Upstream readers (`enqueue/1` in the caller's process) and the writer
    (the server) share one ETS table; the lock gives the same guarantee.
    """

    def __init__(self, max_size: int = 1_000_000) -> None:
        if max_size < 0:
            raise ValueError(f"access table max_size {max_size!r} is negative")
        self.max_size = max_size
        self._times: dict[Hashable, float] = {}
        self._lock = threading.Lock()

    def last_updated(self, key: Hashable) -> float:
        with self._lock:
            return self._times.get(key, NEVER)

    def stale_enough(self, key: Hashable, now: float, staleness_sec: float) -> bool:
        """True when ``key`` was not enqueued within the last ``staleness_sec``."""
        return now - self.last_updated(key) > staleness_sec

    def record(self, key: Hashable, now: float) -> bool:
        """Remember that ``key`` was enqueued at ``now``; False when the table is full."""
        with self._lock:
            if key not in self._times and len(self._times) >= self.max_size:
                return False
            self._times[key] = now
            return True

    def clean(self, now: float, staleness_sec: float) -> int:
        """Drop entries older than the staleness horizon; returns how many."""
        limit = now - staleness_sec
        with self._lock:
            old = [key for key, at in self._times.items() if at < limit]
            for key in old:
                del self._times[key]
        return len(old)

    @staticmethod
    def next_clean_delay(interval: float, jitter: float) -> float:
        """Seconds to the next sweep: ``interval`` plus ``jitter`` (0..1) of it.

        Upstream sleeps ``Interval + rand:uniform(Interval)`` milliseconds so
        that cleaners of many nodes do not sweep in step.
        """
        if not 0 <= jitter <= 1:
            raise ValueError(f"jitter {jitter!r} is not between 0 and 1")
        return interval + jitter * interval

    def __len__(self) -> int:
        with self._lock:
            return len(self._times)
