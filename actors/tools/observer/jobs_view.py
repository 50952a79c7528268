"""The observer's read-only view of couch_jobs' store, for the couch_jobs panel.

couch_jobs keeps its pending and running counts in its store, not in an
actor, so the panel asks the store - through couch_jobs' public
`actors.couch_jobs.counts` - on a view opened ``read_only`` from the node's
configuration (``[couch_jobs] store``, else ``database_path``): a SQLite
file or a PostgreSQL database alike, from the node's process or from
another one (``observe RUNDIR``).  The view is opened once, reopened if the
configuration names another store, and closed with the observer.
"""

from __future__ import annotations

import threading

from actors.couch_jobs import Store, counts, encode_type, open_store
from actors.couch_jobs.attachment import DATABASE_PATH_KEY, STORE_KEY
from actors.couch_jobs.settings import SECTION

__all__ = ["JobsView", "store_location"]

#: A panel read must never hold up the poll for long.
_TIMEOUT = 1.0


def store_location(config: dict[str, dict[str, str]]) -> str | None:
    """The store the node's couch_jobs uses, as its processes find it."""
    section = config.get(SECTION, {})
    return section.get(STORE_KEY) or section.get(DATABASE_PATH_KEY) or None


class JobsView:
    """``counts(config)``: jobs per encoded type and state, read-only; ``close()``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._location: str | None = None
        self._store: Store | None = None

    def counts(self, config: dict[str, dict[str, str]]) -> dict[str, dict[str, int]] | None:
        """None when the node names no store."""
        location = store_location(config)
        if location is None:
            return None
        with self._lock:
            if location != self._location or self._store is None:
                self._close_store()
                self._store = open_store(
                    location, read_only=True, busy_timeout=_TIMEOUT, connect_timeout=_TIMEOUT, pool_size=1
                )
                self._location = location
            store = self._store
        return {encode_type(t): c for t, c in counts(store).items()}

    def close(self) -> None:
        with self._lock:
            self._close_store()

    def _close_store(self) -> None:
        store, self._store, self._location = self._store, None, None
        if store is not None:
            store.close()

    def __repr__(self) -> str:
        return f"JobsView({self._location!r})"
