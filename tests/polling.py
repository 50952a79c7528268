"""Bounded waits for tests: for a state that shows only by asking (no message
to synchronise on; each try is a round trip to some actor, never a sleep),
and for the first matching item on a queue that events are put on."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def poll_until(check: Callable[[], Any], what: str, seconds: float = 20.0, limit: int = 1_000_000) -> Any:
    """The first truthy ``check()``; bounded in time and in tries.

    A bound in tries alone ran out on a loaded machine: a few thousand quick
    round trips can all fall before one restart finishes.
    """
    deadline = time.monotonic() + seconds
    for _ in range(limit):
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


def take_first(q: "queue.Queue[T]", match: Callable[[T], bool], timeout: float) -> T | None:
    """The first item taken off ``q`` within ``timeout`` s for which ``match``
    is true, or None when none came (so ``q`` must never carry None).

    The items before it are taken and dropped: the callers wait for one kind
    of event among others they do not care about.  Bounded in time: every
    round either returns or takes an item, and the deadline is looked at
    each round.
    """
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            item = q.get(timeout=left)
        except queue.Empty:
            return None
        if match(item):
            return item
