"""What an OS process holds, read from ``/proc``: open fds by kind, threads, RSS.

A node meant to run for weeks must hold as much after a thousand restarts
as after ten.  Counting open fds is not enough to see why it does not:
a growing count of SQLite handles, sockets, pidfds or eventfds each points
at a different owner, so fds are classified by what they point to.  The
leak test and ``bench/soak.py`` both read processes through this module;
it is Linux-only (``/proc``) and reads nothing but the kernel's view.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["FD_KINDS", "ProcessCensus", "census", "census_tree", "descendants", "fd_kind"]

#: Every kind `fd_kind` returns.
FD_KINDS = (
    "socket",
    "pipe",
    "eventfd",
    "pidfd",
    "eventpoll",
    "timerfd",
    "signalfd",
    "inotify",
    "anon",
    "sqlite",
    "dev",
    "file",
)

_SQLITE_SUFFIXES = (
    ".sqlite",
    ".db",
    ".sqlite-wal",
    ".sqlite-shm",
    ".db-wal",
    ".db-shm",
    "-journal",
    ".couch",
    ".couch-wal",
    ".couch-shm",
)


def fd_kind(target: str) -> str:
    """The kind of an fd from its ``/proc/PID/fd/N`` link: ``socket``, ``pipe``,
    ``eventfd``, ``pidfd``, ... ``sqlite`` (a database file or its -wal/-shm),
    ``dev`` or ``file``."""
    if target.startswith("socket:"):
        return "socket"
    if target.startswith("pipe:"):
        return "pipe"
    if target.startswith("anon_inode:"):
        name = target[len("anon_inode:") :].strip("[]")
        return name if name in FD_KINDS else "anon"
    if target.startswith("/dev/"):
        return "dev"
    base = target.rsplit("/", 1)[-1].removesuffix(" (deleted)")
    if base.endswith(_SQLITE_SUFFIXES):
        return "sqlite"
    return "file"


@dataclass
class ProcessCensus:
    """One process at one moment.  ``fds`` maps a kind (`fd_kind`) to a count;
    ``files`` maps each ``sqlite``/``file`` fd's base name to a count, so a
    report can say *which* database is held open."""

    pid: int
    ppid: int
    threads: int
    rss_kb: int
    fds: Counter[str] = field(default_factory=Counter)
    files: Counter[str] = field(default_factory=Counter)

    @property
    def fd_total(self) -> int:
        return sum(self.fds.values())

    @property
    def sockets(self) -> int:
        return self.fds.get("socket", 0)


def _stat(pid: int) -> tuple[int, int, int]:
    """``(ppid, threads, rss_kb)`` from /proc/PID/status; OSError if gone."""
    ppid = threads = rss = 0
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("PPid:"):
                ppid = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return ppid, threads, rss


def census(pid: int) -> ProcessCensus | None:
    """What ``pid`` holds now, or None when it is gone (or a zombie)."""
    try:
        ppid, threads, rss = _stat(pid)
        names = os.listdir(f"/proc/{pid}/fd")
    except (OSError, ValueError):
        return None
    if threads == 0:
        return None
    fds: Counter[str] = Counter()
    files: Counter[str] = Counter()
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue  # closed between listdir and readlink
        kind = fd_kind(target)
        fds[kind] += 1
        if kind in ("sqlite", "file"):
            files[target.rsplit("/", 1)[-1]] += 1
    return ProcessCensus(pid, ppid, threads, rss, fds, files)


def descendants(root: int) -> list[tuple[int, int]]:
    """``(pid, depth)`` of ``root`` (depth 0) and every living process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out = [(root, 0)]
    for pid, depth in out:  # grows while it is walked: breadth first
        out.extend((child, depth + 1) for child in sorted(children.get(pid, ())))
    return out


def census_tree(root: int, exclude: frozenset[int] = frozenset()) -> list[tuple[int, ProcessCensus]]:
    """``(depth, census)`` of ``root`` and its living descendants, ``exclude`` left out."""
    out = []
    for pid, depth in descendants(root):
        if pid in exclude:
            continue
        snap = census(pid)
        if snap is not None:
            out.append((depth, snap))
    return out
