"""A replication job's lease, from its holder's side: acquire, renew, release.

Plain class, no actor: the job's process (`scheduler_job`) calls it from its
timers.  The store's transaction runs `lease_sql` (the rules are
`lease_policy`'s); the holder keeps its deadline on its own monotonic clock
(injected), moved on only by a grant it heard back about.  Every store
operation is bounded by `LeaseTimes.op_timeout` (the store handle's
statement and connect timeouts), so a holder cut off from the store learns
it in bounded time, and `must_stop` tells it when to stop the job.

`LeaseConfig` is what a job process reads from ``[replicator]``: the store
URL, whether jobs take leases (``lease``: on by default with a PostgreSQL
store) and the TTL (``lease_ttl``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import lease_sql
from .docs_model import StoreUnavailable
from .docstore_sql import SQLDocStore
from .lease_policy import Fence, LeaseRow, LeaseTimes, Run, must_stop
from .settings import SECTION, InvalidSetting
from .stores import is_postgres, open_replicator_db

__all__ = ["DEFAULT_LEASE_TTL", "LeaseConfig", "LeaseHolder", "read_runs"]

log = logging.getLogger("actors.replicator.lease")

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


class LeaseHolder:
    """One job's lease as its holder (``node``, ``incarnation``) sees it."""

    def __init__(
        self,
        store: SQLDocStore | Callable[[], SQLDocStore],
        job: str,
        node: str,
        incarnation: str,
        times: LeaseTimes,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # The store, or how to open it: a job may start while the store is away
        # (it then waits, as for a lease held elsewhere).
        self._store: SQLDocStore | None = store if isinstance(store, SQLDocStore) else None
        self._open_store = None if isinstance(store, SQLDocStore) else store
        self.job = job
        self.node = node
        self.incarnation = incarnation
        self.times = times
        self.clock = clock
        self.fence: Fence | None = None
        self.deadline = float("-inf")
        self.holder: LeaseRow | None = None  # who holds it, when we were refused
        self._away = False  # the store did not answer last time (logged once per outage)

    @classmethod
    def open(
        cls, config: LeaseConfig, job: str, node: str, incarnation: str, clock: Callable[[], float] = time.monotonic
    ) -> "LeaseHolder":
        times = config.times
        url = config.store
        assert url is not None
        return cls(
            lambda: open_replicator_db(url, connect_timeout=times.op_timeout, op_timeout=times.op_timeout),
            job,
            node,
            incarnation,
            times,
            clock,
        )

    @property
    def store(self) -> SQLDocStore:
        """The store's ``_replicator`` database (`StoreUnavailable` while it cannot be opened)."""
        if self._store is None:
            assert self._open_store is not None
            self._store = self._open_store()
        return self._store

    @property
    def store_id(self) -> str:
        return self.store.store_id

    def try_acquire(self) -> bool:
        """Take the lease if it is free (or ours); False while another holder has it,
        or while the store is unreachable."""
        sent = self.clock()
        try:
            with self.store.transaction() as tx:
                fence, holder = lease_sql.acquire(tx, self.job, self.node, self.incarnation, self.times.ttl)
        except StoreUnavailable as exc:
            if not self._away:
                log.warning("lease of %s: store unreachable: %s", self.job, exc)
            self._away = True
            return False
        self._away = False
        self.holder = holder
        if fence is None:
            return False
        self.fence = fence
        self.deadline = self.times.deadline(sent)
        return True

    def renew(self) -> bool | None:
        """Extend the lease: True (the deadline moved), False (lost: another token, or
        expired), None (the store did not answer; the deadline stands)."""
        if self.fence is None:
            return False
        sent = self.clock()
        try:
            with self.store.transaction() as tx:
                ok = lease_sql.renew(tx, self.fence, self.times.ttl)
        except StoreUnavailable as exc:
            log.warning("lease of %s: renewal failed: %s", self.job, exc)
            return None
        if ok:
            self.deadline = self.times.deadline(sent)
            return True
        self.fence = None
        return False

    def must_stop(self) -> bool:
        return self.fence is None or must_stop(self.clock(), self.deadline)

    def release(self, reason: str = "released") -> None:
        """Give the lease back (best effort: an unreachable store lets it expire)."""
        fence, self.fence = self.fence, None
        if fence is None:
            return
        try:
            with self.store.transaction() as tx:
                lease_sql.release(tx, fence, reason)
        except StoreUnavailable as exc:
            log.warning("lease of %s: not released (it will expire): %s", self.job, exc)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def read_runs(store: str, job: str | None = None) -> list[Run]:
    """The audit of runs in the store at URL ``store`` (see `lease_policy.overlapping_runs`)."""
    with open_replicator_db(store) as db:
        with db.transaction() as tx:
            return lease_sql.runs(tx, job)
