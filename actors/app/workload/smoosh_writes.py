"""Database writes that make smoosh compact files, and the accounting of every compaction.

Each round picks a database that is not waiting for a compaction, inserts
rows of random bytes into its SQLite file and deletes all but the newest
quarter of its rows, which leaves the file mostly free pages (ratio file size / live data
about 4), then announces it with ``smoosh.handle_db_event(db,
"local_updated")`` as CouchDB does after a write.

A database is *compacted* when its file's free-page count (read from the
SQLite header, no lock taken) is back to zero: only a VACUUM does that,
since nothing else writes to it while it waits.  smoosh is fed by events and
may drop its in-memory queue when a channel or its host is killed (what was
enqueued after the last checkpoint); CouchDB recovers because the next write
sends the next event.  The driver does the same: a database that saw no
progress (no ``enqueued``/``started``/``exited`` from the smoosh observer)
for ``resend_after`` seconds gets its event again, and the summary counts
those re-sends.  At the end every database is either compacted, still in a
channel's queue (waiting, starting or active), or in a channel's checkpoint
file -- otherwise it is lost.
"""

from __future__ import annotations

import glob
import os
import random
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from actors import CallTimeout, Exit, GenServer, Node
from actors.smoosh import channel_ref, handle_db_event, persist, status
from actors.smoosh.adapter import header_info

from .base import Check, Driver

__all__ = ["DbWriter", "SmooshObserver"]


class SmooshObserver(GenServer):
    """Lives in the host program; hands smoosh's ``("smoosh", event, ...)`` messages to a callback."""

    def init(self, callback: Any) -> None:
        self.callback = callback

    def handle_info(self, message: Any) -> None:
        if isinstance(message, tuple) and message and message[0] == "smoosh":
            self.callback(message[1], message[2:])


@dataclass
class _Db:
    name: str
    pending: bool = False  # dirtied and announced, not yet compacted
    rounds: int = 0
    compactions: int = 0
    enqueued: int = 0
    started: int = 0
    exits_normal: int = 0
    exits_other: int = 0
    events: int = 0
    resends: int = 0
    last_progress: float = 0.0


class DbWriter(Driver):
    name = "smoosh-writer"

    def __init__(
        self,
        node: Node,
        data_dir: str,
        smoosh_state_dir: str,
        *,
        dbs: int = 8,
        rows: int = 400,
        blob: int = 2048,
        period: float = 0.1,
        resend_after: float = 4.0,
        seed: int | None = None,
        suffix: str = ".sqlite",
    ) -> None:
        super().__init__(period)
        self.node = node
        self.data_dir = data_dir
        self.smoosh_state_dir = smoosh_state_dir
        self.rows = rows
        self.blob = blob
        self.resend_after = resend_after
        #: what `_queued_keys` could not ask, named when a database is judged lost
        self.unasked: list[str] = []
        self.suffix = suffix
        self.rng = random.Random(seed)
        self.dbs = {f"demo_db{i:02d}": _Db(f"demo_db{i:02d}") for i in range(dbs)}
        self.bytes_written = 0
        self.final: dict[str, str] = {}

    # -- observer ------------------------------------------------------------------

    def on_event(self, event: str, rest: tuple) -> None:
        """From `SmooshObserver`: ``enqueued``/``started``/``exited`` (channel, key, ...)."""
        if event not in ("enqueued", "started", "exited") or len(rest) < 2:
            return
        db = self.dbs.get(rest[1]) if isinstance(rest[1], str) else None
        if db is None:
            return
        with self.lock:
            db.last_progress = time.monotonic()
            if event == "enqueued":
                db.enqueued += 1
            elif event == "started":
                db.started += 1
            elif rest[2:] and rest[2] == "normal":
                db.exits_normal += 1
            else:
                db.exits_other += 1

    # -- the load ------------------------------------------------------------------

    def path(self, db: str) -> str:
        return os.path.join(self.data_dir, db + self.suffix)

    def tick(self, index: int) -> None:
        self.poll(resend=True)
        with self.lock:
            clean = [d for d in self.dbs.values() if not d.pending]
        if clean:
            self.dirty(self.rng.choice(clean))

    def dirty(self, db: _Db) -> None:
        conn = sqlite3.connect(self.path(db.name), timeout=10.0, isolation_level=None)
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS docs (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT INTO docs (body) VALUES (?)", ((self.rng.randbytes(self.blob),) for _ in range(self.rows))
            )
            conn.execute("COMMIT")
            # Keep only the newest quarter: live data stays about rows/4 blobs
            # whatever the round, so every round leaves a ratio of about 4.
            conn.execute(
                "DELETE FROM docs WHERE id NOT IN (SELECT id FROM docs ORDER BY id DESC LIMIT ?)",
                (max(1, self.rows // 4),),
            )
        finally:
            conn.close()
        with self.lock:
            db.pending = True
            db.rounds += 1
            db.events += 1
            db.last_progress = time.monotonic()
            self.bytes_written += self.rows * self.blob
        self._announce(db.name)

    def _announce(self, db: str) -> None:
        handle_db_event(db, "local_updated", self.node)

    def free_pages(self, db: str) -> int | None:
        info = header_info(self.path(db))
        return None if info is None else info[3]

    def poll(self, resend: bool) -> int:
        """Mark compacted databases; re-announce stalled ones.  Returns how many are pending."""
        now = time.monotonic()
        pending = 0
        for db in list(self.dbs.values()):
            if not db.pending:
                continue
            if self.free_pages(db.name) == 0:
                with self.lock:
                    db.pending = False
                    db.compactions += 1
                continue
            pending += 1
            if resend and now - db.last_progress > self.resend_after:
                with self.lock:
                    db.resends += 1
                    db.last_progress = now
                self._announce(db.name)
        return pending

    def settle(self, deadline: float) -> None:
        """After the load: let smoosh compact what was announced (bounded by ``deadline``)."""
        while self.poll(resend=True) and time.monotonic() < deadline:
            time.sleep(0.2)  # polling files on disk until a deadline, not synchronising actors

    # -- the verdict ---------------------------------------------------------------

    def _queued_keys(self) -> dict[str, str]:
        """db -> "waiting in <channel>" / "active in <channel>" from every live channel."""

        where: dict[str, str] = {}
        try:
            channels = list(status(self.node, timeout=5.0))
        except (Exit, CallTimeout) as exc:
            self.unasked.append(f"smoosh status: {type(exc).__name__} {getattr(exc, 'reason', exc)!s:.60}")
            return where
        for channel in channels:
            ref = channel_ref(channel, self.node)
            if ref is None:
                self.unasked.append(f"{channel}: not running")
                continue
            try:
                info = ref.call(("info",), timeout=5.0)
            except (Exit, CallTimeout) as exc:
                self.unasked.append(f"{channel}: {type(exc).__name__} {getattr(exc, 'reason', exc)!s:.60}")
                continue
            for state in ("active", "starting", "waiting"):
                for key in info.get(state) or {}:
                    if isinstance(key, str):
                        where.setdefault(key, f"{state} in {channel}")
        return where

    def _persisted_keys(self) -> dict[str, str]:
        where: dict[str, str] = {}
        for path in sorted(glob.glob(os.path.join(self.smoosh_state_dir, "*" + persist.SUFFIX))):
            try:
                entries = persist.read(path)
            except ValueError:
                continue
            for key in entries:
                if isinstance(key, str):
                    where.setdefault(key, f"persisted in {os.path.basename(path)}")
        return where

    def _below_threshold(self, db: str) -> str | None:
        """ "ratio r <= min_priority" when smoosh rightly has nothing to do for ``db``."""

        info = header_info(self.path(db))
        if info is None:
            return None
        file_size, page_size, pages, free, _ = info
        live = (pages - free) * page_size
        limit = self.node.config.get_float("smoosh.ratio_dbs", "min_priority", 2.0)
        ratio = file_size / live if live else float("inf")
        return f"ratio {ratio:.2f} <= min_priority {limit:g}, nothing to compact" if ratio <= limit else None

    def check(self) -> Check:
        self.poll(resend=False)
        self.unasked = []
        dbs = list(self.dbs.values())
        still = [d for d in dbs if d.pending]
        queued = self._queued_keys() if still else {}
        persisted = self._persisted_keys() if still else {}
        lost = []
        for d in still:
            place = queued.get(d.name) or persisted.get(d.name) or self._below_threshold(d.name)
            if place is None:
                lost.append(d.name)
            self.final[d.name] = place or "LOST"
        c = Check("smoosh")
        announced = sum(d.rounds for d in dbs)
        c.lines.append(
            f"smoosh: {len(dbs)} databases, {announced} write rounds ({self.bytes_written / 1e6:.0f} MB inserted, "
            f"3/4 deleted), {sum(d.events for d in dbs)} events sent, {sum(d.resends for d in dbs)} re-sent "
            f"after a stall (smoosh restarted)"
        )
        c.lines.append(
            f"  compactions verified on disk (free pages back to 0): {sum(d.compactions for d in dbs)}; "
            f"observer saw {sum(d.enqueued for d in dbs)} enqueued, {sum(d.started for d in dbs)} started, "
            f"{sum(d.exits_normal for d in dbs)} exited normal, {sum(d.exits_other for d in dbs)} abnormal"
        )
        if still:
            detail = ", ".join(f"{d.name}: {self.final[d.name]}" for d in still)
            c.lines.append(f"  not yet compacted: {len(still)} ({detail})")
        else:
            c.lines.append("  every announced database was compacted (none left queued or persisted)")
        c.lost = len(lost)
        c.counted = f"{announced} acknowledged write rounds on {len(dbs)} databases"
        if lost:
            c.lines.append(f"  LOST (enqueued, not compacted, in no queue or checkpoint): {', '.join(lost)}")
            for d in dbs:
                if d.name in lost:
                    c.lines.append(
                        f"    {d.name}: {d.rounds} rounds, {d.compactions} compactions verified, "
                        f"{d.events} events sent ({d.resends} re-sent), observer saw {d.enqueued} "
                        f"enqueued, {d.started} started, {d.exits_normal} exited normal, "
                        f"{d.exits_other} abnormal; free pages now {self.free_pages(d.name)}"
                    )
            if self.unasked:
                c.lines.append(
                    "    channels that could not be asked (their queues unknown): " + "; ".join(self.unasked)
                )
        return c

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "rounds": sum(d.rounds for d in self.dbs.values()),
                "compactions": sum(d.compactions for d in self.dbs.values()),
                "pending": sum(1 for d in self.dbs.values() if d.pending),
                "resends": sum(d.resends for d in self.dbs.values()),
            }
