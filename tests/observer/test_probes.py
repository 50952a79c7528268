"""The service probes against real services' data."""

from __future__ import annotations

from actors.couch_jobs import CouchJobs
from actors.tools.observer.jobs_view import JobsView, store_location
from actors.tools.observer.probes import _type_label
from tests.couch_jobs.conftest import store_url  # noqa: F401 (a fixture)


def test_couch_jobs_counts_come_from_the_store_read_only(store_url: str) -> None:
    """The panel's counts, on SQLite and on PostgreSQL, through a read-only view of the store."""
    jobs = CouchJobs(store_url)
    view = JobsView()
    try:
        jobs.set_type_timeout("resize", 5)
        jobs.set_type_timeout(("views", 2), 5)
        for i in range(3):
            jobs.add(None, "resize", f"r{i}", {})
        jobs.add(None, ("views", 2), "v0", {})
        jobs.accept("resize")
        config = {"couch_jobs": {"store": store_url}}
        counts = view.counts(config)
        assert counts == {
            '"resize"': {"pending": 2, "running": 1, "finished": 0},
            '["views",2]': {"pending": 1, "running": 0, "finished": 0},
        }
        jobs.add(None, "resize", "r9", {})
        assert view.counts(config)['"resize"']["pending"] == 3  # the same view, read again
        assert view.counts({"couch_jobs": {}}) is None
    finally:
        view.close()
        jobs.close()
    assert [_type_label(k) for k in sorted(counts)] == ["resize", "('views', 2)"]


def test_the_store_is_found_as_the_node_processes_find_it() -> None:
    assert (
        store_location({"couch_jobs": {"store": "postgresql://x/db", "database_path": "/a.db"}}) == "postgresql://x/db"
    )
    assert store_location({"couch_jobs": {"database_path": "/a.db"}}) == "/a.db"
    assert store_location({}) is None
