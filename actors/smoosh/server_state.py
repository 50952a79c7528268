"""The logic of `smoosh_server`, as a plain class.

The server keeps one channel per configured name, routes every enqueued
object to the first channel (in sorted order, within the object's type)
that gives it a non-zero priority, and throttles enqueues with the
staleness access table.  Channels are created and closed as the config
changes and recreated when they crash.

Like `ChannelState`, methods return `actors.smoosh.effects` values; the
priority of an object in a channel is computed by an injected
``priority_of(channel_name, key)`` (see `compute_priority`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from actors.smoosh.access import AccessTable
from actors.smoosh.effects import CloseChannel, EnqueueToChannel, StartChannel
from actors.smoosh.policy import get_priority, is_cleanup_key, is_view_key, key_db, quantize, stringify, validate_key
from actors.smoosh.settings import ChannelSettings, ServerSettings, all_channels

__all__ = [
    "ChannelRecord",
    "InfoSource",
    "ObjectInfo",
    "ServerState",
    "compute_priority",
    "db_event_keys",
]

log = logging.getLogger(__name__)

ChannelPriorityOf = Callable[[str, Hashable], float]


@dataclass(frozen=True)
class ObjectInfo:
    """What the priority rules need to know about a database or index file.

    ``changes`` is the number of updates since the last compaction when
    the adapter knows it (upstream ``update_seq - compacted_seq``), else None.
    """

    file_size: int
    active_size: int
    needs_upgrade: bool = False
    changes: int | None = None


class InfoSource(Protocol):
    """The part of an adapter `compute_priority` reads."""

    def object_info(self, key: Hashable) -> ObjectInfo | None: ...

    def needs_cleanup(self, db: str) -> bool: ...


def compute_priority(settings: ChannelSettings, key: Hashable, source: InfoSource) -> float:
    """A key's quantized priority in a channel (`smoosh_server:get_priority/2`).

    An object that is gone has priority 0 (it is expected that a database
    is deleted while it waits); an index cleanup has priority 1 when there
    is something to clean.
    """
    if is_cleanup_key(key):
        return 1 if source.needs_cleanup(key_db(key)) else 0
    info = source.object_info(key)
    if info is None:
        return 0
    changes = None if is_view_key(key) else info.changes
    return quantize(get_priority(settings, info.file_size, info.active_size, info.needs_upgrade, changes))


def db_event_keys(db: str, event: Any) -> list[Hashable]:
    """Keys to enqueue for a database event (`handle_db_event/3`).

    ``"local_updated"`` enqueues the database; ``("index_commit", index)``
    and ``("index_collator_upgrade", index)`` enqueue ``(db, index)``;
    every other event is ignored.
    """
    if event == "local_updated":
        return [db]
    if isinstance(event, tuple) and len(event) == 2 and event[0] in ("index_commit", "index_collator_upgrade"):
        return [(db, event[1])]
    return []


@dataclass
class ChannelRecord:
    """One row of the ``smoosh_server`` channel table."""

    name: str
    handle: Any = None


class ServerState:
    """Channel table, enqueue routing and staleness of `smoosh_server`."""

    def __init__(self, settings: ServerSettings, access: AccessTable | None = None) -> None:
        self.settings = settings
        self.access = access if access is not None else AccessTable(settings.access_max_size)
        self.channels: dict[str, ChannelRecord] = {}
        # objects whose enqueue request is being worked on (upstream `waiting`)
        self.waiting: set[Hashable] = set()

    # -- channels ----------------------------------------------------------

    def wanted_channels(self) -> tuple[str, ...]:
        return all_channels(self.settings)

    def create_missing_channels(self) -> list:
        """`create_missing_channels/1`: start every configured channel not running."""
        return [StartChannel(name) for name in self.wanted_channels() if name not in self.channels]

    def channel_started(self, name: str, handle: Any) -> None:
        self.channels[name] = ChannelRecord(name, handle)

    def config_changed(self, settings: ServerSettings) -> list:
        """``new_db_channels`` and friends: close channels no longer listed, start new ones."""
        self.settings = settings
        wanted = set(self.wanted_channels())
        effects: list = []
        for name in sorted(self.channels):
            if name not in wanted:
                record = self.channels.pop(name)
                effects.append(CloseChannel(name, record.handle))
        effects.extend(self.create_missing_channels())
        return effects

    def channel_died(self, handle: Any, reason: Any = None) -> list:
        """A linked channel exited: forget it, then recreate missing channels."""
        for name, record in list(self.channels.items()):
            if record.handle == handle:
                log.info("smoosh_server: channel %s died: %s", name, reason)
                del self.channels[name]
                break
        return self.create_missing_channels()

    def channel_handle(self, name: str) -> Any:
        return self.channels[name].handle

    # -- enqueue -----------------------------------------------------------

    def stale_enough(self, key: Hashable, now: float) -> bool:
        """Not enqueued within ``staleness`` minutes (`stale_enough/1`)."""
        return self.access.stale_enough(key, now, self.settings.staleness_sec)

    def should_enqueue(self, obj: Any, now: float) -> Hashable | None:
        """The caller-side check of `enqueue/1`: the validated key, or None if too fresh.

        Raises `ValueError` for an object that is not a key.
        """
        key = validate_key(obj)
        return key if self.stale_enough(key, now) else None

    def begin_enqueue(self, key: Hashable) -> bool:
        """`handle_cast({enqueue, ...})`: False when a request for ``key`` is already in flight."""
        if key in self.waiting:
            return False
        self.waiting.add(key)
        return True

    def end_enqueue(self, key: Hashable) -> None:
        """The request for ``key`` finished (the ``'DOWN'`` of the enqueue process)."""
        self.waiting.discard(key)

    def channels_for(self, key: Hashable) -> tuple[str, ...]:
        if is_cleanup_key(key):
            return self.settings.cleanup_channels
        if is_view_key(key):
            return self.settings.view_channels
        return self.settings.db_channels

    def ignored(self, key: Hashable) -> bool:
        """`smoosh_utils:ignore_db/1`: ``[smoosh.ignore] <db> = true``."""
        return key_db(key) in self.settings.ignore

    def find_channel(
        self, key: Hashable, priority_of: ChannelPriorityOf, now: float, check_staleness: bool = True
    ) -> tuple[str, float] | None:
        """The first channel giving ``key`` a non-zero priority, with that priority.

        Channels of the key's type are tried in sorted order; a channel that
        is not running, or whose priority computation fails, is skipped.
        ``check_staleness=False`` is for a failed job handed back by its
        channel: it was enqueued moments ago, and must not be dropped as
        too fresh.
        """
        if (check_staleness and not self.stale_enough(key, now)) or self.ignored(key):
            return None
        for name in self.channels_for(key):
            if name not in self.channels:
                continue
            try:
                priority = priority_of(name, key)
            except Exception as exc:  # never let one object crash the server
                log.warning("smoosh_server: priority of %s in %s failed: %r", stringify(key), name, exc)
                continue
            if priority:
                return name, priority
        return None

    def enqueue_request(
        self, key: Hashable, priority_of: ChannelPriorityOf, now: float, check_staleness: bool = True
    ) -> list:
        """`enqueue_request/2`: route ``key`` and record the access time."""
        found = self.find_channel(key, priority_of, now, check_staleness)
        if found is None:
            return []
        name, priority = found
        self.access.record(key, now)
        return [EnqueueToChannel(name, key, priority)]

    def handle_db_event(self, db: str, event: Any, now: float) -> list[Hashable]:
        """Keys from a database event that are stale enough to enqueue."""
        return [key for key in db_event_keys(db, event) if self.stale_enough(key, now)]

    def clean_access(self, now: float) -> int:
        """One sweep of the access cleaner."""
        return self.access.clean(now, self.settings.staleness_sec)

    # -- status ------------------------------------------------------------

    def status(self, channel_status: Callable[[str], Mapping[str, Any] | None] | Mapping[str, Any]) -> dict[str, Any]:
        """Per channel status, sorted by name (`status/0`).

        ``channel_status`` gives the status a channel last published (a
        mapping or a lookup function); channels with nothing published yet
        report ``{}``, as upstream's empty status table.
        """
        lookup = channel_status.get if isinstance(channel_status, Mapping) else channel_status
        result: dict[str, Any] = {}
        for name in sorted(self.channels):
            status = lookup(name)
            result[name] = dict(status) if status else {}
        return result

    def channel_names(self) -> Iterable[str]:
        return sorted(self.channels)
