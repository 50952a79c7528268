"""Read a node at scrape time: every OS process's counts, its hosts, links and services.

A custom ``prometheus_client`` collector: each scrape asks the node for one
stats snapshot per process (`Node.process_stats`, the path ``Node.stats``
and the observer already take), its hosts, connected nodes and link
counters.  The services' numbers are among the processes' stats: each
service records under its seed's names where it runs.  Nothing
is counted in shared memory or files (the client's multiprocess mode): the
processes keep counting as they always do, and a scrape costs the node what
an observer poll costs, only when Prometheus asks.

Counters must never go back, but a host process that ends takes its counts
with it; the collector keeps each process's last snapshot and, when the
process is gone, folds what it had counted into a running total
(`actors._core.metrics.families.retire`).
"""

from __future__ import annotations

import threading
from typing import Any, Iterator, Protocol

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from actors._core.metrics.families import Scrape, families, retire

__all__ = ["NodeCollector", "Scraped"]


class Scraped(Protocol):
    """The public calls of `actors.Node` a scrape uses."""

    def process_stats(self, timeout: float = ...) -> list[dict[str, Any]]: ...
    def hosts(self) -> list[dict[str, Any]]: ...
    def nodes(self) -> list[str]: ...
    def net_stats(self) -> dict[str, int]: ...


class NodeCollector(Collector):
    """Gathers the node's metrics when Prometheus scrapes (``collect``)."""

    def __init__(self, node: Any, timeout: float = 2.0) -> None:
        self.node: Scraped = node
        self.timeout = timeout
        self._lock = threading.Lock()  # scrapes may overlap (the HTTP server has a thread per request)
        self._last: dict[str, dict[str, Any]] = {}
        self._retired: dict[str, Any] = {}

    def scrape(self) -> Scrape:
        """Read the node now (plain data; `collect` names it)."""
        answers = self.node.process_stats(timeout=self.timeout)
        with self._lock:
            listed = {a["proc"] for a in answers}
            for proc in [p for p in self._last if p not in listed]:
                # Gone from the node: what it counted stays in the totals.
                self._retired = retire(self._retired, self._last.pop(proc))
            snapshots, unanswered = [], 0
            for answer in answers:
                if answer["stats"] is not None:
                    self._last[answer["proc"]] = answer["stats"]
                else:
                    unanswered += 1  # busy, not gone: count what it had last time
                if answer["proc"] in self._last:
                    snapshots.append(self._last[answer["proc"]])
            retired = self._retired
        return Scrape(
            processes=snapshots,
            hosts=self.node.hosts(),
            nodes=self.node.nodes(),
            net=self.node.net_stats(),
            unanswered=unanswered,
            retired=retired,
        )

    def collect(self) -> Iterator[Metric]:
        yield from families(self.scrape())
