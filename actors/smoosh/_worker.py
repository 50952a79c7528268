"""The compaction worker: one OS process per job, run as a script.

It imports only the standard library (it is started by path, so the
`actors` package is not imported in the worker) and does one of two jobs:

    _worker.py <parent_pid> <pipe_fd> vacuum <db_path> <page_size|-> <auto_vacuum|->
    _worker.py <parent_pid> <pipe_fd> cleanup <directory>

It dies with its parent: it asks the kernel for SIGKILL when the thread
that started it exits (``PR_SET_PDEATHSIG``; the adapter starts workers from
one long-lived launcher thread, so that is when the parent process exits),
and a watcher thread exits the process when the pipe the parent holds open
reaches end of file or the parent pid changes.  Once both are in place it
writes ``ready`` to stdout; the adapter only suspends a worker after that,
so a stopped worker is always one that the kernel will kill with its parent.
VACUUM runs in SQLite with the GIL released, so the watcher
keeps running; killing the process mid-VACUUM is safe, SQLite rolls the
journal back on the next open.

Exit status: 0 done, 1 failed (the reason on stderr), 2 bad arguments,
70 the parent went away.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import sqlite3
import sys
import threading

PARENT_GONE = 70
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # SIGKILL
    except (OSError, AttributeError):  # not Linux: the watcher thread remains
        pass


def _watch_parent(parent: int, fd: int) -> None:
    while True:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 64)
            except OSError:
                data = b""
            if not data:
                os._exit(PARENT_GONE)
        if os.getppid() != parent:
            os._exit(PARENT_GONE)


def vacuum(path: str, page_size: int | None, auto_vacuum: int | None) -> None:
    if not os.path.exists(path):
        raise FileNotFoundError(f"no database file {path}")
    con = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=60.0, isolation_level=None)
    try:
        current_page_size = con.execute("PRAGMA page_size").fetchone()[0]
        journal = con.execute("PRAGMA journal_mode").fetchone()[0]
        change_page = page_size is not None and page_size != current_page_size
        if change_page and journal == "wal":
            # A WAL database keeps its page size; leave WAL for the VACUUM.
            con.execute("PRAGMA journal_mode=DELETE")
        if change_page:
            con.execute(f"PRAGMA page_size={int(page_size)}")
        if auto_vacuum is not None:
            con.execute(f"PRAGMA auto_vacuum={int(auto_vacuum)}")
        con.execute("VACUUM")
        if change_page and journal == "wal":
            con.execute("PRAGMA journal_mode=WAL")
    finally:
        con.close()


def cleanup(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=False)


def _optional_int(text: str) -> int | None:
    return None if text == "-" else int(text)


def main(argv: list[str]) -> int:
    try:
        parent, fd, mode = int(argv[0]), int(argv[1]), argv[2]
        args = argv[3:]
    except (IndexError, ValueError):
        print(f"usage: _worker.py PARENT_PID PIPE_FD vacuum|cleanup ... (got {argv!r})", file=sys.stderr)
        return 2
    _die_with_parent()
    if os.getppid() != parent:  # the parent died before the line above
        return PARENT_GONE
    threading.Thread(target=_watch_parent, args=(parent, fd), daemon=True).start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    try:
        if mode == "vacuum" and len(args) == 3:
            vacuum(args[0], _optional_int(args[1]), _optional_int(args[2]))
        elif mode == "cleanup" and len(args) == 1:
            cleanup(args[0])
        else:
            print(f"unknown job {mode!r} {args!r}", file=sys.stderr)
            return 2
    except Exception as exc:  # report, do not dump a traceback into logs
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
