"""A thread that polls the node and keeps the latest picture for the page.

Polling happens here, on its own thread, at a fixed pace whatever the
number of browsers watching; the web server only hands out the latest
picture.  Each poll costs the node what ``python -m actors status`` costs:
one snapshot request per process, and one status call per running service.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from actors import CallTimeout, Exit
from actors.tools.observer import model
from actors.tools.observer.probes import panels
from actors.tools.observer.procstat import ProcSampler
from actors.tools.observer.source import Source

__all__ = ["Collector"]

log = logging.getLogger("actors.tools.observer")
RESTARTS_PREFIX = "supervision.restarts."


class Collector:
    """``latest`` is the newest picture (a dict), ``version`` counts pictures taken."""

    def __init__(self, source: Source, interval: float = 0.5, window: float = 300.0) -> None:
        self.source = source
        self.interval = interval
        self.version = 0
        self.latest: dict[str, Any] = {}
        self.actors: list[dict[str, Any]] = []
        self.hosts: list[dict[str, Any]] = []
        self._history = model.History(window)
        self._reports = model.ReportLog()
        self._sampler = ProcSampler()
        self._handled: dict[str, int] = {}
        self._restarts_total: int | None = None
        self._last_t: float | None = None
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="otpy-observer-poll", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def wait_newer(self, version: int, timeout: float) -> bool:
        """Block until a picture newer than ``version`` exists (for callers on plain threads)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.version > version, timeout=timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.poll()
            except Exception:  # a bad poll must not end the observer; the next one may succeed
                log.exception("observer: polling the node failed")
            # Pacing a fixed-rate poll; close() wakes it at once.
            self._stop.wait(max(0.05, self.interval - (time.monotonic() - started)))

    def poll(self) -> dict[str, Any]:
        """Take one picture of the node now."""
        now = time.monotonic()
        errors: list[str] = []
        actors = self.source.actors()
        hosts = self.source.hosts()
        try:
            counters = self.source.stats().get("counters", {})
        except (Exit, CallTimeout) as exc:
            counters = {}
            errors.append(f"stats: {exc}")
        try:
            peers = self.source.peers()
        except (Exit, CallTimeout) as exc:
            peers = []
            errors.append(f"peers: {exc}")
        restarts_total = sum(v for k, v in counters.items() if k.startswith(RESTARTS_PREFIX))
        dt = None if self._last_t is None else max(1e-3, now - self._last_t)
        previous = self._handled
        handled, self._handled = model.message_delta(previous, actors)
        rates: dict[str, float] = {}
        if dt is not None:
            rates = {i: max(0, n - previous.get(i, n)) / dt for i, n in self._handled.items()}
            restarted = max(0, restarts_total - (self._restarts_total or 0))
            self._history.add(time.time(), restarted, handled / dt)
        self._restarts_total, self._last_t = restarts_total, now
        usage = self._sampler.sample(
            [self.source.node_pid] + [h.get("pid") or 0 for h in hosts if h.get("state") == "up"]
        )
        tree = model.tree_rows(actors, rates)
        names = {r["actor"]: str(r["name"]) for r in tree if r.get("actor") and r.get("name")}
        picture = {
            "node": {
                "id": self.source.node_id,
                "pid": self.source.node_pid,
                "time": time.time(),
                "actors": len(actors),
                "hosts": sum(1 for h in hosts if h.get("state") == "up"),
                "restarts": restarts_total,
                "embedded": self.source.embedded,
                "dropped": counters.get("actors.mailbox.dropped", 0),
            },
            "tree": tree,
            "hosts": model.host_rows(hosts, actors, self.source.node_pid, usage, names),
            "peers": peers,
            "distributed": "@" in self.source.node_id,
            "panels": panels(self.source, actors),
            "log": [
                {**r, "supervisor": names.get(r["actor"], r.get("supervisor"))}
                for r in self._reports.merge(actors)[:80]
            ],
            "series": self._history.series(),
            "errors": errors,
        }
        with self._changed:
            self.actors, self.hosts, self.latest = actors, hosts, picture
            self.version += 1
            self._changed.notify_all()
        return picture
