"""Waiting in tests for a state that shows only by asking (no message to
synchronise on): each try is a round trip to some actor, never a sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


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
