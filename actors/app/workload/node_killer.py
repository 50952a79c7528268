"""The node-killing driver of ``demo --nodes``: SIGKILL a whole node, restart it, one at a time."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from .base import Driver
from .nodes import NodeSet

__all__ = ["NodeKiller"]


class NodeKiller(Driver):
    """SIGKILL a random live node every ``period`` seconds, then restart it (one node down at a time)."""

    name = "node-killer"

    def __init__(
        self, nodes: NodeSet, period: float, *, first_after: float | None = None, seed: int | None = None
    ) -> None:
        super().__init__(period)
        self.nodes = nodes
        self.first_after = period if first_after is None else first_after
        self.rng = random.Random(seed)
        self.kills = 0
        self.restarts = 0
        self.log: list[str] = []
        self._restarting: list[threading.Thread] = []

    def _run(self, index: int) -> None:
        if self.stop_flag.wait(self.first_after):
            return
        super()._run(index)

    def tick(self, index: int) -> None:
        up = self.nodes.up()
        if len(up) < len(self.nodes.nodes) or self.nodes.faulted:  # one node down (or cut off) at a time
            return
        name = self.rng.choice(up)
        pid = self.nodes.kill(name)
        if pid is None:
            return
        with self.lock:
            self.kills += 1
            self.log.append(f"SIGKILL node {name} (pid {pid})")
        # Restarted on a thread of its own, so stopping the load never waits for a node to boot (the
        # summary's settle does, bounded); the next kill waits until every node is up again.
        thread = threading.Thread(target=self._restart, args=(name,), name=f"restart-{name}", daemon=True)
        self._restarting.append(thread)
        thread.start()

    def _restart(self, name: str) -> None:
        try:
            ok = self.nodes.restart(name)
        except RuntimeError:  # the node set is stopping: no restart
            return
        if ok:
            with self.lock:
                self.restarts += 1

    def join(self, timeout: float) -> None:
        """Wait (bounded) for the restarts under way: after `NodeSet.stop_all` they end at once."""
        deadline = time.monotonic() + timeout
        for thread in self._restarting:
            thread.join(max(0.0, deadline - time.monotonic()))

    def summary(self) -> str:
        with self.lock:
            return f"node kills: {self.kills} nodes SIGKILLed, {self.restarts} restarted"

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"kills": self.kills, "restarts": self.restarts, "last": self.log[-1] if self.log else ""}
