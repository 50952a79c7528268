"""Wake-ups for blocked `accept` and `wait` calls, without busy polling.

The seed blocks on FoundationDB watches.  Here a `Waker` plays that part:
whoever commits a change to jobs of a type calls ``notify(type_key)``; a
caller blocked in `accept`/`wait` sleeps in ``wait`` until a type it cares
about is notified or its timeout passes.

- Within one process the store's commit listener calls `notify` after every
  commit, so a worker thread wakes as soon as another thread adds a job.
- Across the processes of a node the actor layer broadcasts change
  notifications and calls `notify` in each receiving process.
- Writes nobody notifies us about (another node, a process without the
  actor layer) are picked up because callers never sleep longer than
  ``recheck_interval`` before re-reading the store.

Lost wake-ups are avoided with generation tokens: a caller takes
``token(types)`` *before* reading the store, then ``wait(types, token, t)``
returns at once if anything was notified since.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from typing import Protocol

__all__ = ["ConditionWaker", "Waker", "DEFAULT_RECHECK_INTERVAL"]

#: Seconds between re-checks of the store by a blocked caller.
DEFAULT_RECHECK_INTERVAL = 0.25


class Waker(Protocol):
    recheck_interval: float

    def notify(self, type_key: str) -> None:
        """Something about jobs of ``type_key`` changed (committed)."""
        ...

    def notify_many(self, type_keys: Iterable[str]) -> None: ...

    def token(self, type_keys: Collection[str]) -> object:
        """An opaque marker of what has been notified so far for ``type_keys``."""
        ...

    def wait(self, type_keys: Collection[str], token: object, timeout: float) -> bool:
        """Block until one of ``type_keys`` is notified after ``token``; False on timeout.

        ``timeout`` is capped at ``recheck_interval``, so callers always
        re-check the store at least that often.
        """
        ...


class ConditionWaker:
    """The default waker: one `threading.Condition` and a generation per type."""

    def __init__(self, recheck_interval: float = DEFAULT_RECHECK_INTERVAL) -> None:
        if recheck_interval <= 0:
            raise ValueError(f"recheck_interval must be positive seconds, got {recheck_interval!r}")
        self.recheck_interval = recheck_interval
        self._cond = threading.Condition(threading.Lock())
        self._generations: dict[str, int] = {}

    def notify(self, type_key: str) -> None:
        self.notify_many((type_key,))

    def notify_many(self, type_keys: Iterable[str]) -> None:
        with self._cond:
            for key in type_keys:
                self._generations[key] = self._generations.get(key, 0) + 1
            self._cond.notify_all()

    def token(self, type_keys: Collection[str]) -> tuple[int, ...]:
        with self._cond:
            return tuple(self._generations.get(k, 0) for k in type_keys)

    def _changed(self, type_keys: Collection[str], token: object) -> bool:
        return tuple(self._generations.get(k, 0) for k in type_keys) != token

    def wait(self, type_keys: Collection[str], token: object, timeout: float) -> bool:
        limit = max(0.0, min(timeout, self.recheck_interval))
        with self._cond:
            return self._cond.wait_for(lambda: self._changed(type_keys, token), limit)

    def generation(self, type_key: str) -> int:
        """How many notifications ``type_key`` has had (for inspection and tests)."""
        with self._cond:
            return self._generations.get(type_key, 0)
