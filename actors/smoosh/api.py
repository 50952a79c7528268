"""The smoosh API (upstream ``smoosh`` and ``smoosh_server`` exports).

Every function works from anywhere in a node: the host program, any host
process, any actor.  ``where`` is a `Node`, an actor (``self``) or None
(look the name up through the calling process's runtime).  The server's
ref is cached per process for `CACHE_TTL` seconds and refreshed at once
when a call finds it dead, so a restarted server is found again; a cast
made while the server restarts is lost, as a cast to a registered name
that is momentarily free is in Erlang.

``enqueue`` and ``handle_db_event`` are casts; ``sync_enqueue`` returns
whether the object was handed to a channel.  ``status`` answers from the
server's table of what each channel last published, without calling the
channels.  A key is a database name, ``(db, index)`` or
``("index_cleanup", db)``; a bad key raises `ValueError` in the caller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from typing import Any

from actors import Exit, GenServer, Node
from actors.smoosh import _names
from actors.smoosh.policy import validate_key

__all__ = [
    "CACHE_TTL",
    "CALL_TIMEOUT",
    "channel_ref",
    "enqueue",
    "flush",
    "handle_db_event",
    "resume",
    "server_ref",
    "status",
    "suspend",
    "sync_enqueue",
]

#: Seconds a cached server ref is trusted for casts.
CACHE_TTL = 1.0
#: Default timeout of the API's calls (suspend/resume/flush visit every channel).
CALL_TIMEOUT = 60.0

_cache: dict[tuple[str, str], tuple[Any, float]] = {}
_cache_lock = threading.Lock()


def _lookup(where: Node | GenServer | None, name: str) -> Any:
    if where is None:
        return _names.whereis(name)
    if isinstance(where, (Node, GenServer)):
        return where.whereis(name)
    raise TypeError(f"where must be a Node, an actor or None, got {where!r}")


def _node_id(where: Node | GenServer | None) -> str:
    if isinstance(where, Node):
        return where.id
    if isinstance(where, GenServer):
        return where.ref.node_id
    return _names._runtime().node_id


def _ref(where: Node | GenServer | None, name: str, fresh: bool = False) -> Any:
    now = time.monotonic()
    key = (_node_id(where), name)
    if not fresh:
        with _cache_lock:
            cached = _cache.get(key)
        if cached is not None and now - cached[1] < CACHE_TTL:
            return cached[0]
    ref = _lookup(where, name)
    with _cache_lock:
        if ref is None:
            _cache.pop(key, None)
        else:
            if len(_cache) > 64:  # old nodes' entries
                _cache.clear()
            _cache[key] = (ref, now)
    return ref


def server_ref(where: Node | GenServer | None = None) -> Any:
    """The ``smoosh_server`` ref, or None when smoosh is not running."""
    return _ref(where, _names.SERVER, fresh=True)


def _call(where: Node | GenServer | None, request: Any, timeout: float | None) -> Any:
    for fresh in (False, True):
        ref = _ref(where, _names.SERVER, fresh)
        if ref is None:
            break
        try:
            return ref.call(request, timeout=timeout)
        except Exit as exc:
            if exc.reason not in ("noproc", "noconnection") or fresh:
                raise
    raise Exit("noproc", "smoosh_server is not running")


def _cast(where: Node | GenServer | None, name: str, request: Any) -> None:
    ref = _ref(where, name)
    if ref is not None:
        ref.cast(request)


def enqueue(obj: Hashable, where: Node | GenServer | None = None) -> None:
    """Ask smoosh to consider ``obj`` for compaction (asynchronous)."""
    _cast(where, _names.SERVER, ("enqueue", validate_key(obj)))


def sync_enqueue(obj: Hashable, where: Node | GenServer | None = None, timeout: float | None = CALL_TIMEOUT) -> bool:
    """`enqueue`, waiting until the server routed it: True when a channel took it."""
    return bool(_call(where, ("enqueue", validate_key(obj)), timeout))


def handle_db_event(db: str, event: Any, where: Node | GenServer | None = None) -> None:
    """A database changed: ``"local_updated"``, ``("index_commit", index)`` or
    ``("index_collator_upgrade", index)``; other events are ignored."""
    if not isinstance(db, str):
        raise ValueError(f"database name {db!r} is not a string")
    _cast(where, _names.EVENT_LISTENER, ("db_event", db, event))


def suspend(where: Node | GenServer | None = None, timeout: float | None = CALL_TIMEOUT) -> None:
    """Pause every channel and suspend (SIGSTOP) every running compaction."""
    _call(where, "suspend", timeout)


def resume(where: Node | GenServer | None = None, timeout: float | None = CALL_TIMEOUT) -> None:
    """Resume every channel and every suspended compaction."""
    _call(where, "resume", timeout)


def flush(where: Node | GenServer | None = None, timeout: float | None = CALL_TIMEOUT) -> None:
    """Empty every channel's waiting queue (and its checkpoint)."""
    _call(where, "flush", timeout)


def status(where: Node | GenServer | None = None, timeout: float | None = CALL_TIMEOUT) -> dict[str, Any]:
    """``{channel: {"active": n, "starting": n, "waiting": {"size", "min", "max"}}}``, sorted.

    ``{}`` when smoosh is not running: upstream `smoosh_server:status/0`
    reads the channel table and answers ``{ok, []}`` when it is gone, so a
    monitoring poll never fails because smoosh is down or restarting.
    """
    try:
        return _call(where, "status", timeout)
    except Exit as exc:
        if exc.reason in ("noproc", "noconnection"):
            return {}
        raise


def channel_ref(name: str, where: Node | GenServer | None = None) -> Any:
    """The actor of channel ``name``, or None (for tests and operators)."""
    return _lookup(where, _names.channel_name(name))
