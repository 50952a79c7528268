"""Check a whole configuration before booting: every section, key and value.

The services read their settings leniently, the CouchDB way: a bad value is
logged and its default used, or it fails the one reader that cares, a
minute into the run.  A command-line user wants the opposite: a typo
(``[replicator] max_job = 3``) or a bad value (``max_jobs = abc``) named
before anything starts.  `check` walks a `Config` against the table of
settings the services read, and returns warnings (unknown sections and keys:
they are ignored, but said) and errors (values a service would refuse or
misread, each naming section, key and value).

Tables are declarative and pure: a validator takes the raw string and
returns an error message, or ``None`` when the value is fine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from actors.app.logformat import FORMATS
from actors.cluster_settings import parse_port_range
from actors.config import Config, ConfigError
from actors.smoosh.policy import parse_time

__all__ = ["CheckResult", "SCHEMA", "check"]

#: ``validator(raw) -> None`` when fine, else why not (completes "[s] k = 'v': <why>").
Validator = Callable[[str], "str | None"]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def integer(minimum: int | None = None, maximum: int | None = None) -> Validator:
    def check(raw: str) -> str | None:
        try:
            value = int(raw.strip())
        except ValueError:
            return "not an integer"
        if minimum is not None and value < minimum:
            return f"must be >= {minimum}"
        if maximum is not None and value > maximum:
            return f"must be <= {maximum}"
        return None

    return check


def number(
    minimum: float = 0.0, *, strict: bool = False, infinity: bool = False, maximum: float | None = None
) -> Validator:
    def check(raw: str) -> str | None:
        text = raw.strip().lower()
        if infinity and text in ("infinity", "inf"):
            return None
        try:
            value = float(text)
        except ValueError:
            return "not a number"
        if math.isnan(value) or math.isinf(value):
            return "not a finite number"
        if value < minimum or (strict and value == minimum):
            return f"must be {'>' if strict else '>='} {minimum:g}"
        if maximum is not None and value > maximum:
            return f"must be <= {maximum:g}"
        return None

    return check


def boolean(raw: str) -> str | None:
    text = raw.strip().lower()
    return None if text in _TRUE or text in _FALSE else "not a boolean (true/false, yes/no, on/off, 1/0)"


def text(raw: str) -> str | None:
    return None if raw.strip() else "empty"


def choice(*options: str) -> Validator:
    def check(raw: str) -> str | None:
        return None if raw.strip() in options else f"not one of {', '.join(options)}"

    return check


def store_url(raw: str) -> str | None:
    scheme = raw.strip().partition("://")[0].lower()
    if scheme in ("sqlite", "postgresql", "postgres"):
        return None
    return "not a store URL (sqlite:///path or postgresql://user@host:port/db)"


def postgres_url(raw: str) -> str | None:
    scheme = raw.strip().partition("://")[0].lower()
    return None if scheme in ("postgresql", "postgres") else "not a PostgreSQL URL (postgresql://user@host:port/db)"


def sharded_types(raw: str) -> str | None:
    from actors.sharding.configured import parse_types  # only for a config that has the section

    try:
        parse_types(raw)
    except ValueError as exc:
        return str(exc).partition(": ")[2]
    return None


def seconds_or_none(raw: str) -> str | None:
    return None if raw.strip().lower() == "none" else number(0, strict=True)(raw)


def auto_or_boolean(raw: str) -> str | None:
    return None if raw.strip().lower() == "auto" else boolean(raw)


def msec_or_infinity(raw: str) -> str | None:
    return None if raw.strip().lower() == "infinity" else integer(0)(raw)


def port_range(raw: str) -> str | None:
    try:
        parse_port_range(raw)
    except ConfigError as exc:
        return str(exc).partition(": ")[2]
    return None


def time_of_day(raw: str) -> str | None:
    try:
        parse_time(raw, "time")
    except ValueError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class Section:
    """Known keys of a section; ``any_key`` validates keys that are names (dbs, classes)."""

    keys: Mapping[str, Validator] = field(default_factory=dict)
    any_key: Validator | None = None


_CHANNEL = Section(
    {
        "priority": choice("ratio", "slack", "upgrade"),
        "capacity": integer(0),
        "concurrency": integer(0),
        "min_priority": number(0, infinity=True),
        "max_priority": number(0, infinity=True),
        "min_size": number(0, infinity=True),
        "max_size": number(0, infinity=True),
        "min_changes": integer(0),
        "from": time_of_day,
        "to": time_of_day,
        "strict_window": boolean,
    }
)

_BUILT_IN_CHANNELS = (
    "ratio_dbs",
    "slack_dbs",
    "upgrade_dbs",
    "ratio_views",
    "slack_views",
    "upgrade_views",
    "index_cleanup",
)

#: Every section the services read.  ``[replicator] max_jobs`` must be >= 1
#: here although the scheduler accepts 0: 0 runs no replication at all,
#: which a whole-app run reports as lost documents a minute later.
SCHEMA: dict[str, Section] = {
    "couch": Section(
        {
            "intensity": integer(0),
            "period": number(0, strict=True),
            "ioq_pin": boolean,
            "replicator_job_host": text,
            "smoosh_host": text,
            "state_dir": text,
        }
    ),
    "ioq": Section(
        {
            "concurrency": integer(1),
            "dedupe": boolean,
            **{k: number(0) for k in ("customer", "replication", "compaction", "low", "reads", "writes", "views")},
        }
    ),
    "ioq.bypass": Section(any_key=boolean),
    "ioq2": Section(
        {
            "enabled": boolean,
            "concurrency": integer(1),
            "resize_limit": integer(1),
            "dedupe": boolean,
            "scale_factor": number(0, strict=True),
            "max_priority": number(0, strict=True),
            "dispatch_strategy": choice("random", "fd_hash", "single_server", "server_per_scheduler"),
            "bind_to_schedulers": boolean,
            "servers": integer(1),
        }
    ),
    "ioq2.bypass": Section(any_key=boolean),
    "ioq2.classes": Section(any_key=number(0)),
    "ioq2.shards": Section(any_key=number(0)),
    "ioq2.users": Section(any_key=number(0)),
    "osq": Section(any_key=integer(0)),
    "smoosh": Section(
        {
            "staleness": number(0),
            "wait_secs": number(0),
            "persist": boolean,
            "state_dir": text,
            "cleanup_index_files": boolean,
            "db_channels": text,
            "view_channels": text,
            "cleanup_channels": text,
            "watch_interval": number(0),  # 0: no watcher, as smoosh reads it
        }
    ),
    "smoosh.ignore": Section(any_key=boolean),
    "replicator": Section(
        {
            "max_jobs": integer(1),
            "max_churn": integer(0),
            "max_history": integer(1),
            "interval": integer(1),
            "health_threshold": number(0),
            "backoff_interval": number(0, strict=True),
            "max_backoff_exponent": integer(0),
            "fair_share": boolean,
            "usage_coeff": number(0, strict=True, maximum=1.0),
            "cluster_quiet_period": number(0),
            "cluster_start_period": number(0),
            "cluster": boolean,
            "replicator_db": text,
            "doc_poll_interval": number(0, strict=True),
            "store": postgres_url,
            "lease": auto_or_boolean,
            "lease_ttl": number(0, strict=True),
        }
    ),
    "sharding": Section(
        {
            "types": sharded_types,
            "shards": integer(1),
            "idle": seconds_or_none,
            "max_active": integer(1),
            "buffer": integer(1),
            "store": postgres_url,
            "lease_ttl": number(0, strict=True),
            "rebalance_every": number(0, strict=True),
        }
    ),
    "cluster": Section(
        {
            "name": text,
            "listen": text,
            "cluster_key": text,
            "seeds": text,
            "net_ticktime": number(0, strict=True),
            "connect_all": boolean,
            "direct": boolean,
            "direct_ports": port_range,
            "trust_peers": boolean,
        }
    ),
    "metrics": Section({"port": integer(0, 65535), "bind": text}),
    "log": Section({"level": choice("debug", "info", "warning", "error", "critical"), "format": choice(*FORMATS)}),
    "replicator.shares": Section(any_key=integer(1, 1000)),
    "couch_jobs": Section(
        {
            "activity_monitor_max_jitter_msec": integer(0),
            "type_monitor_holdoff_msec": integer(0),
            "type_monitor_timeout_msec": msec_or_infinity,
            "type_check_period_msec": integer(1),
            "type_check_max_jitter_msec": integer(0),
            "wakeup_recheck_msec": integer(1),
            "busy_timeout_msec": integer(1),
            "store": store_url,
            "database_path": text,
            "pg_pool_size": integer(1),
            "pg_connect_timeout_msec": integer(1),
            "pg_idle_in_transaction_timeout_msec": integer(0),
        }
    ),
}


@dataclass
class CheckResult:
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _channels(cfg: Config) -> set[str]:
    names = set(_BUILT_IN_CHANNELS)
    for key in ("db_channels", "view_channels", "cleanup_channels"):
        names.update(p.strip() for p in str(cfg.get("smoosh", key, "")).split(",") if p.strip())
    return names


def _section_schema(name: str, channels: set[str], extra: Mapping[str, Section]) -> Section | None:
    if name in extra:
        return extra[name]
    if name in SCHEMA:
        return SCHEMA[name]
    if name.startswith("smoosh.") and name[len("smoosh.") :] in channels:
        return _CHANNEL
    return None


def check(cfg: Config, extra: Mapping[str, Section] | None = None) -> CheckResult:
    """Warnings for unknown sections and keys, errors for bad values, in file order."""
    result = CheckResult()
    channels = _channels(cfg)
    for name, values in cfg.to_dict().items():
        section = _section_schema(name, channels, extra or {})
        if section is None:
            hint = (
                " (not a smoosh channel: add it to [smoosh] db_channels or view_channels)"
                if name.startswith("smoosh.")
                else ""
            )
            result.warnings.append(f"unknown section [{name}] is ignored{hint}")
            continue
        for key, raw in values.items():
            validator = section.keys.get(key) or section.any_key
            if validator is None:
                result.warnings.append(f"unknown key [{name}] {key} is ignored")
                continue
            why = validator(str(raw))
            if why is not None:
                result.errors.append(f"[{name}] {key} = {raw!r}: {why}")
    return result
