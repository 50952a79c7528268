"""Wake-ups across machines: one LISTEN/NOTIFY listener thread per process.

A transaction of `store_postgres` that changes jobs of a type runs
``pg_notify('couch_jobs', type)``; PostgreSQL delivers it at commit to every
``LISTEN``-ing connection on any machine.  This module is the receiving end,
kept apart from the store's pool and queries because it is the one part that
owns a thread and a connection of its own: it LISTENs, turns each
notification into calls of the store's change listeners, and reconnects
with back-off when its connection drops.  No polling.

A notification sent before the ``LISTEN`` is in place reaches nobody here
(the thread is still connecting when a process's first `accept` reads the
queue), so once it listens -- first time and after a reconnect alike -- the
thread wakes every listener for every known type: whoever read the queue
before that reads it again, now with the LISTEN in place.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

try:  # the PostgreSQL store is optional: pip install 'otpy-actors[postgres]'
    import psycopg
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

from .store import CommitListener

__all__ = ["NOTIFY_CHANNEL", "PgListener"]

_log = logging.getLogger(__name__)

#: The LISTEN/NOTIFY channel; the payload is an encoded job type.
NOTIFY_CHANNEL = "couch_jobs"


class PgListener:
    """This process's LISTEN connection and the change listeners it wakes.

    ``connect_kwargs`` gives the connection parameters the store adds to
    ``url`` (asked at each connect, as the pool does); ``location`` and
    ``scrub`` name the store in log lines without its password.  The thread
    starts with the first listener added and is per process: after ``fork``
    the next `add` starts one of the child's own.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_kwargs: Callable[[], dict[str, Any]],
        location: str,
        scrub: Callable[[str], str],
    ) -> None:
        self.url = url
        self.location = location
        self._connect_kwargs = connect_kwargs
        self._scrub = scrub
        self._lock = threading.Lock()
        self._closed = False
        self._listeners: list[CommitListener] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def add(self, listener: CommitListener) -> None:
        """Call ``listener(types)`` for commits in any process on any machine.

        A closed listener starts no thread: `stop` would not end it.
        """
        with self._lock:
            self._listeners.append(listener)
            if self._closed:
                return
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(target=self._loop, name="couch_jobs-pg-listen", daemon=True)
                self._thread.start()

    def remove(self, listener: CommitListener) -> None:
        with self._lock:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

    def stop(self) -> threading.Thread | None:
        """Tell this process's thread to end, and start no other; the thread, to `join`."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._thread = None
        self._stop.set()
        return thread

    def _fire(self, types: frozenset[str]) -> None:
        for listener in list(self._listeners):
            try:
                listener(types)
            except Exception:
                _log.exception("couch_jobs change listener %r failed", listener)

    def _loop(self) -> None:
        """LISTEN on a connection of its own; reconnect with back-off when it drops."""
        delay = 0.05
        warned = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, **self._connect_kwargs()) as conn:
                    self._subscribe(conn)
                    if warned:
                        _log.warning("couch_jobs store %s: listening again", self.location)
                    # Notifications sent before the LISTEN (while connecting, the
                    # first time too, or while away) reached nobody here: wake
                    # everyone, who then re-read the store with the LISTEN in place.
                    self._fire(frozenset(self._known_types(conn)))
                    delay, warned = 0.05, False
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.2):
                            self._fire(frozenset((note.payload,)))
                            if self._stop.is_set():
                                break
            except psycopg.Error as exc:
                if self._stop.is_set():
                    return
                if not warned:
                    _log.warning(
                        "couch_jobs store %s: listener lost its connection (%s); reconnecting",
                        self.location,
                        self._scrub(str(exc)),
                    )
                    warned = True
                self._stop.wait(delay)
                delay = min(2.0, delay * 2)

    def _subscribe(self, conn: psycopg.Connection) -> None:
        """``LISTEN`` on ``conn`` (autocommit: in effect when this returns)."""
        conn.execute(f"LISTEN {NOTIFY_CHANNEL}")

    @staticmethod
    def _known_types(conn: psycopg.Connection) -> list[str]:
        return [r[0] for r in conn.execute("SELECT type FROM couch_jobs_type_timeouts").fetchall()]
