"""A replication job's lease: the shared `actors.leases.LeaseHolder` on the ``_replicator`` store.

The holder (acquire, renewals off the job's actor, its own deadline) and
the rules are `actors.leases`'; this module only opens it on the
replicator's store (`open_holder`) and reads the audit of runs.  Every
store operation is bounded by `LeaseTimes.op_timeout` (the store handle's
statement and connect timeouts), so a holder cut off from the store learns
it in bounded time, and `must_stop` tells it when to stop the job.

`LeaseConfig` is what a job process reads from ``[replicator]``: the store
URL, whether jobs take leases (``lease``: on by default with a PostgreSQL
store) and the TTL (``lease_ttl``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors.leases import LeaseHolder, LeaseTimes, Run
from actors.leases import sql as lease_sql

from .settings import SECTION, InvalidSetting
from .stores import is_postgres, open_replicator_db

__all__ = ["DEFAULT_LEASE_TTL", "LeaseConfig", "LeaseHolder", "open_holder", "read_runs"]

#: Seconds a grant lasts unless ``[replicator] lease_ttl`` says otherwise.
DEFAULT_LEASE_TTL = 15.0


@dataclass(frozen=True)
class LeaseConfig:
    """``[replicator] store``, ``lease`` and ``lease_ttl``, checked."""

    store: str | None = None
    enabled: bool = False
    ttl: float = DEFAULT_LEASE_TTL

    def __post_init__(self) -> None:
        if self.store is not None and (not isinstance(self.store, str) or not self.store):
            raise InvalidSetting("store", self.store, "must be a postgresql:// URL")
        if self.store is not None and not is_postgres(self.store):
            raise InvalidSetting("store", "(not shown)", "must be a postgresql:// or postgres:// URL")
        if self.enabled and self.store is None:
            raise InvalidSetting("lease", True, "leases live in the shared store: set [replicator] store")
        if (
            isinstance(self.ttl, bool)
            or not isinstance(self.ttl, (int, float))
            or not math.isfinite(self.ttl)
            or self.ttl <= 0
        ):
            raise InvalidSetting("lease_ttl", self.ttl, "must be a number of seconds > 0")

    @property
    def times(self) -> LeaseTimes:
        return LeaseTimes.from_ttl(self.ttl)

    @classmethod
    def from_config(cls, config: Any) -> "LeaseConfig":
        section = config.section(SECTION)
        store = (section.get("store") or "").strip() or None
        raw = str(section.get("lease", "auto")).strip().lower()
        if raw == "auto":
            enabled = store is not None
        elif raw in ("true", "1", "yes", "on"):
            enabled = True
        elif raw in ("false", "0", "no", "off"):
            enabled = False
        else:
            raise InvalidSetting("lease", raw, "must be auto, true or false")
        raw_ttl = section.get("lease_ttl", str(DEFAULT_LEASE_TTL))
        try:
            ttl = float(raw_ttl)
        except (TypeError, ValueError):
            raise InvalidSetting("lease_ttl", raw_ttl, "not a number") from None
        return cls(store, enabled, ttl)


def open_holder(
    config: LeaseConfig, job: str, node: str, incarnation: str, clock: Callable[[], float] = time.monotonic
) -> LeaseHolder:
    """``job``'s lease in the store ``config`` names, every store operation bounded by
    the lease's ``op_timeout`` (the store is opened on first use: a job may start
    while the store is away, and waits for it as for a lease held elsewhere)."""
    times = config.times
    url = config.store
    assert url is not None
    return LeaseHolder(
        lambda: open_replicator_db(url, connect_timeout=times.op_timeout, op_timeout=times.op_timeout),
        job,
        node,
        incarnation,
        times,
        clock,
    )


def read_runs(store: str, job: str | None = None) -> list[Run]:
    """The audit of runs in the store at URL ``store`` (see `actors.leases.overlapping_runs`)."""
    with open_replicator_db(store) as db:
        with db.transaction() as tx:
            return lease_sql.runs(tx, job)
