"""Choose the job store from a URL (``[couch_jobs] store``).

- ``sqlite:///abs/path/jobs.db`` or a plain path: `SQLiteStore`, the embedded
  default (one machine);
- ``postgresql://user@host:5432/db`` (or ``postgres://``): `PostgresStore`,
  shared by nodes on many machines.

Anything else fails with one line naming the URL (its password removed).
"""

from __future__ import annotations

import os
from typing import Any

from .errors import StoreUnavailable
from .store import Store
from .store_postgres import PostgresStore, redact
from .store_sqlite import SQLiteStore

__all__ = ["is_url", "open_store", "redact"]

_SQLITE = "sqlite://"
_POSTGRES = ("postgresql://", "postgres://")


def is_url(location: str) -> bool:
    return "://" in location


def open_store(location: str | os.PathLike[str], **options: Any) -> Store:
    """Open the store ``location`` names.

    ``options``: ``busy_timeout`` (seconds), ``synchronous`` and
    ``idle_connections`` (the pool kept per process) for SQLite;
    ``pool_size``, ``connect_timeout`` and ``idle_in_transaction_timeout``
    (seconds, None for the server's setting) for PostgreSQL (options meant for
    the other store are ignored, so one config serves both); ``read_only``
    for both: a view for monitors (`counts`, the observer) that creates and
    migrates nothing and refuses writing transactions (`StoreReadOnly`).
    """
    text = os.fspath(location)
    if text.startswith(_POSTGRES):
        pg_keys = ("pool_size", "connect_timeout", "read_only", "idle_in_transaction_timeout")
        pg = {k: v for k, v in options.items() if k in pg_keys}
        return PostgresStore(text, **pg)
    if text.startswith(_SQLITE):
        path = text[len(_SQLITE) :]
        if not path.startswith("/"):
            raise StoreUnavailable(
                f"couch_jobs store {redact(text)!r}: a sqlite URL needs an absolute path (sqlite:///abs/path/jobs.db)"
            )
        text = path
    elif is_url(text):
        raise StoreUnavailable(
            f"couch_jobs store {redact(text)!r}: unknown scheme (use sqlite:///path or postgresql://user@host:5432/db)"
        )
    lite = {k: v for k, v in options.items() if k in ("busy_timeout", "synchronous", "read_only", "idle_connections")}
    return SQLiteStore(text, **lite)
