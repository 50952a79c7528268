"""What a lease's store says when it cannot help: unreachable, or a write refused by fencing.

A store of leases raises `StoreUnavailable` for anything that means "no
answer now" (refused connection, timeout, server gone); a holder treats
that as "the deadline stands", never as a loss or a grant.  `Fenced` is a
write refused because its token no longer holds the lease.  A service whose
store has its own error classes subclasses these (the replicator's document
store does), so one ``except`` catches both.
"""

from __future__ import annotations

__all__ = ["Fenced", "LeaseError", "StoreUnavailable"]


class LeaseError(Exception):
    """Base of the lease package's errors."""


class StoreUnavailable(LeaseError):
    """The store did not answer (down, cut off, too slow for the operation's timeout)."""


class Fenced(LeaseError):
    """A write carried a fencing token that no longer holds its lease: another holder
    took it over, or it expired, so the write is refused."""

    def __init__(self, job: str, token: int, why: str) -> None:
        super().__init__(f"write under lease {job!r} with token {token} refused: {why}")
        self.job = job
        self.token = token
