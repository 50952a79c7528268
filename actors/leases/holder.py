"""Holding leases: acquire, renew off the holder's thread, stop by one's own deadline.

`LeaseSet` holds any number of leases of one holder (node, incarnation) in
one store -- a node's shards, or a single replication job (`LeaseHolder`).
The rule that keeps "at most one" whatever the network does:

- **The deadline is local and needs no store.**  Each grant gives a
  deadline on the holder's monotonic clock (`LeaseTimes.deadline`, before
  the store's expiry).  `must_stop`/`expired` compare two numbers: they
  never block, so an actor checks them before every piece of work -- first
  thing after a freeze (SIGSTOP, a VM pause) too, when the clock has moved
  on past the deadline and no timer has fired yet.
- **Renewals run off the holder's thread** (`renew_in_background`): a
  short-lived thread per round, one round in flight at a time, every store
  operation bounded by ``op_timeout`` (connect, statement and TCP timeouts
  of the store handle).  A renewal hung on a blackholed socket thus never
  keeps the holder from seeing its deadline pass and stopping.
- A renewal moves the deadline only from the moment its request was *sent*.

Every method is safe from several threads: the store handle serialises its
transactions; deadlines are replaced whole under a lock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ContextManager, Protocol

from . import sql
from .errors import StoreUnavailable
from .policy import Fence, LeaseRow, LeaseTimes, must_stop

__all__ = ["LeaseHolder", "LeaseSet", "LeaseStore"]

log = logging.getLogger("actors.leases")


class LeaseStore(Protocol):
    """A store of leases: transactions in `actors.leases.sql.LeaseTx`'s shape whose
    failures to answer raise `StoreUnavailable`."""

    @property
    def store_id(self) -> str: ...

    def transaction(self) -> ContextManager[Any]: ...

    def close(self) -> None: ...


class LeaseSet:
    """The leases one holder holds in one store, each by name."""

    def __init__(
        self,
        store: LeaseStore | Callable[[], LeaseStore],
        node: str,
        incarnation: str,
        times: LeaseTimes,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # The store, or how to open it: a holder may start while the store is away.
        self._store: LeaseStore | None = store if hasattr(store, "transaction") else None  # type: ignore[assignment]
        self._open_store: Callable[[], LeaseStore] | None = None if self._store is not None else store  # type: ignore[assignment]
        self.node = node
        self.incarnation = incarnation
        self.times = times
        self.clock = clock
        self._lock = threading.Lock()
        self._fences: dict[str, Fence] = {}
        self._deadlines: dict[str, float] = {}
        #: Who holds a lease we were refused, by name (the last refusal's answer).
        self.refused_by: dict[str, LeaseRow | None] = {}
        self._renewing = False
        self._away = False  # the store did not answer last time (logged once per outage)

    # -- the store ---------------------------------------------------------------------

    @property
    def store(self) -> LeaseStore:
        """The store (`StoreUnavailable` while it cannot be opened)."""
        if self._store is None:
            assert self._open_store is not None
            self._store = self._open_store()
        return self._store

    @contextlib.contextmanager
    def _transaction(self, what: str) -> Iterator[Any]:
        try:
            with self.store.transaction() as tx:
                yield tx
        except StoreUnavailable as exc:
            if not self._away:
                log.warning("leases of %s: store unreachable (%s): %s", self.node, what, exc)
            self._away = True
            raise
        self._away = False

    # -- what is held ------------------------------------------------------------------

    def fence(self, name: str) -> Fence | None:
        return self._fences.get(name)

    def deadline(self, name: str) -> float:
        return self._deadlines.get(name, float("-inf"))

    def held(self) -> list[str]:
        """The names held, whether or not their deadline passed."""
        with self._lock:
            return list(self._fences)

    def expired(self, name: str) -> bool:
        """``name`` is not held, or its deadline passed: whatever it guards must stop now.
        Two numbers compared: never blocks."""
        return name not in self._fences or must_stop(self.clock(), self._deadlines.get(name, float("-inf")))

    def next_deadline(self) -> float | None:
        """The earliest deadline of what is held (monotonic clock), None when nothing is."""
        with self._lock:
            return min(self._deadlines.values(), default=None)

    # -- acquire, renew, release ---------------------------------------------------------

    def try_acquire(self, name: str) -> bool:
        """Take ``name``'s lease if it is free (or ours): False while another holder has
        it, or while the store does not answer.  Blocks the caller for at most the
        store's operation timeout."""
        sent = self.clock()
        try:
            with self._transaction("acquire") as tx:
                fence, holder = sql.acquire(tx, name, self.node, self.incarnation, self.times.ttl)
        except StoreUnavailable:
            return False
        self.refused_by[name] = holder
        if fence is None:
            return False
        with self._lock:
            self._fences[name] = fence
            self._deadlines[name] = self.times.deadline(sent)
        return True

    def renew(self) -> set[str] | None:
        """Renew every lease held, in one transaction: the names lost (another token, or
        expired), or None when the store did not answer (the deadlines stand)."""
        with self._lock:
            fences = list(self._fences.values())
        if not fences:
            return set()
        sent = self.clock()
        try:
            with self._transaction("renew") as tx:
                lost = sql.renew_many(tx, fences, self.times.ttl)
        except StoreUnavailable:
            return None
        deadline = self.times.deadline(sent)
        names: set[str] = set()
        with self._lock:
            for fence in fences:
                if self._fences.get(fence.job) != fence:
                    continue  # released (or re-acquired) meanwhile
                if fence in lost:
                    names.add(fence.job)
                    del self._fences[fence.job]
                    self._deadlines.pop(fence.job, None)
                else:
                    self._deadlines[fence.job] = max(deadline, self._deadlines.get(fence.job, deadline))
        return names

    def renew_in_background(self, done: Callable[[set[str] | None], None]) -> bool:
        """Run `renew` on a thread of its own and give its answer to ``done`` (on that
        thread).  False, and nothing started, while the previous round still runs:
        a renewal stuck on a dead socket is not joined by another."""
        with self._lock:
            if self._renewing:
                return False
            self._renewing = True

        def run() -> None:
            try:
                result = self.renew()
            except Exception:  # noqa: BLE001 - a bug in a renewal must not kill silently
                log.exception("leases of %s: renewal failed", self.node)
                result = None
            finally:
                with self._lock:
                    self._renewing = False
            done(result)

        threading.Thread(target=run, name=f"lease-renew-{self.node}", daemon=True).start()
        return True

    def forget(self, name: str) -> Fence | None:
        """Stop holding ``name`` locally (its deadline ends now); its fence, to release."""
        with self._lock:
            self._deadlines.pop(name, None)
            return self._fences.pop(name, None)

    def release(self, name: str, reason: str = "released") -> None:
        """Give ``name``'s lease back (best effort: an unreachable store lets it expire)."""
        fence = self.forget(name)
        if fence is None:
            return
        try:
            with self._transaction("release") as tx:
                sql.release(tx, fence, reason)
        except StoreUnavailable:
            log.warning("lease %s: not released (it will expire)", name)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


class LeaseHolder:
    """One lease (``job``) as its holder sees it: a `LeaseSet` of one name."""

    def __init__(
        self,
        store: LeaseStore | Callable[[], LeaseStore],
        job: str,
        node: str,
        incarnation: str,
        times: LeaseTimes,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.job = job
        self.leases = LeaseSet(store, node, incarnation, times, clock)

    node = property(lambda self: self.leases.node)
    incarnation = property(lambda self: self.leases.incarnation)
    times = property(lambda self: self.leases.times)
    clock = property(lambda self: self.leases.clock)

    @property
    def store(self) -> LeaseStore:
        return self.leases.store

    @property
    def store_id(self) -> str:
        return self.store.store_id

    @property
    def fence(self) -> Fence | None:
        return self.leases.fence(self.job)

    @property
    def deadline(self) -> float:
        return self.leases.deadline(self.job)

    @property
    def holder(self) -> LeaseRow | None:
        """Who holds the lease, when we were last refused it."""
        return self.leases.refused_by.get(self.job)

    def try_acquire(self) -> bool:
        return self.leases.try_acquire(self.job)

    def renew(self) -> bool | None:
        """True (the deadline moved), False (lost), None (the store did not answer)."""
        if self.fence is None:
            return False
        lost = self.leases.renew()
        return None if lost is None else self.job not in lost and self.fence is not None

    def renew_in_background(self, done: Callable[[bool | None], None]) -> bool:
        """`renew` on a thread of its own; ``done`` gets its answer."""
        if self.fence is None:
            done(False)
            return True
        return self.leases.renew_in_background(
            lambda lost: done(None if lost is None else self.job not in lost and self.fence is not None)
        )

    def must_stop(self) -> bool:
        return self.leases.expired(self.job)

    def release(self, reason: str = "released") -> None:
        self.leases.release(self.job, reason)

    def close(self) -> None:
        self.leases.close()
