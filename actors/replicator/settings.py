"""The ``[replicator]`` settings the scheduler reads, validated in one place.

The seed reads ``max_jobs``, ``max_churn``, ``interval`` and ``max_history``
at start and accepts live changes only when they pass its guards.  Its fixed
constants (30 s back-off unit, maximum exponent 10, health threshold 120 s)
are settings here with those defaults, so tests and demos can run in seconds.
A bad value is rejected with `InvalidSetting` naming the key and the value;
it is never applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from . import policy

__all__ = ["InvalidSetting", "SECTION", "SHARES_SECTION", "Settings"]

SECTION = "replicator"
#: ``[replicator.shares] <owner db> = 1..1000`` (fair share weights).
SHARES_SECTION = "replicator.shares"


class InvalidSetting(ValueError):
    """A ``[replicator]`` value failed validation; names the key and the value."""

    def __init__(self, key: str, value: Any, why: str) -> None:
        super().__init__(f"[{SECTION}] {key} = {value!r}: {why}")
        self.key = key
        self.value = value


def _int(minimum: int) -> Callable[[str, Any], int]:
    def check(key: str, value: Any) -> int:
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise InvalidSetting(key, value, "not an integer") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidSetting(key, value, "not an integer")
        if value < minimum:
            raise InvalidSetting(key, value, f"must be >= {minimum}")
        return value

    return check


def _number(minimum: float, strict: bool) -> Callable[[str, Any], float]:
    def check(key: str, value: Any) -> float:
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise InvalidSetting(key, value, "not a number") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidSetting(key, value, "not a number")
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidSetting(key, value, "not a finite number")
        if value < minimum or (strict and value == minimum):
            raise InvalidSetting(key, value, f"must be {'>' if strict else '>='} {minimum}")
        return float(value)

    return check


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise InvalidSetting(key, value, "not a boolean")


def _coeff(key: str, value: Any) -> float:
    number = _number(0.0, True)(key, value)
    if number > 1.0:
        raise InvalidSetting(key, value, "must be in (0, 1]")
    return number


# key -> validator.  ``max_churn`` 0 is allowed: the seed's pending_jobs(0)
# clause exists because "user could set max_churn to 0" (no rotation).
_VALIDATORS: dict[str, Callable[[str, Any], Any]] = {
    "max_jobs": _int(0),
    "max_churn": _int(0),
    "max_history": _int(1),
    "interval": _int(1),
    "health_threshold": _number(0.0, False),
    "backoff_interval": _number(0.0, True),
    "max_backoff_exponent": _int(0),
    "fair_share": _bool,
    "usage_coeff": _coeff,
    "cluster_quiet_period": _number(0.0, False),  # seconds; see clustering.py
    "cluster_start_period": _number(0.0, False),
}


@dataclass(frozen=True)
class Settings:
    """The scheduler's knobs (``interval`` in milliseconds, other times in seconds)."""

    max_jobs: int = policy.DEFAULT_MAX_JOBS
    max_churn: int = policy.DEFAULT_MAX_CHURN
    max_history: int = policy.DEFAULT_MAX_HISTORY
    interval: int = policy.DEFAULT_SCHEDULER_INTERVAL
    health_threshold: float = policy.DEFAULT_HEALTH_THRESHOLD
    backoff_interval: float = policy.DEFAULT_BACKOFF_INTERVAL
    max_backoff_exponent: int = policy.DEFAULT_MAX_BACKOFF_EXPONENT
    fair_share: bool = False
    usage_coeff: float = 0.5
    cluster_quiet_period: float = 60.0
    cluster_start_period: float = 5.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = _VALIDATORS[f.name](f.name, getattr(self, f.name))
            object.__setattr__(self, f.name, value)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_config(cls, config: Any) -> "Settings":
        """Read ``[replicator]`` from an `actors.config.Config`; unset keys keep defaults."""
        values = {key: raw for key, raw in config.section(SECTION).items() if key in _VALIDATORS}
        return cls(**values)

    def with_value(self, key: str, value: Any) -> "Settings":
        """A copy with one key changed; `InvalidSetting` if the key or value is bad."""
        if key not in _VALIDATORS:
            raise InvalidSetting(key, value, "unknown scheduler setting")
        return replace(self, **{key: _VALIDATORS[key](key, value)})
