"""Fixtures shared by the couch_jobs tests: a fresh store per test (a SQLite
file, and a database in the session's PostgreSQL cluster), installed as the
process's default instance, with the seed's two types."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors.couch_jobs as couch_jobs
from actors.couch_jobs import CouchJobs
from tests.couch_jobs.pg import HOW_TO_GET, PgCluster


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


# -- PostgreSQL: one throwaway cluster per session, a fresh database per test --


@pytest.fixture(scope="session")
def pg_cluster():
    """The session's PostgreSQL cluster (pgserver), stopped and deleted at the end."""
    try:
        import pgserver  # noqa: F401
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        pytest.skip(HOW_TO_GET)
    # Not under pytest's 0700 tmp tree: when run as root, pgserver runs the
    # server (and pg_ctl) as its own user, who must reach the data directory.
    root = Path(tempfile.mkdtemp(prefix="couch_jobs_pg_"))
    root.chmod(0o755)
    try:
        cluster = PgCluster(root)
        try:
            yield cluster
        finally:
            cluster.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_database(pg_cluster) -> str:
    """The session's test database (tests get a schema each in it)."""
    return pg_cluster.create_database()


@pytest.fixture
def pg_url(pg_cluster, pg_database) -> Iterator[str]:
    """A URL whose tables land in a fresh, empty schema of the session's database."""
    schema = pg_cluster.create_schema(pg_database)
    try:
        yield pg_cluster.url(pg_database, schema)
    finally:
        pg_cluster.drop_schema(pg_database, schema)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    """Each store couch_jobs ships: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "jobs.db")
    return request.getfixturevalue("pg_url")
