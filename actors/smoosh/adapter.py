"""smoosh's boundary to the host program's files: the only code that touches them.

`SmooshAdapter` is the small interface a host program implements to let
smoosh compact its own storage.  `SQLiteAdapter` is the real one shipped
with the project:

* databases are SQLite files ``<data_dir>/<db><suffix>``;
* an index of database ``db`` is the SQLite file
  ``<index_dir>/<db>/<index><suffix>`` (`register_index` gives the path);
* sizes: the file size, and live data ``(page_count - freelist_count) *
  page_size`` from SQLite itself;
* "needs upgrade": the file's ``page_size`` or ``auto_vacuum`` differs from
  the configured ones (VACUUM rewrites the file with the new settings);
* a compaction is ``VACUUM`` in a worker OS process (`_worker.py`) that
  smoosh can suspend (SIGSTOP), resume (SIGCONT) and kill, and that dies
  with its parent;
* index cleanup removes the index directory of a database that is gone.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import threading
from collections.abc import Hashable
from typing import Protocol, runtime_checkable

from actors.smoosh.policy import INDEX_CLEANUP, is_cleanup_key, is_view_key, key_db, validate_key
from actors.smoosh.server_state import ObjectInfo
from actors.smoosh.worker_job import WorkerJob

__all__ = [
    "CompactionJob",
    "changed_dbs",
    "ObjectInfo",
    "SQLiteAdapter",
    "SmooshAdapter",
    "WorkerJob",
]


def changed_dbs(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """Databases new or modified between two `SQLiteAdapter.scan` results.

    A directory watcher polls `scan` and feeds each name to
    ``handle_db_event(db, "local_updated")``; staleness keeps the rate down.
    """
    return sorted(db for db, stamp in after.items() if before.get(db) != stamp)


#: Seconds a size query waits for a lock before reading the file header instead.
_BUSY_TIMEOUT = 0.2
_HEADER = struct.Struct(">16sH6xII4xI12xI8xI24xI")


def header_info(path: str) -> tuple[int, int, int, int, int] | None:
    """``(file_size, page_size, page_count, freelist_count, auto_vacuum)`` from
    the SQLite file header, without taking SQLite's lock; None if it is not
    a SQLite file.

    The header's page count is used only when it is valid (its "version
    valid for" number equals the change counter), else the file size gives
    it, as SQLite itself does.
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_HEADER.size)
            file_size = os.fstat(fh.fileno()).st_size
    except FileNotFoundError:
        return None
    if len(raw) < _HEADER.size:
        return None
    magic, page_size, change_counter, in_header_pages, freelist, largest_root, incremental, valid_for = _HEADER.unpack(
        raw
    )
    if magic != b"SQLite format 3\x00":
        return None
    if page_size == 1:
        page_size = 65536
    if in_header_pages and valid_for == change_counter:
        pages = in_header_pages
    else:
        pages = file_size // page_size if page_size else 0
    auto_vacuum = 0 if largest_root == 0 else (2 if incremental else 1)
    return file_size, page_size, pages, freelist, auto_vacuum


def _roll_back_hot_journal(path: str) -> bool:
    """Roll back what a writer killed mid-transaction left in ``path``'s journal; True if done.

    A compaction killed with its host (SIGKILL) leaves a *hot* rollback
    journal.  A read-only connection cannot roll it back and fails with
    "attempt to write a readonly database", so the sizes of that file --
    and so every channel's priority -- could never be computed again, and
    the database would never be compacted until something else wrote to it.
    A read-write connection's first read rolls the journal back (waiting
    ``_BUSY_TIMEOUT`` at most for a writer that is alive).
    """
    if not os.path.exists(path + "-journal"):
        return False
    try:
        con = sqlite3.connect(path, timeout=_BUSY_TIMEOUT)
    except sqlite3.OperationalError:
        return False
    try:
        con.execute("PRAGMA page_count").fetchone()
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        con.close()


@runtime_checkable
class CompactionJob(Protocol):
    """A running compaction, as the channel actor sees it."""

    pid: int

    def is_alive(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status, or None if still running after ``timeout`` seconds."""
        ...

    def exit_reason(self) -> str | None:
        """None while running; ``"normal"`` on success; else why it failed."""
        ...

    def suspend(self) -> None: ...

    def resume(self) -> None: ...

    def kill(self) -> None: ...


@runtime_checkable
class SmooshAdapter(Protocol):
    """What smoosh needs from a host program's storage.

    Keys are as in `actors.smoosh.policy`: a database name, ``(db, index)``
    or ``(INDEX_CLEANUP, db)``.
    """

    def object_info(self, key: Hashable) -> ObjectInfo | None:
        """Sizes of a database or index; None when it does not exist."""
        ...

    def needs_cleanup(self, db: str) -> bool:
        """Whether ``(INDEX_CLEANUP, db)`` has anything to do."""
        ...

    def start_job(self, key: Hashable) -> CompactionJob:
        """Start compacting ``key`` (or cleaning up); returns the running job.

        When a compaction of ``key`` is already running, return that job
        instead of starting a second one (smoosh adopts it).
        """
        ...

    def running_job(self, key: Hashable) -> CompactionJob | None:
        """The compaction of ``key`` running now, if any."""
        ...


def _check_name(kind: str, name: str) -> str:
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"{kind} name {name!r} cannot name a file")
    if name.startswith("."):
        raise ValueError(f"{kind} name {name!r} must not start with a dot")
    return name


class SQLiteAdapter:
    """SQLite files in a data directory, compacted by VACUUM in worker processes."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        index_dir: str | os.PathLike[str] | None = None,
        *,
        suffix: str = ".sqlite",
        page_size: int | None = None,
        auto_vacuum: int | None = None,
    ) -> None:
        self.data_dir = os.path.abspath(os.fspath(data_dir))
        self.index_dir = (
            os.path.abspath(os.fspath(index_dir)) if index_dir is not None else os.path.join(self.data_dir, ".indexes")
        )
        self.suffix = suffix
        if page_size is not None and (page_size < 512 or page_size > 65536 or page_size & (page_size - 1)):
            raise ValueError(f"page_size {page_size!r} is not a power of two between 512 and 65536")
        if auto_vacuum is not None and auto_vacuum not in (0, 1, 2):
            raise ValueError(f"auto_vacuum {auto_vacuum!r} is not 0 (none), 1 (full) or 2 (incremental)")
        self.page_size = page_size
        self.auto_vacuum = auto_vacuum
        self._jobs: dict[Hashable, WorkerJob] = {}
        self._lock = threading.Lock()

    # -- paths -------------------------------------------------------------

    def db_path(self, db: str) -> str:
        _check_name("database", db)
        if db == INDEX_CLEANUP:
            raise ValueError(f"database name {db!r} is reserved for index cleanup keys")
        return os.path.join(self.data_dir, db + self.suffix)

    def index_path(self, db: str, index: str) -> str:
        _check_name("database", db)
        _check_name("index", index)
        return os.path.join(self.index_dir, db, index + self.suffix)

    def register_index(self, db: str, index: str) -> str:
        """Where the host keeps index ``index`` of ``db``; creates its directory."""
        path = self.index_path(db, index)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def key_path(self, key: Hashable) -> str:
        key = validate_key(key)
        if is_cleanup_key(key):
            return os.path.join(self.index_dir, _check_name("database", key_db(key)))
        if is_view_key(key):
            return self.index_path(key[0], key[1])
        return self.db_path(key)

    def databases(self) -> list[str]:
        """Names of the database files in the data directory, sorted."""
        try:
            names = os.listdir(self.data_dir)
        except FileNotFoundError:
            return []
        return sorted(n[: -len(self.suffix)] for n in names if n.endswith(self.suffix) and not n.startswith("."))

    def indexes(self, db: str) -> list[str]:
        directory = os.path.join(self.index_dir, _check_name("database", db))
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        return sorted(n[: -len(self.suffix)] for n in names if n.endswith(self.suffix))

    def orphaned_index_dbs(self) -> list[str]:
        """Databases that are gone but still have index files."""
        try:
            names = os.listdir(self.index_dir)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if not n.startswith(".") and self.needs_cleanup(n))

    def scan(self) -> dict[str, tuple[int, int]]:
        """``{db: (size, mtime_ns)}``, for a directory watcher to diff."""
        result: dict[str, tuple[int, int]] = {}
        for db in self.databases():
            try:
                st = os.stat(self.db_path(db))
            except FileNotFoundError:
                continue
            result[db] = (st.st_size, st.st_mtime_ns)
        return result

    # -- sizes -------------------------------------------------------------

    def object_info(self, key: Hashable) -> ObjectInfo | None:
        key = validate_key(key)
        if is_cleanup_key(key):
            raise ValueError(f"{key!r} is an index cleanup, it has no sizes")
        return self.file_info(self.key_path(key))

    def file_info(self, path: str) -> ObjectInfo | None:
        """Sizes and upgrade need of one SQLite file; None when it is missing.

        SQLite is asked first, with a short busy timeout: the server and the
        channels compute priorities on their own threads and must not wait
        seconds behind a VACUUM holding the file's lock.  When the file is
        locked the numbers come from its 100-byte header instead
        (`header_info`), which needs no lock.
        """
        try:
            file_size = os.stat(path).st_size
        except FileNotFoundError:
            return None
        for attempt in range(2):
            try:
                con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=_BUSY_TIMEOUT)
            except sqlite3.OperationalError:
                if not os.path.exists(path):
                    return None
                raise
            try:
                page_size = con.execute("PRAGMA page_size").fetchone()[0]
                page_count = con.execute("PRAGMA page_count").fetchone()[0]
                freelist = con.execute("PRAGMA freelist_count").fetchone()[0]
                auto_vacuum = con.execute("PRAGMA auto_vacuum").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if "readonly" in str(exc) and attempt == 0 and _roll_back_hot_journal(path):
                    continue  # the journal of a killed writer is rolled back: ask again
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                header = header_info(path)
                if header is None:
                    raise
                file_size, page_size, page_count, freelist, auto_vacuum = header
                break
            finally:
                con.close()
        active = max(0, page_count - freelist) * page_size
        needs_upgrade = (self.page_size is not None and page_size != self.page_size) or (
            self.auto_vacuum is not None and auto_vacuum != self.auto_vacuum
        )
        return ObjectInfo(file_size=file_size, active_size=active, needs_upgrade=needs_upgrade)

    def needs_cleanup(self, db: str) -> bool:
        """Index files exist for ``db`` but the database file is gone."""
        directory = os.path.join(self.index_dir, _check_name("database", db))
        return os.path.isdir(directory) and not os.path.exists(os.path.join(self.data_dir, db + self.suffix))

    # -- jobs --------------------------------------------------------------

    def running_job(self, key: Hashable) -> WorkerJob | None:
        key = validate_key(key)
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and not job.is_alive():
                del self._jobs[key]
                job = None
            return job

    def start_job(self, key: Hashable) -> WorkerJob:
        key = validate_key(key)
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and job.is_alive():
                return job
            path = self.key_path(key)
            if is_cleanup_key(key):
                argv = ["cleanup", path]
            else:
                if not os.path.exists(path):
                    raise FileNotFoundError(f"cannot compact {key!r}: no file {path}")
                argv = [
                    "vacuum",
                    path,
                    "-" if self.page_size is None else str(self.page_size),
                    "-" if self.auto_vacuum is None else str(self.auto_vacuum),
                ]
            job = WorkerJob(key, argv)
            self._jobs[key] = job
            return job

    def __getstate__(self) -> dict:
        """Pickle the configuration only: jobs are OS processes of this process.

        smoosh runs in a host process of its own, so the adapter a host
        program hands to `start_smoosh` travels there by pickle; the copy
        starts with no jobs and a fresh lock.
        """
        state = self.__dict__.copy()
        del state["_jobs"], state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._jobs = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Kill every job still running and reap it (host shutdown, tests)."""
        with self._lock:
            jobs = list(self._jobs.values())
            self._jobs.clear()
        for job in jobs:
            job.kill()
            job.wait(10)
