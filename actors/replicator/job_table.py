"""A read-only copy of the scheduler's job table, kept current by deltas.

The seed answers ``jobs/0``, ``job/1``, ``rep_state/1`` and the
``find_jobs_by_*`` functions straight from its ets table, so a reader never
queues behind the scheduler while it reschedules.  Here the scheduler actor
publishes the records that changed after each of its callbacks (records are
frozen `Job` values, so a delta shares them instead of copying), and a
`JobTable` applies them.  The reader actor (`scheduler.SchedulerReader`)
holds one and answers from it; nothing here blocks or touches a process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .job_views import job_to_json, summarize_job
from .records import Job, Rep

__all__ = ["JobTable"]


class JobTable:
    """``id -> Job`` as of the latest published ``version``."""

    def __init__(self, node: str = "nonode@nohost") -> None:
        self.node = node
        self.version = 0
        self._jobs: dict[Any, Job] = {}

    def reset(self, jobs: Mapping[Any, Job], version: int) -> None:
        """Replace the whole table (the scheduler started or restarted)."""
        self._jobs = dict(jobs)
        self.version = version

    def apply(self, changes: Mapping[Any, Job | None], version: int) -> None:
        """Apply one delta: a record per changed id, ``None`` for a removed job."""
        if version <= self.version:
            raise ValueError(f"stale delta: version {version} <= table version {self.version}")
        for job_id, job in changes.items():
            if job is None:
                self._jobs.pop(job_id, None)
            else:
                self._jobs[job_id] = job
        self.version = version

    def __len__(self) -> int:
        return len(self._jobs)

    def get(self, job_id: Any) -> Job | None:
        return self._jobs.get(job_id)

    def records(self) -> list[Job]:
        return list(self._jobs.values())

    def jobs(self) -> list[dict]:
        return [job_to_json(j, self.node) for j in self._jobs.values()]

    def job(self, job_id: Any) -> dict | None:
        job = self._jobs.get(job_id)
        return None if job is None else job_to_json(job, self.node)

    def job_summary(self, job_id: Any, health_threshold: float) -> dict | None:
        job = self._jobs.get(job_id)
        return None if job is None else summarize_job(job, health_threshold)

    def rep_state(self, job_id: Any) -> Rep | None:
        job = self._jobs.get(job_id)
        return None if job is None else job.rep

    def find_jobs_by_dbname(self, db_name: str) -> list:
        return [j.id for j in self._jobs.values() if j.rep.db_name == db_name]

    def find_jobs_by_doc(self, db_name: str, doc_id: str) -> list:
        return [j.id for j in self._jobs.values() if j.rep.db_name == db_name and j.rep.doc_id == doc_id]
