"""The ``finished_log`` table the multi-process couch_jobs tests count finishes in.

A worker logs each finish in the same transaction that finishes the job, so a
job finished twice (two workers holding it at once) shows as two rows: the
tests' "each job exactly once" checks read this table.
"""

from __future__ import annotations

from typing import Any

from actors.couch_jobs import CouchJobs, Job, PostgresTransaction


def create_finished_log(jobs: CouchJobs) -> None:
    with jobs.transaction() as tx:
        tx.execute("CREATE TABLE finished_log (job_id TEXT NOT NULL, worker INTEGER NOT NULL)")


def finish_logged(jobs: CouchJobs, job: Job, data: dict[str, Any], worker_no: int) -> None:
    """Finish ``job`` with ``data`` plus ``"by": worker_no`` and log it, in one transaction."""
    with jobs.transaction() as tx:
        tx.execute(
            "INSERT INTO finished_log (job_id, worker) VALUES "
            + ("(%s, %s)" if isinstance(tx, PostgresTransaction) else "(?, ?)"),
            (job.id, worker_no),
        )
        jobs.finish(tx, job, {**data, "by": worker_no})


def finish_counts(jobs: CouchJobs) -> dict[str, int]:
    """job id -> how many times it was logged finished."""
    with jobs.transaction(write=False) as tx:
        rows = tx.execute("SELECT job_id, count(*) FROM finished_log GROUP BY job_id").fetchall()
    return dict(rows)


def finishers(jobs: CouchJobs) -> dict[str, list[int]]:
    """job id -> the workers that logged it finished."""
    with jobs.transaction(write=False) as tx:
        rows = tx.execute("SELECT job_id, worker FROM finished_log").fetchall()
    by_job: dict[str, list[int]] = {}
    for job_id, worker in rows:
        by_job.setdefault(job_id, []).append(worker)
    return by_job
