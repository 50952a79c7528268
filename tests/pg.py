"""A throwaway PostgreSQL cluster for the tests, from the ``pgserver`` wheel.

One cluster per test session, whatever directories the session runs
(the ``pg_cluster`` fixture of ``tests/conftest.py``), in a temporary
directory, reached over a unix socket in that directory (no TCP port, no
root, no system service); each test gets a fresh schema in it (``pg_url``).  `PgCluster.stop`/`start` let a test
take the server away under load.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from actors.couch_jobs.local_postgres import start_server

HOW_TO_GET = (
    "PostgreSQL tests need the pgserver wheel and psycopg: "
    "pip install -e '.[test]' (pgserver, psycopg[binary], psycopg_pool)"
)


class PgCluster:
    def __init__(self, root: Path) -> None:
        # imported here so the suite runs (and skips) without pgserver
        from pgserver.postgres_server import pg_ctl

        self._pg_ctl = pg_ctl
        self.pgdata = root / "data"
        self.server: Any = start_server(str(self.pgdata))  # survives a slow start
        self.socket_dir = self.server.get_postmaster_info().socket_dir
        self.admin_url = self.server.get_uri()
        self.restarted = False

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

    def pg_ctl(self, *args: str) -> None:
        # pgserver's wrapper runs it as the cluster's user (postgres refuses root).
        self._pg_ctl(list(args), pgdata=self.pgdata, user=self.server.system_user, timeout=60)

    def stop(self) -> None:
        """Stop the server now (``immediate``: connections drop as in a crash)."""
        self.pg_ctl("-w", "-m", "immediate", "stop")

    def start(self) -> None:
        self.restarted = True  # pgserver's own cleanup no longer knows this postmaster
        self.pg_ctl("-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.pgdata / "restart.log"), "start")

    def close(self) -> None:
        if self.restarted:
            self.pg_ctl("-w", "-m", "fast", "stop")
        self.server.cleanup()
