"""PostgreSQL for the replicator's tests: one throwaway cluster (pgserver) per session,
a fresh schema per test (the same helper as couch_jobs' tests, `tests.couch_jobs.pg`)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.couch_jobs.pg import HOW_TO_GET, PgCluster


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    try:
        import pgserver  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip(HOW_TO_GET)
    # Not under pytest's 0700 tmp tree: run as root, pgserver runs the server as its own user.
    root = Path(tempfile.mkdtemp(prefix="replicator_pg_"))
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
def pg_database(pg_cluster: PgCluster) -> str:
    return pg_cluster.create_database()


@pytest.fixture
def pg_url(pg_cluster: PgCluster, pg_database: str) -> Iterator[str]:
    """A store URL whose tables land in a fresh, empty schema."""
    schema = pg_cluster.create_schema(pg_database)
    try:
        yield pg_cluster.url(pg_database, schema)
    finally:
        pg_cluster.drop_schema(pg_database, schema)
