"""A throwaway PostgreSQL cluster for the tests (`actors.couch_jobs.local_postgres`).

One cluster per test session, whatever directories the session runs
(the ``postgres_cluster`` fixture of ``tests/conftest.py``), in a temporary
directory, reached over a unix socket in that directory (no TCP port, no
root, no system service); each test gets a fresh schema in it (``postgres_url``).  `PostgresCluster.stop`/`start` let a test
take the server away under load.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from actors.couch_jobs import local_postgres
from actors.couch_jobs.local_postgres import LocalPostgres

HOW_TO_GET = "PostgreSQL tests: " + local_postgres.HOW_TO_GET


def postgres_missing() -> str | None:
    """Why no throwaway PostgreSQL can run here (no binaries, no driver), or None."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return HOW_TO_GET
    return None if local_postgres.find_bindir() else HOW_TO_GET


class PostgresCluster:
    def __init__(self, root: Path) -> None:
        self.server = LocalPostgres(root / "data")  # pgserver's binaries, else the system's
        self.pgdata = self.server.pgdata
        self.socket_dir = self.server.socket_dir
        self.port = self.server.port
        self.admin_url = self.server.url()

    def url(self, database: str, schema: str | None = None) -> str:
        parts = urlsplit(self.admin_url)
        query = parts.query
        if schema is not None:
            query += f"&options=-c%20search_path%3D{schema}"
        return urlunsplit((parts.scheme, parts.netloc, "/" + database, query, ""))

    def _admin(self, sql: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql)

    def create_database(self) -> str:
        name = "cj_" + uuid.uuid4().hex[:12]
        self._admin(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def create_schema(self, database: str) -> str:
        """A fresh schema: a test's own empty namespace, far cheaper than a database."""
        name = "t_" + uuid.uuid4().hex[:12]
        self._admin(f'CREATE SCHEMA "{name}"', database)
        return name

    def drop_schema(self, database: str, name: str) -> None:
        self._admin(f'DROP SCHEMA IF EXISTS "{name}" CASCADE', database)

    def stop(self) -> None:
        """Stop the server now (``immediate``: connections drop as in a crash)."""
        self.server.stop("immediate")

    def start(self) -> None:
        self.server.start()

    def close(self) -> None:
        self.server.close()
