"""Workers in separate OS processes sharing one SQLite jobs database."""

from __future__ import annotations

import os
import signal

import multiprocess
import pytest

from actors.couch_jobs import ActivityMonitorLogic, CouchJobs, Halt, NotFound
from tests.couch_jobs.finished_log import create_finished_log, finish_counts, finish_logged

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TYPE = ("mp", 1)
N_JOBS = 300
N_WORKERS = 3


def _worker(path: str, worker_no: int, results) -> None:
    """Accept and finish until no job shows up for a while; log each finish atomically."""
    count = 0
    with CouchJobs(path) as jobs:
        for _ in range(N_JOBS + 1):
            try:
                job, data = jobs.accept(TYPE, timeout=3.0)
            except NotFound:
                break
            finish_logged(jobs, job, data, worker_no)
            count += 1
    results.put((worker_no, count))


def _stop(procs) -> None:
    for proc in procs:
        if proc.is_alive():
            proc.kill()
        proc.join(5)


def test_workers_in_processes_finish_each_job_exactly_once(tmp_path):
    path = str(tmp_path / "mp.db")
    ctx = multiprocess.get_context("fork")
    with CouchJobs(path) as jobs:
        jobs.set_type_timeout(TYPE, 60)
        create_finished_log(jobs)
        results = ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(path, i, results)) for i in range(N_WORKERS)]
        try:
            for proc in procs:
                proc.start()
            # add while the workers are already waiting, in batches of one transaction each
            for batch in range(0, N_JOBS, 50):
                with jobs.transaction() as tx:
                    for k in range(batch, batch + 50):
                        jobs.add(tx, TYPE, f"job-{k:04d}", {"k": k})
            counts = dict(results.get(timeout=60) for _ in procs)
            for proc in procs:
                proc.join(30)
            assert [proc.exitcode for proc in procs] == [0] * N_WORKERS
        finally:
            _stop(procs)

        assert sum(counts.values()) == N_JOBS
        counts = finish_counts(jobs)
        assert len(counts) == N_JOBS
        assert all(n == 1 for n in counts.values())
        states = jobs.get_jobs(TYPE)
        assert len(states) == N_JOBS
        assert all(state == "finished" for _, _, state, _ in states)
        assert all(data["by"] in range(N_WORKERS) for _, _, _, data in states)


def _accept_then_hang(path: str, accepted, release) -> None:
    with CouchJobs(path) as jobs:
        job, _ = jobs.accept(TYPE, timeout=30)
        accepted.put(job)
        release.wait(60)  # killed long before this returns


def test_killed_worker_job_is_rerun_after_timeout(tmp_path):
    path = str(tmp_path / "kill.db")
    ctx = multiprocess.get_context("fork")
    with CouchJobs(path) as jobs:
        jobs.set_type_timeout(TYPE, 1)
        jobs.add(None, TYPE, "victim", {"v": 1})
        accepted, release = ctx.Queue(), ctx.Event()
        proc = ctx.Process(target=_accept_then_hang, args=(path, accepted, release))
        try:
            proc.start()
            dead_job = accepted.get(timeout=30)
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(10)
            assert proc.exitcode == -signal.SIGKILL
        finally:
            _stop([proc])
        assert jobs.get_job_state(None, TYPE, "victim") == "running"

        # The activity monitor's timer fires twice (driven here, not waited for).
        monitor = ActivityMonitorLogic(TYPE, jobs.store)
        monitor.init()
        assert monitor.handle_check()[0] == []
        assert monitor.handle_check()[0] == ["victim"]

        job, data = jobs.accept(TYPE, timeout=5)
        assert (job.id, data) == ("victim", {"v": 1})
        assert job.jlock != dead_job.jlock
        with pytest.raises(Halt):
            jobs.update(None, dead_job)
        jobs.finish(None, job)
        assert jobs.get_job_state(None, TYPE, "victim") == "finished"
