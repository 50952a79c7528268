"""Where a replication's databases live: a SQLite file, or a database of the shared store.

``[replicator] store`` is empty (the default: every database is a SQLite
file, named by its path) or a PostgreSQL URL (``postgresql://...``): then
``_replicator`` and every database a replication names by a bare name
(``"orders"``, not a path) live in that PostgreSQL database, reached by
every node on every machine.  An absolute path (or ``sqlite:///path``) is a
SQLite file either way.
"""

from __future__ import annotations

import os
from typing import Any

from .docstore import DocStore
from .docstore_pg import DB_NAME_RE, PgDocStore, redact
from .docstore_sql import SQLDocStore

__all__ = ["REPLICATOR_DB", "is_postgres", "open_db", "open_replicator_db", "redact"]

REPLICATOR_DB = "_replicator"
_POSTGRES = ("postgresql://", "postgres://")
_SQLITE = "sqlite://"


def is_postgres(location: Any) -> bool:
    """``location`` is a PostgreSQL store URL."""
    return isinstance(location, str) and location.startswith(_POSTGRES)


def open_db(
    location: str | os.PathLike[str], *, store: str | None = None, create: bool = False, **pg_options: Any
) -> SQLDocStore:
    """The database ``location`` names: a bare name is a database of the PostgreSQL
    ``store`` (when there is one), anything else a SQLite file path."""
    text = os.fspath(location)
    if text.startswith(_SQLITE):
        return DocStore(text[len(_SQLITE) :], create=create)
    if is_postgres(text):
        raise ValueError(f"{redact(text)!r}: name a database of the store by its name, not by a URL")
    if store is not None and is_postgres(store) and DB_NAME_RE.match(text):
        return PgDocStore(store, text, create=create, **pg_options)
    return DocStore(text, create=create)


def open_replicator_db(where: str | os.PathLike[str], **pg_options: Any) -> SQLDocStore:
    """The ``_replicator`` database: of the PostgreSQL store ``where``, or the SQLite file ``where``."""
    text = os.fspath(where)
    if is_postgres(text):
        return PgDocStore(text, REPLICATOR_DB, create=True, **pg_options)
    return DocStore(text[len(_SQLITE) :] if text.startswith(_SQLITE) else text, create=True)
