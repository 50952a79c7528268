"""The IO request record and the pure helpers around it.

`IoqRequest` is the seed's ``#ioq_request{}``.  A request carries the IO
message for its target (``fd``) plus its *dimensions*: the class of work
(``interactive``, ``db_compact``, ...), the shard it touches, and the user and
database parsed from the shard path.  IOQ2 multiplies per-dimension priorities
to order requests, so parsing the dimensions once, at the caller, keeps the
server's per-request work to a few dictionary lookups.

Classes, users and shards are plain strings (Erlang atoms and binaries in the
seed) so a request is plain data that travels between processes.

IO messages are tuples (or lists, after a trip through JSON) whose first
element names the operation:

* ``("pread_iolist", pos)`` -- read the block `append_bin` wrote at ``pos``
* ``("pread", pos, length)`` -- read ``length`` raw bytes at ``pos``
* ``("append_bin", data[, fsync])`` -- append a length-prefixed block
* ``("append", data[, fsync])`` -- append raw bytes
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BAD_MAGIC_NUM",
    "Completion",
    "IoTargetDown",
    "IoqRequest",
    "QueueDepths",
    "add_request_dimensions",
    "dedupe_key",
    "error_queue_depths",
    "get_queue_depths",
    "request_dimensions",
    "rootname",
    "rw",
    "shard_info",
]

#: What the seed reports for a depth or concurrency it could not collect.
BAD_MAGIC_NUM = -12341234

#: The user of shards without an account part (``shards/<range>/<db>``).
SYSTEM_USER = "system"

#: ``{"compaction": n, "replication": n, "low": n, "channels": {user: [i, u, v]}}``
QueueDepths = dict[str, Any]

_READS = frozenset({"pread_iolist", "pread"})
_WRITES = frozenset({"append_bin", "append"})
_SEQ = (tuple, list)


@dataclass(slots=True, eq=True)
class IoqRequest:
    """One IO request as IOQ2 sees it (the seed's ``#ioq_request{}``)."""

    fd: Any = None
    msg: Any = None
    key: Any = None
    init_priority: float = 1.0
    fin_priority: float | None = None
    ref: Any = None
    from_: Any = None
    t0: float | None = None
    tsub: float | None = None
    shard: Any = None
    user: Any = None
    db: Any = None
    class_: str | None = None
    ddoc: Any = None


def rw(msg: Any) -> str:
    """``"reads"``, ``"writes"`` or ``"unknown"``: the stats bucket of an IO message."""
    if type(msg) in _SEQ and msg:
        op = msg[0]
        if op in _READS:
            return "reads"
        if op in _WRITES:
            return "writes"
    return "unknown"


def dedupe_key(fd: Any, msg: Any) -> tuple[Any, ...] | None:
    """The key under which identical in-flight reads merge, or None if ``msg`` is no read.

    The seed merges ``{pread_iolist, Pos}`` on ``(Fd, Pos)``; a raw read also
    needs its length to be the same read.
    """
    if type(msg) in _SEQ:
        n = len(msg)
        if n == 2 and msg[0] == "pread_iolist":
            return (fd, msg[1])
        if n == 3 and msg[0] == "pread":
            return (fd, msg[1], msg[2])
    return None


def rootname(name: str) -> str:
    """Drop the last extension of the last path component (Erlang `filename:rootname`).

    Shard names carry a creation-time suffix (``foo.1503945430``); priorities
    are configured without it so they survive a database being recreated.
    """
    root, _ext = posixpath.splitext(name)
    return root


def shard_info(shard: Any) -> tuple[Any, Any]:
    """``(user, db)`` parsed from a shard path, ``(None, None)`` when it has no such shape."""
    if not isinstance(shard, str):
        return None, None
    parts = shard.split("/")
    n = len(parts)
    if n < 3 or parts[0] != "shards":
        return None, None
    if n == 5 and parts[2] == "heroku":
        return f"{parts[3]}.heroku", parts[4]
    if n == 3:
        return SYSTEM_USER, parts[2]
    if n == 4:
        return parts[2], parts[3]
    return parts[2], "/".join(parts[3:])


#: ``dimensions -> (class, shard, user, db, ddoc)``: a caller sends the same few
#: dimensions over and over, and parsing them is a third of `ioq.call`'s own work.
_DIMENSIONS: dict[Any, tuple[Any, Any, Any, Any, Any]] = {}
_MAX_DIMENSIONS = 10_000


_OTHER = ("other", None, None, None, None)


def add_request_dimensions(request: IoqRequest, dimensions: Any) -> IoqRequest:
    """Fill class, shard, user, db and ddoc from ``(class, shard[, group_id])``.

    ``None`` dimensions make an ``other`` request, as in the seed.
    """
    if dimensions is None:
        request.class_ = "other"
        return request
    request.class_, request.shard, request.user, request.db, request.ddoc = request_dimensions(dimensions)
    return request


def request_dimensions(dimensions: Any) -> tuple[Any, Any, Any, Any, Any]:
    """``(class, shard, user, db, ddoc)`` of ``(class, shard[, group_id])`` or None
    (class ``other``), without building a request: what a caller sends."""
    if dimensions is None:
        return _OTHER
    cached = _DIMENSIONS.get(dimensions) if type(dimensions) is tuple else None
    if cached is None:
        cached = _parse_dimensions(dimensions)
        if type(dimensions) is tuple:
            try:
                if len(_DIMENSIONS) >= _MAX_DIMENSIONS:
                    _DIMENSIONS.clear()
                _DIMENSIONS[dimensions] = cached
            except TypeError:  # an unhashable part: parse it every time
                pass
    return cached


def _parse_dimensions(dimensions: Any) -> tuple[Any, Any, Any, Any, Any]:
    if type(dimensions) not in _SEQ or len(dimensions) not in (2, 3):
        raise ValueError(
            f"IO dimensions must be (class, shard) or (class, shard, group_id) or None, got {dimensions!r}"
        )
    class_ = dimensions[0]
    if not isinstance(class_, str):
        raise ValueError(f"IO class must be a string, got {class_!r} in {dimensions!r}")
    shard0 = dimensions[1]
    group_id = dimensions[2] if len(dimensions) == 3 else None
    if (class_ == "interactive" and shard0 == "dbcopy") or (class_ == "db_meta" and shard0 == "security"):
        shard = user = db = None
    elif isinstance(shard0, str):
        shard = rootname(shard0)
        user, db = shard_info(shard)
    else:
        shard, user, db = shard0, None, None
    return class_, shard, user, db, group_id


_COMPACTION = frozenset({"db_compact", "view_compact"})


def get_queue_depths(requests: Iterable[IoqRequest]) -> QueueDepths:
    """Count queued requests the way IOQ1 reports its channels.

    Compaction, replication and low are global counts; everything else is
    counted per user as ``[interactive, db_update, view_update]``, where any
    other class counts as interactive.  A request without a user is counted
    under ``"undefined"`` so the result stays JSON-encodable.
    """
    compaction = replication = low = 0
    users: dict[Any, list[int]] = {}
    for req in requests:
        class_ = req.class_
        if class_ in _COMPACTION:
            compaction += 1
        elif class_ == "internal_repl":
            replication += 1
        elif class_ == "low":
            low += 1
        else:
            user = "undefined" if req.user is None else req.user
            counts = users.get(user)
            if counts is None:
                counts = users[user] = [0, 0, 0]
            if class_ == "db_update":
                counts[1] += 1
            elif class_ == "view_update":
                counts[2] += 1
            else:
                counts[0] += 1
    return {
        "compaction": compaction,
        "replication": replication,
        "low": low,
        "channels": users,
    }


def error_queue_depths() -> QueueDepths:
    """What `get_queue_depths` reports when the servers did not answer in time."""
    return {
        "compaction": BAD_MAGIC_NUM,
        "replication": BAD_MAGIC_NUM,
        "low": BAD_MAGIC_NUM,
        "channels": {},
    }


class IoTargetDown(Exception):
    """The IO target of a request died before answering; ``reason`` is its exit reason.

    Every caller waiting on that request fails with this, never hangs.
    """

    def __init__(self, reason: Any) -> None:
        super().__init__(f"IO target exited: {reason!r}")
        self.reason = reason


@dataclass(slots=True)
class Completion:
    """What to tell whom when a submitted request finishes.

    ``waiters`` are the ``from_`` handles of every caller merged into the
    request; reply ``reply`` to each, or fail each with ``error`` when set.
    """

    request: Any
    waiters: list[Any]
    reply: Any = None
    error: IoTargetDown | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None
