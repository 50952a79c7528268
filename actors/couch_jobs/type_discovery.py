"""Which job types need a notifier and an activity monitor (the logic of ``couch_jobs_server``).

A type exists while it has an activity timeout.  The server compares the
types in the store with the ones it runs monitors for, starts the missing
ones, stops the extra ones, and checks again after a jittered period.
"""

from __future__ import annotations

import random
from collections.abc import Collection

from actors.config import Config

from . import db, settings
from .model import JobType, decode_type
from .store import Store

__all__ = ["TypeDiscovery", "diff_types"]


def diff_types(
    store_types: Collection[JobType], running_types: Collection[JobType]
) -> tuple[list[JobType], list[JobType]]:
    """``(to_start, to_stop)``, each in the order given (the seed's ``--``)."""
    to_start = [t for t in store_types if t not in running_types]
    to_stop = [t for t in running_types if t not in store_types]
    return to_start, to_stop


class TypeDiscovery:
    """Reads the store's types and schedules the next check."""

    def __init__(self, store: Store, *, config: Config | None = None, rng: random.Random | None = None) -> None:
        self.store = store
        self.config = config
        self.rng = rng if rng is not None else random.Random()

    def store_types(self) -> list[JobType]:
        with self.store.transaction(write=False) as tx:
            return [decode_type(k) for k in db.get_types(tx)]

    def check_types(self, running_types: Collection[JobType]) -> tuple[list[JobType], list[JobType]]:
        return diff_types(self.store_types(), running_types)

    def next_check_delay(self) -> float:
        """Seconds until the next check: the period plus up to the jitter.

        The seed takes ``max(Period div 2, MaxJitter)`` here (where the
        activity monitor takes ``min``); kept as written.
        """
        period = settings.type_check_period_msec(self.config)
        max_jitter = max(period // 2, settings.type_check_max_jitter_msec(self.config))
        return (period + self.rng.randint(1, max(1, max_jitter))) / 1000.0
