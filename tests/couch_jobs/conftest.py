"""Fixtures shared by the couch_jobs tests: a fresh store per test (a SQLite
file, and a schema in the session's PostgreSQL cluster: ``postgres_url`` of
``tests/conftest.py``), installed as the process's default instance, with
the seed's two types."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import actors.couch_jobs as couch_jobs
from actors.couch_jobs import CouchJobs


@pytest.fixture
def jobs(store_url) -> Iterator[CouchJobs]:
    instance = CouchJobs(store_url)
    previous = couch_jobs.set_default(instance)
    try:
        yield instance
    finally:
        couch_jobs.set_default(previous)
        instance.close()


@pytest.fixture
def ctx(jobs: CouchJobs) -> dict[str, Any]:
    """The seed's ``setup/0``: a complex type, a numeric type, two job ids."""
    t1 = ("t1", 1024)  # a complex type should work
    t2 = 42  # a number should work as well
    t1_timeout = 2
    t2_timeout = 3
    couch_jobs.set_type_timeout(t1, t1_timeout)
    couch_jobs.set_type_timeout(t2, t2_timeout)
    return {
        "jobs": jobs,
        "t1": t1,
        "t2": t2,
        "t1_timeout": t1_timeout,
        "j1": "j1",
        "j2": "j2",
    }


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    """Each store couch_jobs ships: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "jobs.db")
    return request.getfixturevalue("postgres_url")
