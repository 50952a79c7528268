"""What the clustered replicator tests run inside their node processes, and read back.

`AuditedJob` is the built-in `ReplicationJob` that writes every start (with
the sequence it resumed from) and every stop to a shared SQLite audit file,
with the node it ran on and the wall-clock time; `NodesAudit` writes every
nodeup/nodedown a node sees to the same file.  The tests read the audit to
prove where jobs ran, that none ran on two nodes at once, and that a job
taken over from a killed node resumed from its checkpoint.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from actors import GenServer
from actors.replicator import Rep, ReplicationJob

AUDIT_ENV = "REPCLU_AUDIT"
NODE_ENV = "REPCLU_NODE"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, node TEXT NOT NULL,"
    " job TEXT, seq INTEGER, t REAL NOT NULL)"
)


def create(path: str) -> None:
    """Make the audit file (once, before any node writes to it)."""
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(_SCHEMA)
    finally:
        conn.close()


def record(path: str, kind: str, node: str, job: str | None, seq: int | None) -> None:
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO events (kind, node, job, seq, t) VALUES (?, ?, ?, ?, ?)", (kind, node, job, seq, time.time())
        )
    finally:
        conn.close()


def read(path: str) -> list[tuple[str, str, str | None, int | None, float]]:
    """Every event, in the order written: (kind, node, job, seq, t)."""
    if not os.path.exists(path):
        return []
    conn = sqlite3.connect(path, timeout=30.0)
    try:
        return conn.execute("SELECT kind, node, job, seq, t FROM events ORDER BY id").fetchall()
    finally:
        conn.close()


class AuditedJob(ReplicationJob):
    """A `ReplicationJob` that records its start (and resume sequence) and its stop."""

    def __init__(self, rep: Rep, **kw: Any) -> None:
        super().__init__(rep, **kw)
        self._audit = os.environ[AUDIT_ENV]
        self._node = os.environ[NODE_ENV]
        self._open = False

    def start(self, now: float) -> None:
        super().start(now)
        self._open = True
        record(self._audit, "start", self._node, str(self.rep.id), self.start_seq[1])

    def _closed(self) -> None:
        if self._open:
            self._open = False
            record(self._audit, "stop", self._node, str(self.rep.id), self.tracker.committed_seq[1])

    def stop(self, now: float) -> None:
        super().stop(now)
        self._closed()

    def finish(self, now: float) -> None:
        super().finish(now)
        self._closed()

    def abort(self) -> None:
        super().abort()
        self._closed()


class NodesAudit(GenServer):
    """Records every nodeup/nodedown this node sees (``monitor_nodes``)."""

    def init(self) -> None:
        self.monitor_nodes()

    def handle_info(self, message: Any) -> None:
        event, name = message
        record(os.environ[AUDIT_ENV], event, os.environ[NODE_ENV], name, None)
