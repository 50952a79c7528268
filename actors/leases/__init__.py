"""Leases with fencing tokens in a shared store: "at most one" across machines.

Used by the replicator (a lease per replication job) and by sharding (a
lease per shard).  `policy` holds the rules as pure functions, `sql` runs
them in a store's transaction, `holder` is the holder's side (acquire,
renew off its thread, stop by its own deadline), `pg` a PostgreSQL handle
whose every operation is bounded in time.
"""

from __future__ import annotations

from .errors import Fenced, LeaseError, StoreUnavailable
from .holder import LeaseHolder, LeaseSet, LeaseStore
from .pg import PgStore
from .policy import Fence, LeaseRow, LeaseTimes, Run, overlapping_runs

__all__ = [
    "Fence",
    "Fenced",
    "LeaseError",
    "LeaseHolder",
    "LeaseRow",
    "LeaseSet",
    "LeaseStore",
    "LeaseTimes",
    "PgStore",
    "Run",
    "StoreUnavailable",
    "overlapping_runs",
]
