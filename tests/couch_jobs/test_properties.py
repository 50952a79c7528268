"""Property: whatever sequence of operations runs, the store stays consistent."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from actors.couch_jobs import CouchJobs, Halt, NotFound

IDS = ["a", "b", "c"]
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(IDS), st.integers(0, 3)),
        st.tuples(st.just("accept"), st.integers(0, 3)),
        st.tuples(st.just("update"), st.integers(0, 5)),
        st.tuples(st.just("finish"), st.integers(0, 5)),
        st.tuples(st.just("resubmit"), st.integers(0, 5)),
        st.tuples(st.just("remove"), st.sampled_from(IDS)),
    ),
    max_size=25,
)


def _check_invariants(jobs: CouchJobs) -> None:
    with jobs.transaction(write=False) as tx:
        pending = set(tx.execute("SELECT type, sched_time, id FROM couch_jobs_pending").fetchall())
        records = tx.list_jobs()
    assert pending == {(r.type, r.sched_time, r.id) for r in records if r.state == "pending"}
    for r in records:
        if r.state == "pending":
            assert (r.seq, r.jlock) == (0, None)
        elif r.state == "running":
            assert r.seq > 0 and r.jlock
        else:
            assert (r.seq, r.jlock, r.resubmit) == (None, None, False)


@pytest.mark.timeout(120)
@settings(max_examples=40, deadline=None)
@given(OPS)
# a job accepted twice (finish, add again, accept): the first handle is stale
@example([("add", "a", 0), ("accept", 0), ("finish", 0), ("add", "a", 0), ("accept", 0)])
def test_operations_keep_store_consistent(ops):
    with tempfile.TemporaryDirectory() as tmp, CouchJobs(Path(tmp) / "p.db") as jobs:
        jobs.set_type_timeout("t", 10)
        held = []  # jobs accepted, possibly stale
        for op in ops:
            try:
                if op[0] == "add":
                    jobs.add(None, "t", op[1], {"v": op[2]}, op[2])
                elif op[0] == "accept":
                    held.append(jobs.accept("t", max_sched_time=op[1], timeout=0)[0])
                elif op[0] == "remove":
                    jobs.remove(None, "t", op[1])
                elif held:
                    job = held[op[1] % len(held)]
                    if op[0] == "update":
                        jobs.update(None, job, {"u": 1})
                    elif op[0] == "finish":
                        jobs.finish(None, job)
                    else:
                        jobs.resubmit(None, job, 1)
            except (NotFound, Halt):
                pass
            _check_invariants(jobs)
        # at most one live lock per job: of all handles ever accepted for a
        # job, at most one may still write it (the others get Halt)
        writers: dict[str, list[str]] = {}
        for job in held:
            try:
                jobs.update(None, job)
            except (Halt, NotFound):
                continue
            writers.setdefault(job.id, []).append(job.jlock)
        assert all(len(locks) == 1 for locks in writers.values()), writers
