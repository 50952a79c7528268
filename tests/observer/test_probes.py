"""The service probes against real services' data."""

from __future__ import annotations

from typing import Any

from actors.couch_jobs import CouchJobs
from actors.observer.probes import _type_label, store_counts


def test_couch_jobs_counts_come_from_the_store_read_only(tmp_path: Any) -> None:
    path = str(tmp_path / "jobs.sqlite")
    jobs = CouchJobs(path)
    try:
        jobs.set_type_timeout("resize", 5)
        jobs.set_type_timeout(("views", 2), 5)
        for i in range(3):
            jobs.add(None, "resize", f"r{i}", {})
        jobs.add(None, ("views", 2), "v0", {})
        accepted = jobs.accept("resize")
        assert accepted is not None
        counts = store_counts(path)
    finally:
        jobs.close()
    assert counts == {'"resize"': {"pending": 2, "running": 1}, '["views",2]': {"pending": 1, "running": 0}}
    assert [_type_label(k) for k in sorted(counts)] == ["resize", "('views', 2)"]
