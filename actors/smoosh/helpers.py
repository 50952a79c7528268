"""The access cleaner and the event listener, `smoosh_server`'s linked helpers.

Both live in the server's process and share its `AccessTable` (upstream's
``smoosh_access`` ETS table) by reference.

* `AccessCleaner` (upstream ``access_cleaner/0``) sweeps the table every
  ``access_clean_interval`` seconds plus a random jitter of up to the same,
  so a burst of distinct names cannot grow it without bound.
* `EventListener` (upstream's ``couch_event`` listener calling
  ``handle_db_event/3``) receives ``("db_event", db, event)`` casts from the
  host program (`actors.smoosh.handle_db_event`) and from the directory
  watcher, turns them into keys, and drops keys enqueued within
  ``staleness`` minutes *before* they reach the server: a busy database
  sends an event per write, and the server must not see them all.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from actors import GenServer
from actors import config as _config
from actors.smoosh._names import ACCESS_CLEANER, EVENT_LISTENER, register_self
from actors.smoosh.access import AccessTable
from actors.smoosh.server_state import db_event_keys

__all__ = ["AccessCleaner", "EventListener", "staleness_sec"]

log = logging.getLogger(__name__)


def staleness_sec(cfg: Any) -> float:
    """``[smoosh] staleness`` in seconds; a bad value falls back to the default 5 min."""
    raw = cfg.get("smoosh", "staleness", "5")
    try:
        minutes = float(raw)
    except (TypeError, ValueError):
        log.error("smoosh: [smoosh] staleness = %r is not a number of minutes; using 5", raw)
        minutes = 5.0
    return max(0.0, minutes) * 60


class AccessCleaner(GenServer):
    """Periodic sweep of the access table."""

    def init(self, access: AccessTable, interval: float) -> None:
        register_self(self, ACCESS_CLEANER)
        self.access = access
        self.interval = interval
        self.cfg = _config.current()
        self._schedule()

    def _schedule(self) -> None:
        self.send_after(AccessTable.next_clean_delay(self.interval, random.random()), "clean")

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "clean":  # a sweep now (tests, operators)
            return self.access.clean(time.monotonic(), staleness_sec(self.cfg))
        raise ValueError(f"smoosh access cleaner: unknown call {request!r}")

    def handle_info(self, message: Any) -> None:
        if message == "clean":
            removed = self.access.clean(time.monotonic(), staleness_sec(self.cfg))
            if removed:
                log.debug("smoosh access cleaner: removed %d entries", removed)
            self._schedule()


class EventListener(GenServer):
    """Database events in, stale-enough keys out to the server."""

    def init(self, access: AccessTable, server: Any) -> None:
        register_self(self, EVENT_LISTENER)
        self.access = access
        self.server = server
        self.cfg = _config.current()
        self._raw_staleness: Any = object()
        self._staleness = 0.0

    def _staleness_sec(self) -> float:
        raw = self.cfg.get("smoosh", "staleness", "5")
        if raw != self._raw_staleness:
            self._raw_staleness = raw
            self._staleness = staleness_sec(self.cfg)
        return self._staleness

    def handle_cast(self, request: Any) -> None:
        if request[0] != "db_event":
            raise ValueError(f"smoosh event listener: unknown cast {request!r}")
        _, db, event = request
        if not isinstance(db, str):
            log.warning("smoosh event listener: database name %r is not a string", db)
            return
        now = time.monotonic()
        staleness = self._staleness_sec()
        for key in db_event_keys(db, event):
            if self.access.stale_enough(key, now, staleness):
                self.server.cast(("enqueue", key))

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "ping":  # lets a caller wait until earlier events are handled
            return "pong"
        raise ValueError(f"smoosh event listener: unknown call {request!r}")
