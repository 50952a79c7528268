"""Job classes and probes for the replicator's actor tests.

They live in a module of their own so the job host processes can import
them (classes travel by reference).  Every one is a host program's job class
as the docs describe it: built from a `Rep`, driven by the job actor.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
import time
from typing import Any

from actors import GenServer
from actors.replicator import DocStore, Rep, ReplicationJob


class Probe(GenServer):
    """Lives in the test process; every info message goes into a queue."""

    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q

    def handle_info(self, message: Any) -> None:
        self.q.put(message)


def _alive(pid: int) -> bool:
    """True when ``pid`` runs (a zombie, killed and not yet reaped, is dead)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


RUNS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs (job TEXT, pid INTEGER, started REAL, ended REAL)",
    "CREATE TABLE IF NOT EXISTS overlaps (job TEXT, pid INTEGER, other_pid INTEGER, at REAL)",
)


def runs_db(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    for statement in RUNS_SCHEMA:
        conn.execute(statement)
    return conn


class RecordingJob(ReplicationJob):
    """A replication that records each run in ``options["run_log"]`` (SQLite).

    At start it looks for another run of the same job whose process is still
    alive: that would be the job running twice at once, recorded in
    ``overlaps``.  Each run's start and end go to ``runs`` (a SIGKILLed run
    has no end).  ``options["notify"]``, when given, gets
    ``("progress", job id, through seq)`` after every batch.
    ``options["hold_first_run"]``: the job's first run stops after its first
    batch and waits (up to 30 s) to be killed, so a test that kills each job
    once it started always finds it running.
    """

    _first_run = False

    def start(self, now: float) -> None:
        super().start(now)
        log = self.rep.options.get("run_log")
        if log is None:
            return
        conn = runs_db(log)
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._first_run = (
                conn.execute("SELECT COUNT(*) FROM runs WHERE job = ?", (str(self.rep.id),)).fetchone()[0] == 0
            )
            for (pid,) in conn.execute(
                "SELECT pid FROM runs WHERE job = ? AND ended IS NULL", (str(self.rep.id),)
            ).fetchall():
                if pid != os.getpid() and _alive(pid):
                    conn.execute(
                        "INSERT INTO overlaps VALUES (?, ?, ?, ?)", (str(self.rep.id), os.getpid(), pid, time.time())
                    )
            conn.execute("UPDATE runs SET ended = -1 WHERE job = ? AND ended IS NULL", (str(self.rep.id),))
            conn.execute("INSERT INTO runs VALUES (?, ?, ?, NULL)", (str(self.rep.id), os.getpid(), time.time()))
            conn.execute("COMMIT")
        finally:
            conn.close()

    def _ended(self) -> None:
        log = self.rep.options.get("run_log")
        if log is None:
            return
        conn = runs_db(log)
        try:
            conn.execute(
                "UPDATE runs SET ended = ? WHERE job = ? AND pid = ? AND ended IS NULL",
                (time.time(), str(self.rep.id), os.getpid()),
            )
        finally:
            conn.close()

    def report_seq_done(self, seq: Any, stats: Any = None) -> None:
        super().report_seq_done(seq, stats)
        notify = self.rep.options.get("notify")
        if notify is not None:
            notify.send(("progress", self.rep.id, self.tracker.current_through_seq[1]))
        if self._first_run and self.rep.options.get("hold_first_run"):
            threading.Event().wait(30.0)  # the kill the test sends ends it

    def finish(self, now: float) -> None:
        self._ended()
        super().finish(now)

    def stop(self, now: float) -> None:
        self._ended()
        super().stop(now)

    def abort(self) -> None:
        self._ended()
        super().abort()


class GatedJob(ReplicationJob):
    """Its start blocks on ``options["gate"]`` (a `Gate`) until the test opens it."""

    def start(self, now: float) -> None:
        self.rep.options["gate"].call("wait", timeout=30.0)
        super().start(now)


class CountingJob:
    """A host program's own job (not a replication): ``options["steps"]`` steps, then done.

    Records its progress in a SQLite file (``options["log"]``) on checkpoint
    and stop, and resumes from it.
    """

    def __init__(self, rep: Rep) -> None:
        self.rep = rep
        self.done = 0
        self.steps = int(rep.options.get("steps", 10))
        self.conn: sqlite3.Connection | None = None

    def start(self, now: float) -> None:
        self.conn = sqlite3.connect(self.rep.options["log"], isolation_level=None, timeout=30.0)
        self.conn.execute("CREATE TABLE IF NOT EXISTS progress (job TEXT PRIMARY KEY, done INTEGER, why TEXT)")
        row = self.conn.execute("SELECT done FROM progress WHERE job = ?", (str(self.rep.id),)).fetchone()
        self.done = row[0] if row else 0

    def step(self, now: float) -> str:
        if self.done >= self.steps:
            self._record("done")
            return "done"
        self.done += 1
        return "progress"

    def checkpoint(self, now: float) -> bool:
        self._record("checkpoint")
        return True

    def stop(self, now: float) -> None:
        self._record("stop")

    def _record(self, why: str) -> None:
        assert self.conn is not None
        self.conn.execute("INSERT OR REPLACE INTO progress VALUES (?, ?, ?)", (str(self.rep.id), self.done, why))


def make_source(path: str, count: int, start: int = 0) -> None:
    """A source database with ``count`` documents (``d<start>``...)."""
    with DocStore(path, create=True) as store:
        for i in range(start, start + count):
            store.put(f"d{i:05d}", {"n": i})
