"""The leases' and the audit's SQL, run inside a store's transaction (PostgreSQL or SQLite).

A transaction here is anything with `LeaseTx`'s shape (the replicator's
``SQLTx``, `actors.leases.pg.PgTx`): ``run(sql, params)``
with ``?`` markers, ``now()`` on the store's clock (read *after* the rows
are locked), and the backend's ``row_lock``/``share_lock`` suffixes
(``FOR UPDATE``/``FOR SHARE`` on PostgreSQL; SQLite's writer holds the file).
The decisions are `actors.leases.policy`'s; this module only reads and writes rows:

- ``repl_leases``: one row per job ever leased (job, holder node and
  incarnation, token, expiry, current run).  A row is never deleted, so the
  token only grows.
- ``repl_runs``: the audit, one row per grant: job, node, incarnation,
  token, ``started_at``, ``lease_until`` (moved by every renewal) and
  ``ended_at`` (set on release, or when a later grant finds it expired).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .errors import Fenced
from .policy import Fence, LeaseRow, Run, decide_acquire, decide_renew, fence_ok

__all__ = ["LEASE_SCHEMA", "LeaseTx", "acquire", "check_fence", "release", "renew", "renew_many", "runs"]

#: Templated with the backend's ``{serial}`` column type.
LEASE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS repl_leases (job TEXT PRIMARY KEY, node TEXT NOT NULL,"
    " incarnation TEXT NOT NULL, token BIGINT NOT NULL, expires_at DOUBLE PRECISION NOT NULL, run_id BIGINT)",
    "CREATE TABLE IF NOT EXISTS repl_runs (id {serial}, job TEXT NOT NULL, node TEXT NOT NULL,"
    " incarnation TEXT NOT NULL, token BIGINT NOT NULL, started_at DOUBLE PRECISION NOT NULL,"
    " lease_until DOUBLE PRECISION NOT NULL, ended_at DOUBLE PRECISION, end_reason TEXT)",
    "CREATE INDEX IF NOT EXISTS repl_runs_job ON repl_runs (job, started_at)",
)


class LeaseTx(Protocol):
    row_lock: str
    share_lock: str

    def run(self, sql: str, params: Any = ()) -> Any: ...

    def now(self) -> float: ...


def _locked_row(tx: LeaseTx, job: str, lock: str) -> LeaseRow | None:
    row = tx.run(
        f"SELECT job, node, incarnation, token, expires_at, run_id FROM repl_leases WHERE job = ?{lock}", (job,)
    ).fetchone()
    if row is None:
        return None
    return LeaseRow(row[0], row[1], row[2], int(row[3]), float(row[4]), None if row[5] is None else int(row[5]))


def _end_run(tx: LeaseTx, row: LeaseRow, now: float, reason: str) -> None:
    if row.run_id is not None:
        tx.run(
            "UPDATE repl_runs SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
            (min(now, row.expires_at), reason, row.run_id),
        )


def acquire(tx: LeaseTx, job: str, node: str, incarnation: str, ttl: float) -> tuple[Fence | None, LeaseRow | None]:
    """Take ``job``'s lease if `decide_acquire` allows: ``(fence, None)``, else
    ``(None, the row that holds it)``.  A grant opens a run in the audit."""
    # The row exists before it is locked, so two first acquirers queue on it
    # instead of racing to insert (token 0, expired: free).
    tx.run(
        "INSERT INTO repl_leases (job, node, incarnation, token, expires_at) VALUES (?, '', '', 0, 0) "
        "ON CONFLICT (job) DO NOTHING",
        (job,),
    )
    row = _locked_row(tx, job, tx.row_lock)
    now = tx.now()
    new = decide_acquire(row, job, node, incarnation, now, ttl)
    if new is None:
        return None, row
    if row is not None and row.token > 0:
        _end_run(tx, row, now, "expired" if now >= row.expires_at else "superseded")
    (run_id,) = tx.run(
        "INSERT INTO repl_runs (job, node, incarnation, token, started_at, lease_until) "
        "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (job, node, incarnation, new.token, now, new.expires_at),
    ).fetchone()
    tx.run(
        "UPDATE repl_leases SET node = ?, incarnation = ?, token = ?, expires_at = ?, run_id = ? WHERE job = ?",
        (node, incarnation, new.token, new.expires_at, int(run_id), job),
    )
    return Fence(job, node, incarnation, new.token), None


def renew(tx: LeaseTx, fence: Fence, ttl: float) -> bool:
    """Extend the lease ``fence`` holds by ``ttl`` from now; False when it lost it."""
    row = _locked_row(tx, fence.job, tx.row_lock)
    new = decide_renew(row, fence, tx.now(), ttl)
    if new is None:
        return False
    tx.run("UPDATE repl_leases SET expires_at = ? WHERE job = ?", (new.expires_at, fence.job))
    tx.run("UPDATE repl_runs SET lease_until = ? WHERE id = ?", (new.expires_at, new.run_id))
    return True


def release(tx: LeaseTx, fence: Fence, reason: str = "released") -> bool:
    """Give the lease back (the job stopped); ends its run.  False when it was no longer held."""
    row = _locked_row(tx, fence.job, tx.row_lock)
    if row is None or row.token != fence.token or not row.held_by(fence.node, fence.incarnation):
        return False
    now = tx.now()
    tx.run("UPDATE repl_leases SET expires_at = ? WHERE job = ?", (min(now, row.expires_at), fence.job))
    _end_run(tx, row, now, reason)
    return True


def renew_many(tx: LeaseTx, fences: list[Fence], ttl: float) -> set[Fence]:
    """Extend every lease of ``fences`` still held by ``ttl`` from now, in one
    transaction (a node holding a hundred shards renews them in one round
    trip); returns the fences that lost theirs."""
    lost: set[Fence] = set()
    for fence in sorted(fences, key=lambda f: f.job):  # one lock order for every renewer
        if not renew(tx, fence, ttl):
            lost.add(fence)
    return lost


def check_fence(tx: LeaseTx, fence: Fence, error: Callable[[str, int, str], Exception] = Fenced) -> None:
    """Refuse (``error``, `Fenced` unless the caller names its own) the write this
    transaction carries unless ``fence`` holds the lease now.  The row stays share-locked to the commit, so no grant can slip in between."""
    row = _locked_row(tx, fence.job, tx.share_lock)
    now = tx.now()
    if not fence_ok(row, fence, now):
        why = (
            "no lease"
            if row is None
            else f"lease now token {row.token} of {row.node}"
            if row.token != fence.token
            else "lease expired"
        )
        raise error(fence.job, fence.token, why)


def runs(tx: LeaseTx, job: str | None = None) -> list[Run]:
    """The audit: every run (of ``job``, or of all jobs), oldest first."""
    sql = "SELECT job, node, incarnation, token, started_at, lease_until, ended_at FROM repl_runs"
    params: tuple = ()
    if job is not None:
        sql += " WHERE job = ?"
        params = (job,)
    rows = tx.run(sql + " ORDER BY started_at, id", params).fetchall()
    return [Run(j, n, i, int(t), float(s), float(e if e is not None else u)) for j, n, i, t, s, u, e in rows]
