"""PostgreSQL on the database host (it lives in `actors.app.workload.postgres_host`, which the demo uses too)."""

from actors.app.workload.postgres_host import DATABASE, PostgresHost, postgres_host_missing

__all__ = ["DATABASE", "PostgresHost", "postgres_host_missing"]
