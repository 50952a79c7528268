"""``demo --nodes N``'s sharded workload: a counter entity per key, hosted by every node.

Every node runs the ``demo_counter`` type under its workload supervisor
(`counter_spec`), the controller a proxy region of it; `ShardedCounters`
increments counters of `KEYS` keys from the controller while nodes are
SIGKILLed and actors killed, and at the end reads every counter back.

A `LedgerCounter` writes each increment before it acknowledges it: with a
sharding store under the shard's fencing token (`EntityContext.save`),
else in a SQLite file every node of this one machine shares.  It keeps
its count in memory between writes and reads the file only when it
starts, so the check judges sharding too: were a key active on two nodes
at once, or started without its last write, an acknowledged increment
would be missing from the final count.
"""

from __future__ import annotations

import functools
import os
import random
import sqlite3
import threading
import time
from typing import Any

from actors import CallTimeout, Exit, Node, sharding
from supervision import ChildSpec

from .base import Check, Driver

__all__ = ["KEYS", "SHARDS", "TYPE", "LedgerCounter", "ShardedCounters", "counter_spec"]

TYPE = "demo_counter"
SHARDS = 30
#: Counter entities the controller drives.
KEYS = 200

_connections: dict[str, sqlite3.Connection] = {}
_lock = threading.Lock()


def _ledger(path: str) -> sqlite3.Connection:
    """This process's connection to the shared counters file (entities run on many threads)."""
    with _lock:
        conn = _connections.get(path)
        if conn is None:
            conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS counters (key TEXT PRIMARY KEY, n INTEGER NOT NULL)")
            _connections[path] = conn
        return conn


class LedgerCounter:
    """A counter that writes its new value before it answers an increment."""

    def __init__(self, path: str, context: sharding.EntityContext) -> None:
        self.context = context
        self.path = path
        self.n = int(self._load() or 0)

    def _load(self) -> Any:
        if self.context.has_store:
            return self.context.load()
        conn = _ledger(self.path)
        with _lock:
            row = conn.execute("SELECT n FROM counters WHERE key = ?", (str(self.context.key),)).fetchone()
        return None if row is None else row[0]

    def _save(self, value: int) -> None:
        if self.context.has_store:
            self.context.save(value)  # refused (Fenced) once the shard moved on
            return
        conn = _ledger(self.path)
        with _lock:
            conn.execute(
                "INSERT INTO counters (key, n) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET n = excluded.n",
                (str(self.context.key), value),
            )

    def handle_call(self, request: Any) -> Any:
        if request == "get":
            return self.n
        self._save(self.n + int(request))
        self.n += int(request)
        return self.n


def counter_spec(path: str, store: str | None = None) -> ChildSpec:
    """The counter type's tree for a node's workload supervisor (``store``: a PostgreSQL URL)."""
    return sharding.spec(
        TYPE,
        functools.partial(LedgerCounter, path),
        shards=SHARDS,
        idle=None,
        store=store,
        lease_ttl=4.0 if store else None,
        rebalance_every=1.0,
    )


class ShardedCounters(Driver):
    """Increments random counters through the controller's proxy region; counts what was
    tried and acknowledged per key, and at the end reads every counter back."""

    name = "sharding"

    def __init__(self, node: Node, path: str, *, seed: int, period: float = 0.01, threads: int = 2) -> None:
        super().__init__(period, threads)
        self.node = node
        self.path = path
        self.keys = [f"c{i}" for i in range(KEYS)]
        self.rngs = [random.Random(seed * 31 + i) for i in range(threads)]
        self.tried = dict.fromkeys(self.keys, 0)
        self.acked = dict.fromkeys(self.keys, 0)
        self.calls = 0
        self.failed = 0

    def setup(self) -> None:
        """The counters file, and this node's proxy region (the calls enter through it)."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        _ledger(self.path)
        sharding.start(self.node, TYPE, None, shards=SHARDS, proxy=True, rebalance_every=1.0)

    def tick(self, index: int) -> None:
        key = self.rngs[index].choice(self.keys)
        with self.lock:
            self.tried[key] += 1
            self.calls += 1
        try:
            sharding.ref(TYPE, key).call(1, timeout=5.0)
        except Exception as exc:  # an exit, a timeout, a full buffer: failed, not acknowledged
            with self.lock:
                self.failed += 1
            self.error(type(exc).__name__)
            return
        with self.lock:
            self.acked[key] += 1

    def _read(self, key: str, deadline: float) -> int | None:
        for _ in range(100):  # a node restarting: its shards come back within the deadline
            try:
                return int(sharding.ref(TYPE, key).call("get", timeout=5.0))
            except (Exit, CallTimeout):
                if time.monotonic() > deadline:
                    return None
        return None

    def check(self) -> Check:
        c = Check("sharding")
        deadline = time.monotonic() + 30.0
        with self.lock:
            tried, acked = dict(self.tried), dict(self.acked)
        lost: list[str] = []
        extra: list[str] = []
        unread: list[str] = []
        for key in self.keys:
            if not tried[key]:
                continue
            got = self._read(key, deadline)
            if got is None:
                unread.append(key)
            elif got < acked[key]:
                lost.append(f"{key}: {got} < {acked[key]} acknowledged")
            elif got > tried[key]:
                extra.append(f"{key}: {got} > {tried[key]} tried")
        read = sum(1 for k in self.keys if tried[k]) - len(unread)
        c.lines.append(
            f"sharding: {self.calls} entity calls to {KEYS} counter entities ({SHARDS} shards over the nodes, "
            f"entered through {self.node.name}'s proxy region): {sum(acked.values())} acknowledged, {self.failed} "
            f"failed with an exit reason (kills, moves{', ' + str(self.errors) if self.errors else ''}); "
            f"{read} counters read back: "
            + (
                "every acknowledged increment counted, 0 lost"
                if not (lost or extra or unread)
                else f"LOST {len(lost)}, counted more than tried {len(extra)}, unreadable {len(unread)}"
            )
        )
        c.lines.extend(f"    {line}" for line in (lost + extra)[:20])
        if unread:
            c.lines.append(f"    unreadable: {', '.join(unread[:20])}")
        c.lost = len(lost) + len(extra) + len(unread)
        c.counted = f"{self.calls} entity calls"
        return c

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"calls": self.calls, "acked": sum(self.acked.values()), "failed": self.failed}
