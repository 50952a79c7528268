"""The optional directory watcher: polls the adapter's data directory.

A host program that cannot call `actors.smoosh.handle_db_event` on every
write can let smoosh notice changes itself: with ``[smoosh] watch_interval``
set to a number of seconds (clamped to 0.05 .. 3600; absent or 0 means
off) and an adapter with ``scan()`` (`SQLiteAdapter.scan` gives ``{db:
(size, mtime_ns)}``), the watcher diffs successive scans every interval
and sends ``"local_updated"`` for every new or modified database to the
event listener, which applies staleness as for any other event.

Polling rather than inotify keeps it portable and its cost bounded: one
``listdir`` and one ``stat`` per database per interval.
"""

from __future__ import annotations

import logging
from typing import Any

from actors import GenServer
from actors.smoosh._names import DIR_WATCHER, EVENT_LISTENER, register_self
from actors.smoosh.adapter import changed_dbs

__all__ = ["DirWatcher", "MAX_INTERVAL", "MIN_INTERVAL", "watch_interval"]

log = logging.getLogger(__name__)

MIN_INTERVAL = 0.05
MAX_INTERVAL = 3600.0


def watch_interval(cfg: Any) -> float:
    """``[smoosh] watch_interval`` in seconds, clamped; 0 when off or invalid."""
    raw = cfg.get("smoosh", "watch_interval")
    if raw is None:
        return 0.0
    try:
        value = float(raw)
    except (TypeError, ValueError):
        log.error("smoosh: [smoosh] watch_interval = %r is not a number of seconds; watcher off", raw)
        return 0.0
    if value != value or value <= 0:
        return 0.0
    return min(MAX_INTERVAL, max(MIN_INTERVAL, value))


class DirWatcher(GenServer):
    """Scan, diff, report, every ``interval`` seconds."""

    def init(self, adapter: Any, interval: float) -> None:
        register_self(self, DIR_WATCHER)
        self.adapter = adapter
        self.interval = interval
        self.last = adapter.scan()
        self.send_after(interval, "scan")

    def _scan(self) -> list[str]:
        current = self.adapter.scan()
        changed = changed_dbs(self.last, current)
        self.last = current
        if changed:
            listener = self.whereis(EVENT_LISTENER)
            if listener is not None:
                for db in changed:
                    listener.cast(("db_event", db, "local_updated"))
        return changed

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "scan":  # a scan now; returns the changed databases
            return self._scan()
        raise ValueError(f"smoosh directory watcher: unknown call {request!r}")

    def handle_info(self, message: Any) -> None:
        if message == "scan":
            self._scan()
            self.send_after(self.interval, "scan")
