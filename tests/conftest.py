"""Shared fixtures: a node per test that must leave nothing behind, and the
session's one PostgreSQL cluster (a fresh schema of it per test)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors import Node
from actors.couch_jobs import local_postgres
from tests.postgres import HOW_TO_GET, PostgresCluster


def pytest_configure(config):
    """Give SIGINT back its default handler when the suite was started with it ignored.

    A shell without job control starts a background command (``pytest &`` in
    a script, some CI runners) with SIGINT ignored, and an ignored signal stays
    ignored across exec: every command the tests start would then be deaf to
    Ctrl-C, and the tests of what Ctrl-C does would hang.  A handler, unlike
    ``SIG_IGN``, is reset to the default in the children.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def node():
    before = {t.ident for t in threading.enumerate()}
    n = Node()
    try:
        yield n
    finally:
        n.close()
    assert not os.path.exists(n.rundir), "runtime directory left behind"
    leftover = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    for t in leftover:
        t.join(timeout=5.0)
    leftover = [t.name for t in leftover if t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"


@pytest.fixture
def key(tmp_path) -> str:
    """A fresh cluster key file made as a user makes one (``python -m actors keygen``)."""
    path = str(tmp_path / "cluster.key")
    subprocess.run(
        [sys.executable, "-m", "actors", "keygen", path],
        check=True,
        timeout=60,
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=os.getcwd()),
    )
    assert os.stat(path).st_mode & 0o777 == 0o600
    return path


# -- PostgreSQL: one throwaway cluster per session, a fresh schema per test --


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """The session's PostgreSQL cluster, stopped and deleted at the end: pgserver's
    binaries where its wheel is installed, else the system's (one code path).

    One server start per run, shared by every directory's tests; skips,
    saying how to get them, without either, or without psycopg and psycopg_pool.
    """
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        pytest.skip(HOW_TO_GET)
    if local_postgres.find_bindir() is None:
        pytest.skip(HOW_TO_GET)
    root = Path(tempfile.mkdtemp(prefix="otpy_postgres_"))
    try:
        cluster = PostgresCluster(root)
        try:
            yield cluster
        finally:
            cluster.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_database(postgres_cluster: PostgresCluster) -> str:
    """The session's test database (tests get a schema each in it)."""
    return postgres_cluster.create_database()


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster, postgres_database: str) -> Iterator[str]:
    """A store URL whose tables land in a fresh, empty schema of the session's database."""
    schema = postgres_cluster.create_schema(postgres_database)
    try:
        yield postgres_cluster.url(postgres_database, schema)
    finally:
        postgres_cluster.drop_schema(postgres_database, schema)


@pytest.fixture
def pg_url(postgres_url: str) -> str:
    """`postgres_url` under its old name, for the sharding tests until they take the new one.

    Remove once ``tests/sharding`` asks for ``postgres_url``: "pg" names process groups only.
    """
    return postgres_url
