"""Leases, as pure decisions (time and identities come in).

Membership says which node *should* run a thing (a replication job, a shard
of entities); a lease in the shared store says which node *may*.  A lease is
named by a string (``job``: a replication's id, ``"shard:cart:17"``).  Its
row holds the name, its holder (node name and incarnation), an expiry on
the store's clock and a fencing token that grows on every grant.  The store
runs these rules inside one transaction over the row (`actors.leases.sql`), so two
nodes never both hold one lease:

- `decide_acquire`: a free, released or expired lease goes to whoever asks,
  with the next token; a lease another holder still holds is refused.  The
  same holder asking again (its job process restarted) gets the next token
  too, which fences whatever the previous process left behind.
- `decide_renew`: only the holder of the current token, before expiry.
  An expired lease is never extended: its holder has to acquire it again.
- `fence_ok`: a write carrying a token lands only while that token is the
  current one, its holder's, and unexpired.

The holder cannot see the store's clock, so it keeps its own deadline on its
monotonic clock (`LeaseTimes.deadline`): the time it *sent* the request that
was granted, plus the TTL, minus a margin.  The store set the expiry after it
received the request, so the local deadline falls before the store's expiry
as long as the two clocks' rates differ by less than the margin over one TTL
(and no clock jumps by more than that).  A holder that passes its deadline
without a renewal stops what it runs (`must_stop`).

`overlapping_runs` is the checker the tests and the demo run over the audit
of runs: no two runs of one job may share any instant.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "Fence",
    "LeaseRow",
    "LeaseTimes",
    "Run",
    "decide_acquire",
    "decide_renew",
    "fence_ok",
    "must_stop",
    "overlapping_runs",
]


@dataclass(frozen=True)
class Fence:
    """What a holder carries with its writes: the job, who it is, and its token."""

    job: str
    node: str
    incarnation: str
    token: int


@dataclass(frozen=True)
class LeaseRow:
    """A lease as stored (``expires_at`` on the store's clock, seconds)."""

    job: str
    node: str
    incarnation: str
    token: int
    expires_at: float
    run_id: int | None = None

    def held_by(self, node: str, incarnation: str) -> bool:
        return self.node == node and self.incarnation == incarnation


@dataclass(frozen=True)
class LeaseTimes:
    """A lease's timing: ``ttl`` seconds per grant, renewed every ``renew_every``,
    given up ``margin`` seconds before the store would expire it.

    ``margin`` must cover a stop of the job and the clocks' drift over one
    TTL; ``renew_every + margin < ttl`` leaves room for at least one retry of
    a failed renewal before the deadline.  A store operation of the holder
    is bounded by `op_timeout` (half the margin), so a hung renewal cannot
    carry it past its deadline.
    """

    ttl: float
    renew_every: float
    margin: float

    def __post_init__(self) -> None:
        for name in ("ttl", "renew_every", "margin"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"lease {name} must be a number of seconds > 0, got {value!r}")
        if self.renew_every + self.margin >= self.ttl:
            raise ValueError(
                f"lease renew_every ({self.renew_every}) + margin ({self.margin}) must be "
                f"< ttl ({self.ttl}): a failed renewal needs a retry before the deadline"
            )

    @classmethod
    def from_ttl(cls, ttl: float) -> "LeaseTimes":
        """Renew every ``ttl/4``, give up ``ttl/3`` before expiry."""
        return cls(ttl, ttl / 4.0, ttl / 3.0)

    @property
    def op_timeout(self) -> float:
        return self.margin / 2.0

    def deadline(self, sent_at: float) -> float:
        """The holder's last moment, on its monotonic clock, for a grant asked at ``sent_at``."""
        return sent_at + self.ttl - self.margin


def must_stop(now: float, deadline: float) -> bool:
    """The holder has reached its deadline without a renewal: it must stop the job now."""
    return now >= deadline


def decide_acquire(
    row: LeaseRow | None, job: str, node: str, incarnation: str, now: float, ttl: float
) -> LeaseRow | None:
    """The lease row after ``node``/``incarnation`` asks for ``job`` at store time ``now``,
    or None when another holder holds it still."""
    if row is not None and now < row.expires_at and not row.held_by(node, incarnation):
        return None
    token = 1 if row is None else row.token + 1
    return LeaseRow(job, node, incarnation, token, now + ttl)


def decide_renew(row: LeaseRow | None, fence: Fence, now: float, ttl: float) -> LeaseRow | None:
    """The renewed row, or None when ``fence`` no longer holds the lease."""
    if not fence_ok(row, fence, now):
        return None
    assert row is not None
    return LeaseRow(row.job, row.node, row.incarnation, row.token, now + ttl, row.run_id)


def fence_ok(row: LeaseRow | None, fence: Fence, now: float) -> bool:
    """A write carrying ``fence`` may land at store time ``now``."""
    return (
        row is not None
        and row.token == fence.token
        and row.held_by(fence.node, fence.incarnation)
        and now < row.expires_at
    )


@dataclass(frozen=True)
class Run:
    """One run of a job in the audit: ``[start, end)`` on the store's clock, where ``end``
    is when the holder released the lease, or its last expiry if it never did."""

    job: str
    node: str
    incarnation: str
    token: int
    start: float
    end: float


def overlapping_runs(runs: Iterable[Run]) -> list[tuple[Run, Run]]:
    """Every pair of runs of one job whose intervals share an instant (none, if all is well)."""
    by_job: dict[str, list[Run]] = {}
    for run in runs:
        by_job.setdefault(run.job, []).append(run)
    bad: list[tuple[Run, Run]] = []
    for spans in by_job.values():
        spans.sort(key=lambda r: (r.start, r.end))
        latest: Run | None = None  # the run ending last among those started so far
        for run in spans:
            if latest is not None and run.start < latest.end:
                bad.append((latest, run))
            if latest is None or run.end > latest.end:
                latest = run
    return bad
