"""`counts`: jobs per type and state, on each store, and through a read-only view of it."""

from __future__ import annotations

import pytest

import actors.couch_jobs as couch_jobs
from actors.couch_jobs import CouchJobs, StoreReadOnly, StoreUnavailable, open_store


def _fill(jobs: CouchJobs) -> None:
    jobs.set_type_timeout("resize", 5)
    jobs.set_type_timeout(("views", 2), 5)
    jobs.set_type_timeout("idle", 5)
    for i in range(4):
        jobs.add(None, "resize", f"r{i}", {"n": i})
    jobs.add(None, ("views", 2), "v0", {})
    running, _ = jobs.accept("resize")
    done, _ = jobs.accept("resize")
    jobs.finish(None, done, {"ok": True})
    assert running.id != done.id
    jobs.set_type_timeout("untimed", 5)
    jobs.add(None, "untimed", "u0", {})
    jobs.clear_type_timeout("untimed")  # a type with jobs and no timeout (any more) still counts


EXPECTED = {
    "resize": {"pending": 2, "running": 1, "finished": 1},
    ("views", 2): {"pending": 1, "running": 0, "finished": 0},
    "idle": {"pending": 0, "running": 0, "finished": 0},
    "untimed": {"pending": 1, "running": 0, "finished": 0},
}


def test_counts_per_type_and_state(jobs: CouchJobs) -> None:
    assert couch_jobs.counts() == {}
    _fill(jobs)
    assert jobs.counts() == EXPECTED
    assert couch_jobs.counts() == EXPECTED  # the default instance
    assert couch_jobs.counts(jobs.store) == EXPECTED


def test_a_read_only_view_counts_and_refuses_writes(jobs: CouchJobs, store_url: str) -> None:
    _fill(jobs)
    view = open_store(store_url, read_only=True)
    try:
        assert couch_jobs.counts(view) == EXPECTED
        jobs.add(None, ("views", 2), "v1", {})
        assert couch_jobs.counts(view)[("views", 2)]["pending"] == 2  # live, not a snapshot
        with pytest.raises(StoreReadOnly):
            with view.transaction(write=True):
                pass
        with view.transaction(write=False) as tx, pytest.raises(Exception, match="(?i)read.?only"):
            tx.set_type_timeout("sneaky", 1.0)  # the database itself refuses the write
    finally:
        view.close()
    assert "sneaky" not in {k for k in jobs.counts()}


def test_a_read_only_view_of_no_store_fails_at_open_and_creates_nothing(tmp_path, postgres_url) -> None:
    absent = tmp_path / "absent.db"
    with pytest.raises(StoreUnavailable, match="absent.db"):
        open_store(str(absent), read_only=True)
    assert not absent.exists()
    with pytest.raises(StoreUnavailable, match="no couch_jobs schema"):
        open_store(postgres_url, read_only=True)  # an empty schema: nothing to read, nothing migrated
