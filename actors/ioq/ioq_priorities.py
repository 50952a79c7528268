"""IOQ2 priority tables: which multiplier a request gets (the priority half of the seed's `ioq_config`).

IOQ2 orders requests by the product of three multipliers looked up per
request: the class priority, the user priority and the (shard, class)
priority, each 1.0 unless configured.  The tables are built from the config
sections ``[ioq2.classes]``, ``[ioq2.users]`` and ``[ioq2.shards]`` (keys
``<shard without suffix>||<class>``).  Pure: config in, tables and numbers
out.  Kept apart from `ioq_config` (the ``[ioq2]`` settings and the
validated setters) because the servers price every request with this,
while the setters are for operators.  Readers are lenient: a value that
does not parse falls back to 1.0, logged, so one typo cannot take the IO
path down.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from actors.config import Config

from .request import IoqRequest, rootname

__all__ = [
    "CLASSES_SECTION",
    "DEFAULT_CLASS_PRIORITIES",
    "DEFAULT_PRIORITY",
    "PriorityTable",
    "SHARDS_SECTION",
    "SHARD_CLASS_SEPARATOR",
    "ShardStringError",
    "USERS_SECTION",
    "build_class_priorities",
    "build_shard_priorities",
    "build_user_priorities",
    "check_priority",
    "ioq_classes",
    "is_valid_class",
    "parse_shard_string",
    "prioritize",
    "to_float",
]

#: One logger for IOQ configuration, whichever of its modules reads it.
log = logging.getLogger("actors.ioq.ioq_config")

DEFAULT_PRIORITY = 1.0

#: Class multipliers when nothing is configured (the seed's ``ioq.hrl``):
#: database work at 1.0, background work a thousand times lower.
DEFAULT_CLASS_PRIORITIES: tuple[tuple[str, float], ...] = (
    ("customer", 1.0),
    ("internal_repl", 0.001),
    ("view_compact", 0.0001),
    ("db_compact", 0.0001),
    ("low", 0.0001),
    ("db_meta", 1.0),
    ("db_update", 1.0),
    ("view_update", 1.0),
    ("other", 1.0),
    ("interactive", 1.0),
)

SHARD_CLASS_SEPARATOR = "||"
SHARDS_SECTION = "ioq2.shards"
USERS_SECTION = "ioq2.users"
CLASSES_SECTION = "ioq2.classes"

_CLASS_SET = frozenset(c for c, _p in DEFAULT_CLASS_PRIORITIES)

PriorityTable = dict[Any, float]


class ShardStringError(ValueError):
    """A ``[ioq2.shards]`` key that is not ``<shard>||<class>``."""

    def __init__(self, shard_string: str, why: str) -> None:
        super().__init__(f"bad IOQ shard config key {shard_string!r}: {why}")
        self.shard_string = shard_string


# -- classes -----------------------------------------------------------------


def ioq_classes() -> list[str]:
    """All IOQ class names, in the seed's order."""
    return [c for c, _p in DEFAULT_CLASS_PRIORITIES]


def is_valid_class(class_: Any) -> bool:
    return isinstance(class_, str) and class_ in _CLASS_SET


# -- parsing -----------------------------------------------------------------


def to_float(value: Any, default: float = DEFAULT_PRIORITY) -> float:
    """A priority from a config value: floats and ints as numbers, numeric strings
    parsed, anything else (or a non-finite number) ``default``.

    The seed ignores values that are not numbers rather than failing, so a bad
    manual ``config:set`` degrades to the default priority.
    """
    if isinstance(value, bool):
        return default
    if isinstance(value, float):
        return value if math.isfinite(value) else default
    if isinstance(value, int):
        return float(value)
    if isinstance(value, str):
        try:
            parsed = float(value)
        except ValueError:
            return default
        return parsed if math.isfinite(parsed) else default
    return default


def parse_shard_string(shard_string: str) -> tuple[str, str]:
    """``"shards/0-1/foo/bar||db_update"`` -> ``("shards/0-1/foo/bar", "db_update")``.

    Raises `ShardStringError` (carrying the string) when the key has no class
    part or names an unknown class; builders log and skip such keys.
    """
    if not isinstance(shard_string, str):
        raise ShardStringError(str(shard_string), "not a string")
    # string:tokens/2 splits on any character of the separator, dropping empties.
    tokens = [t for t in shard_string.split("|") if t]
    if len(tokens) != 2:
        raise ShardStringError(shard_string, f"expected <shard>{SHARD_CLASS_SEPARATOR}<class>")
    shard, class_ = tokens
    if not is_valid_class(class_):
        raise ShardStringError(shard_string, f"unknown IOQ class {class_!r}")
    return shard, class_


def _pairs(source: Config | Mapping[Any, Any] | Iterable[tuple[Any, Any]], section: str):
    if isinstance(source, Config):
        return list(source.section(section).items())
    if isinstance(source, Mapping):
        return list(source.items())
    return list(source)


def build_class_priorities(
    source: Config | Mapping[str, Any] | Iterable[tuple[str, Any]],
) -> PriorityTable:
    """Default class priorities overlaid with ``[ioq2.classes]`` (or the given pairs)."""
    table: PriorityTable = dict(DEFAULT_CLASS_PRIORITIES)
    for key, value in _pairs(source, CLASSES_SECTION):
        if not is_valid_class(key):
            log.error("IOQ ignoring priority for unknown class %r", key)
            continue
        table[key] = to_float(value)
    return table


def build_user_priorities(
    source: Config | Mapping[str, Any] | Iterable[tuple[str, Any]],
) -> PriorityTable:
    """``{user: priority}`` from ``[ioq2.users]`` (or the given pairs)."""
    return {str(key): to_float(value) for key, value in _pairs(source, USERS_SECTION)}


def build_shard_priorities(
    source: Config | Mapping[Any, Any] | Iterable[tuple[Any, Any]],
) -> PriorityTable:
    """``{(shard, class): priority}``.

    From a `Config`, the ``[ioq2.shards]`` keys are parsed with
    `parse_shard_string` and bad ones logged and skipped; given pairs are
    already ``((shard, class), priority)``, as in the seed's ``/1`` variant.
    """
    table: PriorityTable = {}
    if isinstance(source, Config):
        for key, value in source.section(SHARDS_SECTION).items():
            try:
                parsed = parse_shard_string(key)
            except ShardStringError as exc:
                log.error("IOQ error parsing shard config: %s", exc)
                continue
            table[parsed] = to_float(value)
        return table
    for key, value in _pairs(source, SHARDS_SECTION):
        table[tuple(key)] = to_float(value)
    return table


# -- prioritising ------------------------------------------------------------


def prioritize(
    request: IoqRequest,
    class_p: Mapping[Any, float],
    user_p: Mapping[Any, float],
    shard_p: Mapping[Any, float],
) -> float:
    """user priority x class priority x (shard, class) priority, each 1.0 when unset."""
    user = request.user
    class_ = request.class_
    up = DEFAULT_PRIORITY if user is None else user_p.get(user, DEFAULT_PRIORITY)
    cp = DEFAULT_PRIORITY if class_ is None else class_p.get(class_, DEFAULT_PRIORITY)
    sp = shard_p.get((request.shard, class_), DEFAULT_PRIORITY) if shard_p else DEFAULT_PRIORITY
    return up * cp * sp


def check_priority(config: Config, class_: str, user: str | None, shard: str | None) -> float:
    """The priority a request would get under ``config``; for operators checking a setting."""
    req = IoqRequest(
        user=user,
        shard=rootname(shard) if isinstance(shard, str) else shard,
        class_=class_,
    )
    return prioritize(
        req,
        build_class_priorities(config),
        build_user_priorities(config),
        build_shard_priorities(config),
    )
