"""What a replication database holds, whatever stores it: documents, changes, errors.

Shared by the SQL layer (`docstore_sql`) and its two backends (SQLite files,
`docstore`; PostgreSQL, `docstore_pg`), so neither backend imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actors import leases

__all__ = [
    "Change",
    "Conflict",
    "DatabaseNotFound",
    "Doc",
    "DocStoreError",
    "Fenced",
    "LOCAL_PREFIX",
    "StoreUnavailable",
    "check_id",
    "rev_rank",
]

LOCAL_PREFIX = "_local/"


class DocStoreError(Exception):
    """Base of the document store's errors."""


class DatabaseNotFound(DocStoreError):
    """The database does not exist (CouchDB's ``db_not_found``)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"db_not_found: could not open {path}")
        self.path = path


class StoreUnavailable(DocStoreError, leases.StoreUnavailable):
    """The store could not be reached (PostgreSQL down, cut off, refusing connections)."""


class Fenced(DocStoreError, leases.Fenced):
    """A write carried a lease fencing token that is no longer the job's current lease:
    another node took the job over (or the lease expired), so the write is refused."""

    def __init__(self, job: str, token: int, why: str) -> None:
        Exception.__init__(self, f"write of job {job!r} with lease token {token} refused: {why}")
        self.job = job
        self.token = token


class Conflict(DocStoreError):
    """A write named a revision that is not the document's current one."""

    def __init__(self, doc_id: str, expected: str | None, current: str | None) -> None:
        super().__init__(f"conflict on {doc_id!r}: given rev {expected!r}, current rev {current!r}")
        self.doc_id = doc_id


@dataclass(frozen=True)
class Doc:
    id: str
    rev: str
    body: dict = field(default_factory=dict)
    deleted: bool = False


@dataclass(frozen=True)
class Change:
    """One row of the changes feed: a document at its latest sequence."""

    seq: int
    id: str
    rev: str
    deleted: bool = False


def rev_rank(rev: str) -> tuple[int, str]:
    """Sort key of a revision ``"N-hash"``: position first, then hash (CouchDB's winner)."""
    pos, sep, digest = rev.partition("-")
    if not sep or not pos.isdigit():
        raise ValueError(f"bad revision {rev!r}: expected 'N-hash'")
    return int(pos), digest


def check_id(doc_id: Any) -> str:
    if not isinstance(doc_id, str) or not doc_id:
        raise ValueError(f"document id must be a non-empty string, got {doc_id!r}")
    if doc_id.startswith(LOCAL_PREFIX):
        raise ValueError(f"{doc_id!r} is a _local document id; use put_local/get_local")
    return doc_id
