"""Per-owner fair share of run slots (what upstream CouchDB added later).

The seed rotates jobs oldest first, so an owner database with many jobs gets
most of the run time.  Here every owner (a job's ``rep.db_name``; transient
jobs share the owner ``None``) has ``shares`` (1..1000, default 100).  Run
time of an owner's jobs is *charged* to it; charges accumulate into the
owner's *usage*, which decays by ``usage_coeff`` every scheduling cycle, so
old usage is gradually forgiven.  An owner's priority value is

    (usage + interval * running jobs) / shares

(lower runs first): its decayed past run time plus what its running jobs will
use in the next interval, per share.  Starting a job raises its owner's value
by one interval, stopping one lowers it, so a decision that picks several jobs
spreads them across owners in proportion to their shares; over many cycles
run time converges to the share ratio.

Pure: time comes in as ``now``; the object only holds the accounting.  It
implements `actors.replicator.policy.Selector`, so the reschedule decision
uses it in place of plain oldest-first ordering.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from typing import Any

from .policy import last_started, sort_oldest_first
from .records import Job

__all__ = ["DEFAULT_SHARES", "FairShare", "MAX_SHARES", "MIN_SHARES", "owner_of"]

MIN_SHARES = 1
MAX_SHARES = 1000
DEFAULT_SHARES = 100
_FORGET_BELOW = 1e-9


def owner_of(job: Job) -> str | None:
    """The owner a job is charged to: its database, ``None`` for transient jobs."""
    return job.rep.db_name


def _check_shares(owner: Any, shares: Any) -> int:
    if isinstance(shares, str):
        try:
            shares = int(shares.strip())
        except ValueError:
            raise ValueError(f"shares for {owner!r} = {shares!r}: not an integer") from None
    if isinstance(shares, bool) or not isinstance(shares, int):
        raise ValueError(f"shares for {owner!r} = {shares!r}: not an integer")
    if not MIN_SHARES <= shares <= MAX_SHARES:
        raise ValueError(f"shares for {owner!r} = {shares}: must be in {MIN_SHARES}..{MAX_SHARES}")
    return shares


class FairShare:
    """Usage accounting per owner and the start/stop order it implies."""

    def __init__(
        self,
        shares: Mapping[Any, Any] | None = None,
        *,
        interval: float = 60.0,
        usage_coeff: float = 0.5,
        default_shares: int = DEFAULT_SHARES,
    ) -> None:
        if not 0.0 < usage_coeff <= 1.0:
            raise ValueError(f"usage_coeff = {usage_coeff!r}: must be in (0, 1]")
        if not interval > 0:
            raise ValueError(f"interval = {interval!r}: must be > 0 seconds")
        self.interval = float(interval)
        self.usage_coeff = float(usage_coeff)
        self.default_shares = _check_shares("default", default_shares)
        self._shares: dict[Any, int] = {}
        self._usage: dict[Any, float] = {}
        self._charges: dict[Any, float] = {}
        self._last_update: float | None = None
        for owner, value in (shares or {}).items():
            self.set_shares(owner, value)

    # -- configuration --------------------------------------------------------

    def set_shares(self, owner: Any, shares: Any) -> None:
        self._shares[owner] = _check_shares(owner, shares)

    def reset_shares(self, owner: Any) -> None:
        self._shares.pop(owner, None)

    def shares(self, owner: Any) -> int:
        return self._shares.get(owner, self.default_shares)

    # -- accounting ------------------------------------------------------------

    def usage(self, owner: Any) -> float:
        return self._usage.get(owner, 0.0) + self._charges.get(owner, 0.0)

    def priority(self, owner: Any, running: int = 0) -> float:
        """Lower is better: (usage + projected run time of running jobs) / shares."""
        return (self.usage(owner) + self.interval * running) / self.shares(owner)

    def charge(self, owner: Any, seconds: float) -> None:
        if seconds > 0:
            self._charges[owner] = self._charges.get(owner, 0.0) + seconds

    def _since(self, job: Job) -> float:
        started = last_started(job)
        if self._last_update is not None and self._last_update > started:
            return self._last_update
        return started

    def charge_job(self, job: Job, now: float) -> None:
        """Charge a job that is stopping for its run time not yet charged."""
        self.charge(owner_of(job), now - self._since(job))

    def update(self, running: Iterable[Job], now: float, interval: float | None = None) -> None:
        """Once per cycle: charge running jobs, fold charges into decayed usage."""
        if interval is not None:
            if not interval > 0:
                raise ValueError(f"interval = {interval!r}: must be > 0 seconds")
            self.interval = float(interval)
        for job in running:
            self.charge(owner_of(job), now - self._since(job))
        usage: dict[Any, float] = {}
        for owner in set(self._usage) | set(self._charges):
            value = self._usage.get(owner, 0.0) * self.usage_coeff + self._charges.get(owner, 0.0)
            if value > _FORGET_BELOW:
                usage[owner] = value
        self._usage = usage
        self._charges = {}
        self._last_update = now

    # -- ordering (policy.Selector) --------------------------------------------

    @staticmethod
    def _running_counts(running: Iterable[Job]) -> dict[Any, int]:
        counts: dict[Any, int] = {}
        for job in running:
            owner = owner_of(job)
            counts[owner] = counts.get(owner, 0) + 1
        return counts

    @staticmethod
    def _by_owner(candidates: Iterable[Job]) -> dict[Any, list[Job]]:
        groups: dict[Any, list[Job]] = {}
        for job in sort_oldest_first(candidates):
            groups.setdefault(owner_of(job), []).append(job)
        return groups

    def select_to_start(self, candidates: list[Job], running: list[Job], count: int) -> list[Job]:
        """Greedy: repeatedly the oldest job of the owner with the lowest priority."""
        counts = self._running_counts(running)
        groups = self._by_owner(candidates)
        heap = []
        for order, (owner, jobs) in enumerate(groups.items()):
            heap.append((self.priority(owner, counts.get(owner, 0)), last_started(jobs[0]), order, owner))
        heapq.heapify(heap)
        positions = dict.fromkeys(groups, 0)
        chosen: list[Job] = []
        while heap and len(chosen) < count:
            _, _, order, owner = heapq.heappop(heap)
            jobs = groups[owner]
            chosen.append(jobs[positions[owner]])
            positions[owner] += 1
            counts[owner] = counts.get(owner, 0) + 1
            if positions[owner] < len(jobs):
                nxt = jobs[positions[owner]]
                heapq.heappush(heap, (self.priority(owner, counts[owner]), last_started(nxt), order, owner))
        return chosen

    def select_to_stop(self, candidates: list[Job], running: list[Job], count: int) -> list[Job]:
        """Greedy: repeatedly the oldest job of the owner with the highest priority."""
        counts = self._running_counts(running)
        groups = self._by_owner(candidates)
        heap = []
        for order, (owner, jobs) in enumerate(groups.items()):
            heap.append((-self.priority(owner, counts.get(owner, 0)), last_started(jobs[0]), order, owner))
        heapq.heapify(heap)
        positions = dict.fromkeys(groups, 0)
        chosen: list[Job] = []
        while heap and len(chosen) < count:
            _, _, order, owner = heapq.heappop(heap)
            jobs = groups[owner]
            chosen.append(jobs[positions[owner]])
            positions[owner] += 1
            counts[owner] = counts.get(owner, 1) - 1
            if positions[owner] < len(jobs):
                nxt = jobs[positions[owner]]
                heapq.heappush(heap, (-self.priority(owner, counts[owner]), last_started(nxt), order, owner))
        return chosen

    def snapshot(self) -> dict[str, Any]:
        """Plain data for observability: usage and shares per known owner."""
        owners = set(self._usage) | set(self._charges) | set(self._shares)
        return {
            "interval": self.interval,
            "usage_coeff": self.usage_coeff,
            "owners": {str(owner): {"shares": self.shares(owner), "usage": self.usage(owner)} for owner in owners},
        }
