"""smoosh_persist: a channel's queue kept on disk across restarts.

Port of upstream `smoosh_persist`.  A checkpoint is the channel's waiting
queue merged with its starting and active entries, which are written at
priority ``inf`` so that, once restored, they are the first to start again.
The file ``<state_dir>/<channel>.smooshq`` is replaced atomically (temporary
file, fsync, rename, fsync of the directory); an empty checkpoint deletes
it.  A file that cannot be read is reported and ignored: smoosh re-learns
its queue from database events, so a bad checkpoint must never stop a
channel.

Encoding is orjson: ``{"version": 1, "entries": [[key, priority], ...]}``
where a key is a string or a list of two strings (a tuple key) and the
priority is a number or ``"inf"``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import orjson

from actors.smoosh.policy import PriorityQueue, validate_key

__all__ = [
    "SUFFIX",
    "PersistError",
    "check_setup",
    "file_path",
    "persist",
    "read",
    "snapshot",
    "unpersist",
    "write",
]

log = logging.getLogger(__name__)

SUFFIX = ".smooshq"
VERSION = 1


class PersistError(OSError):
    """The state directory cannot hold checkpoints; says which step failed."""


def file_path(state_dir: str | os.PathLike[str], channel: str) -> str:
    if not channel or "/" in channel or channel in (".", ".."):
        raise ValueError(f"channel name {channel!r} cannot name a checkpoint file")
    return os.path.join(os.path.abspath(os.fspath(state_dir)), channel + SUFFIX)


def snapshot(
    waiting: Mapping[Hashable, float] | PriorityQueue,
    active: Iterable[Hashable] = (),
    starting: Iterable[Hashable] = (),
) -> dict[Hashable, float]:
    """The entries to checkpoint: waiting ones, then active/starting at ``inf``."""
    entries: dict[Hashable, float] = {}
    for key in list(active) + list(starting):
        entries[key] = math.inf
    wmap = waiting.to_map() if isinstance(waiting, PriorityQueue) else waiting
    for key, priority in wmap.items():
        entries.setdefault(key, priority)
    return entries


def _encode_key(key: Hashable) -> Any:
    if isinstance(key, str):
        return key
    if isinstance(key, tuple):
        return [_encode_key(part) for part in key]
    raise TypeError(f"smoosh key {key!r} cannot be persisted")


def _encode_priority(priority: float) -> Any:
    if math.isinf(priority) and priority > 0:
        return "inf"
    if math.isnan(priority) or math.isinf(priority):
        raise ValueError(f"priority {priority!r} cannot be persisted")
    return priority


def _decode_priority(value: Any) -> float:
    if value == "inf":
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"priority {value!r} is not a number")
    return value


def encode(entries: Mapping[Hashable, float]) -> bytes:
    ordered = sorted(entries.items(), key=lambda kv: -kv[1])
    body = {"version": VERSION, "entries": [[_encode_key(k), _encode_priority(p)] for k, p in ordered]}
    return orjson.dumps(body)


def decode(data: bytes) -> dict[Hashable, float]:
    """Entries of a checkpoint, highest priority (active/starting) first."""
    body = orjson.loads(data)
    if not isinstance(body, dict) or body.get("version") != VERSION:
        raise ValueError(f"not a version {VERSION} smoosh checkpoint")
    entries = body.get("entries")
    if not isinstance(entries, list):
        raise ValueError("checkpoint has no entry list")
    decoded: list[tuple[Hashable, float]] = []
    for item in entries:
        if not isinstance(item, list) or len(item) != 2:
            raise ValueError(f"checkpoint entry {item!r} is not [key, priority]")
        decoded.append((validate_key(item[0]), _decode_priority(item[1])))
    decoded.sort(key=lambda kv: -kv[1])
    return dict(decoded)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _delete(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write(entries: Mapping[Hashable, float], path: str) -> None:
    """Replace the file at ``path`` atomically; no entries deletes it."""
    if not entries:
        _delete(path)
        return
    data = encode(entries)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        _delete(tmp)
        raise
    _fsync_dir(os.path.dirname(path))


def read(path: str) -> dict[Hashable, float]:
    """Entries in ``path``; ``{}`` when absent.  Raises `ValueError` when corrupt."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return {}
    try:
        return decode(data)
    except (orjson.JSONDecodeError, ValueError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def persist(
    state_dir: str,
    channel: str,
    waiting: Mapping[Hashable, float] | PriorityQueue,
    active: Iterable[Hashable] = (),
    starting: Iterable[Hashable] = (),
    enabled: bool = True,
) -> None:
    """Checkpoint one channel (`smoosh_persist:persist/3`); no-op when disabled."""
    if not enabled:
        return
    write(snapshot(waiting, active, starting), file_path(state_dir, channel))


def unpersist(state_dir: str, channel: str, capacity: int = 9999, enabled: bool = True) -> PriorityQueue:
    """The channel's restored queue (`smoosh_persist:unpersist/1`).

    Disabled persistence, a missing file or a corrupt one all give an empty
    queue; a corrupt or unreadable file is logged, never fatal.
    """
    if not enabled:
        return PriorityQueue()
    path = file_path(state_dir, channel)
    try:
        entries = read(path)
    except (OSError, ValueError) as exc:
        log.error("smoosh channel %s: cannot restore queue from %s: %s", channel, path, exc)
        return PriorityQueue()
    return PriorityQueue.from_map(entries, capacity)


def check_setup(state_dir: str, enabled: bool = True) -> str | None:
    """Probe the state directory once at start (`smoosh_persist:check_setup/0`).

    Returns None when persistence is disabled or works, else a one-line
    message saying what failed, for the server to log once.
    """
    if not enabled:
        return None
    directory = os.path.abspath(os.fspath(state_dir))
    probe = os.path.join(directory, f"smooshq.test.{os.getpid()}")
    step = "write"
    try:
        with open(probe, "wb") as fh:
            fh.write(b"test")
        step = "read"
        with open(probe, "rb") as fh:
            if fh.read() != b"test":
                raise PersistError(f"read back different data from {probe}")
        step = "delete"
        os.unlink(probe)
    except OSError as exc:
        return (
            f"smoosh persistence is enabled but state_dir {directory!r} is not usable: "
            f"could not {step} a check file ({exc.strerror or exc}); "
            f"set [smoosh] state_dir to a writable directory or persist = false"
        )
    return None
