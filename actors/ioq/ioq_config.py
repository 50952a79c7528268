"""IOQ2 configuration: settings and validated setters (the seed's `ioq_config`).

The scalar knobs live in ``[ioq2]`` and per-class bypasses in
``[ioq2.bypass]``; the priority tables (``[ioq2.classes]``, ``[ioq2.users]``,
``[ioq2.shards]``) are read by `ioq_priorities`, whose names this module
also exports, so ``ioq_config`` stays the one place operators look.

Operators should change IOQ2 through the ``set_*`` helpers: they refuse
values the servers would silently ignore, and log the reason for the audit
trail.  Readers are lenient instead: a value that does not parse falls back
to its default so one typo cannot take the IO path down.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from actors.config import Config, ConfigError

from .ioq_priorities import (
    CLASSES_SECTION,
    DEFAULT_CLASS_PRIORITIES,
    DEFAULT_PRIORITY,
    SHARD_CLASS_SEPARATOR,
    SHARDS_SECTION,
    USERS_SECTION,
    PriorityTable,
    ShardStringError,
    build_class_priorities,
    build_shard_priorities,
    build_user_priorities,
    check_priority,
    ioq_classes,
    is_valid_class,
    parse_shard_string,
    prioritize,
    to_float,
)
from .request import rootname

__all__ = [
    "BYPASS_SECTION",
    "CLASSES_SECTION",
    "DEFAULT_CLASS_PRIORITIES",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_DISPATCH_STRATEGY",
    "DEFAULT_MAX_PRIORITY",
    "DEFAULT_PRIORITY",
    "DEFAULT_RESIZE_LIMIT",
    "DEFAULT_SCALE_FACTOR",
    "DISPATCH_FD_HASH",
    "DISPATCH_RANDOM",
    "DISPATCH_SERVER_PER_SCHEDULER",
    "DISPATCH_SINGLE_SERVER",
    "DISPATCH_STRATEGIES",
    "IOQ2_DEFAULTS",
    "IOQ2_SECTION",
    "Ioq2Settings",
    "SHARDS_SECTION",
    "SHARD_CLASS_SEPARATOR",
    "ShardStringError",
    "USERS_SECTION",
    "affects_ioq",
    "bypassed_classes",
    "check_concurrency",
    "build_class_priorities",
    "build_shard_priorities",
    "build_user_priorities",
    "check_priority",
    "dispatch_strategy",
    "ioq2_enabled",
    "ioq_classes",
    "is_valid_class",
    "parse_shard_string",
    "prioritize",
    "read_settings",
    "set_bypass",
    "set_class_config",
    "set_concurrency",
    "set_db_config",
    "set_dedupe",
    "set_dispatch_strategy",
    "set_enabled",
    "set_max_priority",
    "set_resize_limit",
    "set_scale_factor",
    "set_shard_config",
    "set_shards_config",
    "set_user_config",
    "to_float",
]

log = logging.getLogger(__name__)

DISPATCH_RANDOM = "random"
DISPATCH_FD_HASH = "fd_hash"
DISPATCH_SINGLE_SERVER = "single_server"
DISPATCH_SERVER_PER_SCHEDULER = "server_per_scheduler"
DISPATCH_STRATEGIES = (
    DISPATCH_RANDOM,
    DISPATCH_FD_HASH,
    DISPATCH_SINGLE_SERVER,
    DISPATCH_SERVER_PER_SCHEDULER,
)

DEFAULT_CONCURRENCY = 1
DEFAULT_RESIZE_LIMIT = 1000
DEFAULT_SCALE_FACTOR = 2.0
DEFAULT_MAX_PRIORITY = 10000.0
DEFAULT_DISPATCH_STRATEGY = DISPATCH_SERVER_PER_SCHEDULER

IOQ2_SECTION = "ioq2"
BYPASS_SECTION = "ioq2.bypass"

#: Every ``[ioq2]`` key with its default, as strings the way config stores them.
IOQ2_DEFAULTS: dict[str, str] = {
    "concurrency": str(DEFAULT_CONCURRENCY),
    "resize_limit": str(DEFAULT_RESIZE_LIMIT),
    "dedupe": "true",
    "scale_factor": repr(DEFAULT_SCALE_FACTOR),
    "max_priority": repr(DEFAULT_MAX_PRIORITY),
    "enabled": "false",
    "dispatch_strategy": DEFAULT_DISPATCH_STRATEGY,
    "bind_to_schedulers": "false",
}


# -- settings ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ioq2Settings:
    """Everything one IOQ2 server reads from config, parsed once per change."""

    concurrency: int = DEFAULT_CONCURRENCY
    resize_limit: int = DEFAULT_RESIZE_LIMIT
    dedupe: bool = True
    scale_factor: float = DEFAULT_SCALE_FACTOR
    max_priority: float = DEFAULT_MAX_PRIORITY
    class_p: PriorityTable = field(default_factory=lambda: dict(DEFAULT_CLASS_PRIORITIES))
    user_p: PriorityTable = field(default_factory=dict)
    shard_p: PriorityTable = field(default_factory=dict)
    bypass: frozenset[str] = frozenset()


def _lenient(read: Callable[[], Any], default: Any, what: str) -> Any:
    try:
        return read()
    except ConfigError as exc:
        log.error("IOQ using default %r for %s: %s", default, what, exc)
        return default


def _positive_int(config: Config, key: str, default: int) -> int:
    value = _lenient(lambda: config.get_integer(IOQ2_SECTION, key, default), default, key)
    if value < 1:
        log.error("IOQ using default %r for [ioq2] %s = %r (must be >= 1)", default, key, value)
        return default
    return value


def _positive_float(config: Config, key: str, default: float) -> float:
    value = to_float(config.get(IOQ2_SECTION, key), default)
    if value <= 0.0:
        log.error("IOQ using default %r for [ioq2] %s = %r (must be > 0)", default, key, value)
        return default
    return value


def bypassed_classes(config: Config) -> frozenset[str]:
    """Classes with ``[ioq2.bypass] <class> = true``."""
    out = set()
    for key in config.section(BYPASS_SECTION):
        if _lenient(lambda k=key: config.get_boolean(BYPASS_SECTION, k, False), False, key):
            out.add(key)
    return frozenset(out)


def read_settings(config: Config) -> Ioq2Settings:
    """Parse every IOQ2 server setting from ``config`` (the seed's `update_config_int`)."""
    return Ioq2Settings(
        concurrency=_positive_int(config, "concurrency", DEFAULT_CONCURRENCY),
        resize_limit=_positive_int(config, "resize_limit", DEFAULT_RESIZE_LIMIT),
        dedupe=_lenient(lambda: config.get_boolean(IOQ2_SECTION, "dedupe", True), True, "dedupe"),
        scale_factor=_positive_float(config, "scale_factor", DEFAULT_SCALE_FACTOR),
        max_priority=_positive_float(config, "max_priority", DEFAULT_MAX_PRIORITY),
        class_p=build_class_priorities(config),
        user_p=build_user_priorities(config),
        shard_p=build_shard_priorities(config),
        bypass=bypassed_classes(config),
    )


def ioq2_enabled(config: Config) -> bool:
    """``[ioq2] enabled``: whether `call` routes through IOQ2 rather than IOQ1."""
    return _lenient(lambda: config.get_boolean(IOQ2_SECTION, "enabled", False), False, "enabled")


def dispatch_strategy(config: Config) -> str:
    """``[ioq2] dispatch_strategy``; unknown values mean the default, as in the seed."""
    value = config.get(IOQ2_SECTION, "dispatch_strategy", DEFAULT_DISPATCH_STRATEGY)
    return value if value in DISPATCH_STRATEGIES else DEFAULT_DISPATCH_STRATEGY


def affects_ioq(section: str) -> bool:
    """Whether a change to ``section`` must reach the IOQ servers (`ioq_config_listener`)."""
    return section in ("ioq", IOQ2_SECTION, "ioq.bypass") or section.startswith("ioq2.")


# -- setters -----------------------------------------------------------------


def _set(config: Config, section: str, key: str, value: str, reason: str) -> None:
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError(f"a reason is required to change [{section}] {key}, got {reason!r}")
    log.info("IOQ config [%s] %s = %s (%s)", section, key, value, reason)
    config.set(section, key, value)


def _check_float_value(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a float, got {value!r} ({type(value).__name__})")
    f = float(value)
    if not math.isfinite(f) or f < 0.0:
        raise ValueError(f"{what} must be a finite float >= 0, got {value!r}")
    return f


def _check_class(class_: Any) -> str:
    if not is_valid_class(class_):
        raise ValueError(f"unknown IOQ class {class_!r}; expected one of {ioq_classes()}")
    return class_


def _check_bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be True or False, got {value!r}")
    return value


def check_concurrency(value: Any) -> int:
    """A concurrency must be an integer >= 1 (the seed's ``badarg`` otherwise)."""
    return _check_pos_int(value, "concurrency")


def _check_pos_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be an integer >= 1, got {value!r}")
    return value


def _bool_str(value: bool) -> str:
    return "true" if value else "false"


def set_bypass(config: Config, class_: str, value: bool, reason: str) -> None:
    """Route ``class_`` straight to its IO target, skipping IOQ2."""
    _check_class(class_)
    _check_bool(value, "bypass")
    _set(config, BYPASS_SECTION, class_, _bool_str(value), reason)


def set_enabled(config: Config, value: bool, reason: str) -> None:
    _set(config, IOQ2_SECTION, "enabled", _bool_str(_check_bool(value, "enabled")), reason)


def set_max_priority(config: Config, value: float, reason: str) -> None:
    f = _check_float_value(value, "max_priority")
    if f <= 0.0:
        raise ValueError(f"max_priority must be > 0, got {value!r}")
    _set(config, IOQ2_SECTION, "max_priority", repr(f), reason)


def set_dedupe(config: Config, value: bool, reason: str) -> None:
    _set(config, IOQ2_SECTION, "dedupe", _bool_str(_check_bool(value, "dedupe")), reason)


def set_scale_factor(config: Config, value: float, reason: str) -> None:
    f = _check_float_value(value, "scale_factor")
    if f <= 0.0:
        raise ValueError(f"scale_factor must be > 0 (it multiplies queued priorities), got {value!r}")
    _set(config, IOQ2_SECTION, "scale_factor", repr(f), reason)


def set_resize_limit(config: Config, value: int, reason: str) -> None:
    _set(config, IOQ2_SECTION, "resize_limit", str(_check_pos_int(value, "resize_limit")), reason)


def set_concurrency(config: Config, value: int, reason: str) -> None:
    """Per-server concurrency; the total is this times the number of servers."""
    _set(config, IOQ2_SECTION, "concurrency", str(_check_pos_int(value, "concurrency")), reason)


def set_dispatch_strategy(config: Config, value: str, reason: str) -> None:
    if value not in DISPATCH_STRATEGIES:
        raise ValueError(
            f"Dispatch strategy must be one of random, fd_hash, server_per_scheduler, or single_server; got {value!r}"
        )
    _set(config, IOQ2_SECTION, "dispatch_strategy", value, reason)


def set_class_config(config: Config, class_: str, value: float, reason: str) -> None:
    f = _check_float_value(value, f"priority of class {class_!r}")
    _set(config, CLASSES_SECTION, _check_class(class_), repr(f), reason)


def set_user_config(config: Config, user: str | bytes, value: float, reason: str) -> None:
    if isinstance(user, bytes):
        user = user.decode("utf-8")
    if not isinstance(user, str) or not user:
        raise ValueError(f"user must be a non-empty string, got {user!r}")
    f = _check_float_value(value, f"priority of user {user!r}")
    _set(config, USERS_SECTION, user, repr(f), reason)


def set_shard_config(config: Config, shard: str, class_: str, value: float, reason: str) -> None:
    """Priority of one (shard, class); the shard's creation suffix is dropped."""
    if not isinstance(shard, str) or not shard:
        raise ValueError(f"shard must be a non-empty shard name, got {shard!r}")
    f = _check_float_value(value, f"priority of shard {shard!r}")
    _check_class(class_)
    key = f"{rootname(shard)}{SHARD_CLASS_SEPARATOR}{class_}"
    _set(config, SHARDS_SECTION, key, repr(f), reason)


def set_shards_config(config: Config, shards: Iterable[str], class_: str, value: float, reason: str) -> None:
    _check_float_value(value, "priority")
    for shard in shards:
        set_shard_config(config, shard, class_, value, reason)


def set_db_config(
    config: Config,
    db_name: str,
    class_: str,
    value: float,
    reason: str,
    *,
    shards: Callable[[str], Iterable[str]],
) -> None:
    """Set a (shard, class) priority on every shard of ``db_name``.

    ``shards`` maps a database name to its shard names (CouchDB's
    ``mem3:shards``); the host program knows its own layout.
    """
    if not isinstance(db_name, str) or not db_name:
        raise ValueError(f"db_name must be a non-empty string, got {db_name!r}")
    _check_float_value(value, "priority")
    set_shards_config(config, list(shards(db_name)), class_, value, reason)
