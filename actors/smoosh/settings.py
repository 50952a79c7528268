"""smoosh's settings, read from CouchDB-style config into frozen values.

Upstream reads `config:get` at every use; here a section is parsed once
into a frozen dataclass so the policy gets plain values, and the actor
rebuilds it when the config changes.  Defaults are upstream's.  A value
that does not parse raises `ConfigError` naming section, key and value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from actors.config import Config, ConfigError
from actors.smoosh.policy import parse_time

__all__ = [
    "BUILT_IN_CLEANUP_CHANNELS",
    "BUILT_IN_DB_CHANNELS",
    "BUILT_IN_VIEW_CHANNELS",
    "ChannelSettings",
    "KINDS",
    "ServerSettings",
    "all_channels",
    "channel_list",
]

BUILT_IN_DB_CHANNELS = ("ratio_dbs", "slack_dbs", "upgrade_dbs")
BUILT_IN_VIEW_CHANNELS = ("ratio_views", "slack_views", "upgrade_views")
BUILT_IN_CLEANUP_CHANNELS = ("index_cleanup",)

#: Priority kinds a channel may have (`[smoosh.<channel>] priority`).
KINDS = ("ratio", "slack", "upgrade")

_DEFAULT_KIND = {
    "ratio_dbs": "ratio",
    "ratio_views": "ratio",
    "slack_dbs": "slack",
    "slack_views": "slack",
    "upgrade_dbs": "upgrade",
    "upgrade_views": "upgrade",
}

_T = TypeVar("_T")

SLACK_MIN_PRIORITY = 536870912
RATIO_MIN_PRIORITY = 2.0


def _number(cfg: Config, section: str, key: str, default: float) -> float:
    """A number, where ``infinity``/``inf`` mean `math.inf` (upstream `to_number`)."""
    raw = cfg.get(section, key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("infinity", "inf"):
        return math.inf
    try:
        value: float = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"[{section}] {key} = {raw!r} is not a number") from None
    if math.isnan(value) or value < 0:
        raise ConfigError(f"[{section}] {key} = {raw!r} is not a non-negative number")
    return value


def _count(cfg: Config, section: str, key: str, default: int, minimum: int) -> int:
    value = cfg.get_integer(section, key, default)
    if value < minimum:
        raise ConfigError(f"[{section}] {key} = {value!r} is below {minimum}")
    return value


def _or_default(parse: Callable[[], _T], default: _T, on_error: Callable[[ConfigError], None] | None) -> _T:
    """``parse()``; with ``on_error``, a bad value is reported and ``default`` used."""
    if on_error is None:
        return parse()
    try:
        return parse()
    except ConfigError as exc:
        on_error(exc)
        return default


def _time(cfg: Config, section: str, key: str, default: int) -> int:
    raw = cfg.get(section, key)
    if raw is None:
        return default
    try:
        return parse_time(str(raw), key)
    except ValueError as exc:
        raise ConfigError(f"[{section}] {key} = {raw!r}: {exc}") from None


@dataclass(frozen=True)
class ChannelSettings:
    """One channel's knobs (`[smoosh.<name>]`).

    ``kind`` is the priority rule: ``ratio``, ``slack`` or ``upgrade``; the
    built-in channels take it from their name, other channels from the
    ``priority`` key (default ``ratio``, as upstream).  Windows are minutes
    after UTC midnight.
    """

    name: str
    kind: str = "ratio"
    capacity: int = 9999
    concurrency: int = 1
    min_priority: float = RATIO_MIN_PRIORITY
    max_priority: float = math.inf
    min_size: float = 1048576
    max_size: float = math.inf
    min_changes: int = 0
    from_: int = 0
    to: int = 1440
    strict_window: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"channel {self.name!r}: priority kind {self.kind!r} is not one of {KINDS}")
        if self.capacity < 0:
            raise ValueError(f"channel {self.name!r}: capacity {self.capacity!r} is negative")
        if self.concurrency < 0:
            raise ValueError(f"channel {self.name!r}: concurrency {self.concurrency!r} is negative")

    @classmethod
    def from_config(
        cls, cfg: Config, name: str, on_error: Callable[[ConfigError], None] | None = None
    ) -> "ChannelSettings":
        """The settings of channel ``name``.

        A bad value raises `ConfigError`, unless ``on_error`` is given: then
        it is told and that one key takes its default, the other keys keep
        their configured values.  Upstream reads each key on its own (a
        malformed ``from``/``to`` is logged and its default used by
        `smoosh_utils:parse_time/2`), so one typo must not reset the rest
        of the channel's configuration.
        """
        section = f"smoosh.{name}"
        default_kind = _DEFAULT_KIND.get(name, "ratio")

        def parse_kind() -> str:
            kind = str(cfg.get(section, "priority", default_kind)).strip()
            if kind not in KINDS:
                raise ConfigError(f"[{section}] priority = {kind!r} is not one of {', '.join(KINDS)}")
            return kind

        kind = _or_default(parse_kind, default_kind, on_error)
        default_min = SLACK_MIN_PRIORITY if kind == "slack" else RATIO_MIN_PRIORITY

        def value(parse: Callable[[], _T], default: _T) -> _T:
            return _or_default(parse, default, on_error)

        return cls(
            name=name,
            kind=kind,
            capacity=value(lambda: _count(cfg, section, "capacity", 9999, 0), 9999),
            concurrency=value(lambda: _count(cfg, section, "concurrency", 1, 0), 1),
            min_priority=value(lambda: _number(cfg, section, "min_priority", default_min), default_min),
            max_priority=value(lambda: _number(cfg, section, "max_priority", math.inf), math.inf),
            min_size=value(lambda: _number(cfg, section, "min_size", 1048576), 1048576),
            max_size=value(lambda: _number(cfg, section, "max_size", math.inf), math.inf),
            min_changes=value(lambda: _count(cfg, section, "min_changes", 0, 0), 0),
            from_=value(lambda: _time(cfg, section, "from", 0), 0),
            to=value(lambda: _time(cfg, section, "to", 1440), 1440),
            strict_window=value(lambda: cfg.get_boolean(section, "strict_window", False), False),
        )


def channel_list(configured: str | None, built_in: tuple[str, ...]) -> tuple[str, ...]:
    """Sorted union of the built-in channels and a comma separated list."""
    names = {part.strip() for part in (configured or "").split(",") if part.strip()}
    return tuple(sorted(names | set(built_in)))


@dataclass(frozen=True)
class ServerSettings:
    """The ``[smoosh]`` section plus the fixed intervals of the seed.

    ``staleness`` is in minutes; every interval is in seconds.
    """

    staleness: float = 5
    wait_secs: float = 30
    persist: bool = False
    state_dir: str = "."
    cleanup_index_files: bool = True
    db_channels: tuple[str, ...] = BUILT_IN_DB_CHANNELS
    view_channels: tuple[str, ...] = BUILT_IN_VIEW_CHANNELS
    cleanup_channels: tuple[str, ...] = BUILT_IN_CLEANUP_CHANNELS
    ignore: frozenset[str] = field(default_factory=frozenset)
    checkpoint_interval: float = 180.0
    status_interval: float = 4.9
    re_enqueue_delay: float = 5.0
    check_window_interval: float = 60.0
    access_clean_interval: float = 3.0
    access_max_size: int = 1_000_000

    @property
    def staleness_sec(self) -> float:
        return self.staleness * 60

    @property
    def channels(self) -> tuple[str, ...]:
        return all_channels(self)

    def channel_type(self, name: str) -> str | None:
        """``db``, ``view`` or ``cleanup``: which objects a channel takes."""
        if name in self.db_channels:
            return "db"
        if name in self.view_channels:
            return "view"
        if name in self.cleanup_channels:
            return "cleanup"
        return None

    @classmethod
    def from_config(
        cls, cfg: Config, *, on_error: Callable[[ConfigError], None] | None = None, **overrides: Any
    ) -> "ServerSettings":
        """``[smoosh]`` and ``[smoosh.ignore]``; ``overrides`` set fixed intervals (tests).

        A bad value raises `ConfigError`, unless ``on_error`` is given: then
        it is told and that key takes its default, as upstream's
        `config:get_integer/3` and `config:get_boolean/3` answer the default
        for a value that does not parse (so one typo neither stops smoosh
        from starting nor blocks a later change of another key).
        """
        section = "smoosh"

        def parse_staleness() -> float:
            staleness = _number(cfg, section, "staleness", 5)
            if math.isinf(staleness):
                raise ConfigError(f"[{section}] staleness = infinity is not a number of minutes")
            return staleness

        def value(parse: Callable[[], _T], default: _T) -> _T:
            return _or_default(parse, default, on_error)

        ignore = frozenset(
            db for db, flag in cfg.section("smoosh.ignore").items() if str(flag).strip().lower() == "true"
        )
        values: dict[str, Any] = dict(
            staleness=value(parse_staleness, 5),
            wait_secs=value(lambda: _number(cfg, section, "wait_secs", 30), 30),
            persist=value(lambda: cfg.get_boolean(section, "persist", False), False),
            state_dir=str(cfg.get(section, "state_dir", ".")),
            cleanup_index_files=value(lambda: cfg.get_boolean(section, "cleanup_index_files", True), True),
            db_channels=channel_list(cfg.get(section, "db_channels"), BUILT_IN_DB_CHANNELS),
            view_channels=channel_list(cfg.get(section, "view_channels"), BUILT_IN_VIEW_CHANNELS),
            cleanup_channels=channel_list(cfg.get(section, "cleanup_channels"), BUILT_IN_CLEANUP_CHANNELS),
            ignore=ignore,
        )
        values.update(overrides)
        return cls(**values)


def all_channels(settings: ServerSettings) -> tuple[str, ...]:
    """Every channel the server should run, sorted."""
    return tuple(sorted(set(settings.db_channels) | set(settings.view_channels) | set(settings.cleanup_channels)))
