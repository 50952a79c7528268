"""PostgreSQL on the database host (it lives in `actors.app.workload.pg_host`, which the demo uses too)."""

from actors.app.workload.pg_host import DATABASE, PgHost, pg_missing

__all__ = ["DATABASE", "PgHost", "pg_missing"]
