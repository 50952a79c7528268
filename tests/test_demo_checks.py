"""The demo's end-of-run checks name what they judge lost, and judge a store they can read.

No node: the couch_jobs check is run against a real SQLite store configured
in this process, with jobs added, accepted and finished by hand, so each
kind of failure (never finished, finished twice) is made on purpose.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import actors.couch_jobs as couch_jobs
from actors.app.workload.jobs import JOB_TYPE, LOG_TABLE, JobsDriver


@pytest.fixture
def jobs_store(tmp_path: Path) -> Iterator[None]:
    previous = couch_jobs.set_default(None)
    jobs = couch_jobs.configure(tmp_path / "jobs.sqlite")
    try:
        couch_jobs.set_type_timeout(JOB_TYPE, 2.0)
        with couch_jobs.transaction() as tx:
            tx.execute(
                f"CREATE TABLE {LOG_TABLE} (job_id TEXT NOT NULL, worker INTEGER NOT NULL, pid INTEGER NOT NULL)"
            )
        yield
    finally:
        couch_jobs.set_default(previous)
        jobs.close()


def _finish_one(worker: int, pid: int) -> str:
    """What a `JobWorker` does: accept, then the log row and the finish in one transaction."""
    job, data = couch_jobs.accept(JOB_TYPE, timeout=1.0)
    with couch_jobs.transaction() as tx:
        tx.execute(f"INSERT INTO {LOG_TABLE} (job_id, worker, pid) VALUES (?, ?, ?)", (job.id, worker, pid))
        couch_jobs.finish(tx, job, {**data, "by": worker})
    return job.id


def test_jobs_check_passes_when_every_job_finished_once(jobs_store: None) -> None:
    driver = JobsDriver(node=None, batch=2)  # type: ignore[arg-type]  # no node: setup() is not called
    driver.tick(0)
    assert sorted(_finish_one(0, 100) for _ in range(2)) == ["job-000000", "job-000001"]
    c = driver.check()
    assert c.lost == 0, c.lines
    assert not any("LOST" in line for line in c.lines)


def test_jobs_check_names_each_lost_job_and_what_was_seen_of_it(jobs_store: None) -> None:
    driver = JobsDriver(node=None, batch=3)  # type: ignore[arg-type]
    driver.tick(0)
    first = _finish_one(1, 111)
    with couch_jobs.transaction() as tx:  # a second finish row: finished twice
        tx.execute(f"INSERT INTO {LOG_TABLE} (job_id, worker, pid) VALUES (?, ?, ?)", (first, 2, 222))
    running, _ = couch_jobs.accept(JOB_TYPE, timeout=1.0)  # accepted, never finished
    c = driver.check()
    assert c.lost == 3, c.lines  # twice, running and never finished, pending and never accepted
    text = "\n".join(c.lines)
    assert "LOST or duplicated: 3" in text
    by_job = {line.split(":")[0].strip(): line for line in c.lines if line.startswith("    job-")}
    assert set(by_job) == {"job-000000", "job-000001", "job-000002"}
    assert (
        "state finished" in by_job[first]
        and "worker 1 pid 111" in by_job[first]
        and "worker 2 pid 222" in by_job[first]
    )
    assert "state running" in by_job[running.id] and "finish rows: none" in by_job[running.id]
    pending = ({"job-000000", "job-000001", "job-000002"} - {first, running.id}).pop()
    assert "state pending" in by_job[pending] and "added at t=" in by_job[pending]
