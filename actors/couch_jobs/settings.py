"""The ``[couch_jobs]`` knobs, read the way the seed reads them: on every use.

Defaults are the seed's (``rel/overlay/etc/default.ini`` and the ``-define``
macros); the last three are this port's own.  Getters take the `Config` to
read so tests can pass their own; None means this process's replica.
"""

from __future__ import annotations

import math

from actors.config import Config, ConfigError, current

__all__ = [
    "SECTION",
    "activity_monitor_max_jitter_msec",
    "busy_timeout_msec",
    "pg_idle_in_transaction_timeout_msec",
    "type_check_max_jitter_msec",
    "type_check_period_msec",
    "type_monitor_holdoff_msec",
    "type_monitor_timeout_msec",
    "wakeup_recheck_msec",
]

SECTION = "couch_jobs"

ACTIVITY_MONITOR_MAX_JITTER_DEFAULT = 10000
TYPE_MONITOR_HOLDOFF_DEFAULT = 50
TYPE_MONITOR_TIMEOUT_DEFAULT = "infinity"
TYPE_CHECK_PERIOD_DEFAULT = 15000
TYPE_CHECK_MAX_JITTER_DEFAULT = 5000
WAKEUP_RECHECK_DEFAULT = 250
BUSY_TIMEOUT_DEFAULT = 30000


def _cfg(config: Config | None) -> Config:
    return current() if config is None else config


def activity_monitor_max_jitter_msec(config: Config | None = None) -> int:
    """Maximum jitter added to the activity monitor's check period."""
    return _cfg(config).get_integer(SECTION, "activity_monitor_max_jitter_msec", ACTIVITY_MONITOR_MAX_JITTER_DEFAULT)


def type_monitor_holdoff_msec(config: Config | None = None) -> int:
    """Hold-off between two notifications of a type's subscribers."""
    return _cfg(config).get_integer(SECTION, "type_monitor_holdoff_msec", TYPE_MONITOR_HOLDOFF_DEFAULT)


def type_monitor_timeout_msec(config: Config | None = None) -> float:
    """How long the type monitor waits for a change before re-reading; inf for "infinity"."""
    raw = _cfg(config).get(SECTION, "type_monitor_timeout_msec", TYPE_MONITOR_TIMEOUT_DEFAULT)
    text = str(raw).strip()
    if text == "infinity":
        return math.inf
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"[{SECTION}] type_monitor_timeout_msec = {raw!r} is not an integer or infinity") from None


def type_check_period_msec(config: Config | None = None) -> int:
    """How often the server looks for job types that appeared or went away."""
    return _cfg(config).get_integer(SECTION, "type_check_period_msec", TYPE_CHECK_PERIOD_DEFAULT)


def type_check_max_jitter_msec(config: Config | None = None) -> int:
    return _cfg(config).get_integer(SECTION, "type_check_max_jitter_msec", TYPE_CHECK_MAX_JITTER_DEFAULT)


def wakeup_recheck_msec(config: Config | None = None) -> int:
    """Longest a blocked accept/wait sleeps before re-reading the store (this port)."""
    value = _cfg(config).get_integer(SECTION, "wakeup_recheck_msec", WAKEUP_RECHECK_DEFAULT)
    if value <= 0:
        raise ConfigError(f"[{SECTION}] wakeup_recheck_msec = {value} must be positive")
    return value


def busy_timeout_msec(config: Config | None = None) -> int:
    """How long a writer waits for SQLite's write lock before failing (this port)."""
    value = _cfg(config).get_integer(SECTION, "busy_timeout_msec", BUSY_TIMEOUT_DEFAULT)
    if value <= 0:
        raise ConfigError(f"[{SECTION}] busy_timeout_msec = {value} must be positive")
    return value


PG_CONNECT_TIMEOUT_DEFAULT = 5000
PG_POOL_SIZE_DEFAULT = 8


def pg_connect_timeout_msec(config: Config | None = None) -> int:
    """PostgreSQL store: how long a call waits for a connection before `StoreUnavailable`."""
    value = _cfg(config).get_integer(SECTION, "pg_connect_timeout_msec", PG_CONNECT_TIMEOUT_DEFAULT)
    if value <= 0:
        raise ConfigError(f"[{SECTION}] pg_connect_timeout_msec = {value} must be positive")
    return value


def pg_pool_size(config: Config | None = None) -> int:
    """PostgreSQL store: most connections one process holds."""
    value = _cfg(config).get_integer(SECTION, "pg_pool_size", PG_POOL_SIZE_DEFAULT)
    if value <= 0:
        raise ConfigError(f"[{SECTION}] pg_pool_size = {value} must be positive")
    return value


PG_IDLE_IN_TRANSACTION_TIMEOUT_DEFAULT = 5000


def pg_idle_in_transaction_timeout_msec(config: Config | None = None) -> int:
    """PostgreSQL store: how long the server lets a session sit idle inside a
    transaction before ending it, which frees the row locks of a client that
    froze or was cut off mid-transaction; 0 leaves the server's own setting."""
    value = _cfg(config).get_integer(
        SECTION, "pg_idle_in_transaction_timeout_msec", PG_IDLE_IN_TRANSACTION_TIMEOUT_DEFAULT
    )
    if value < 0:
        raise ConfigError(f"[{SECTION}] pg_idle_in_transaction_timeout_msec = {value} must be 0 or positive")
    return value
