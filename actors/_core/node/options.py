"""What a `Node` is given, read once: its config, its cluster settings, its metrics endpoint.

A node takes its settings from a config (an ini file, a mapping or a
`Config`) and from keywords, each keyword overriding its own key whichever
of them came from the config.  All of it is read and checked here, before
any process or socket starts, so a bad value refuses the node with nothing
to undo.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from actors._core.base import config as _config
from actors._core.metrics.names import DEFAULT_BIND as _METRICS_BIND
from actors._core.net.settings import ClusterSettings, parse_seeds

__all__ = ["NodeOptions", "as_config", "new_identity", "read_options"]

_node_counter = itertools.count(1)


@dataclass(frozen=True)
class NodeOptions:
    """A node's settings, checked."""

    config: _config.Config
    cluster: ClusterSettings
    metrics_port: int | None  # None: the node serves no metrics
    metrics_bind: str


def read_options(
    config: _config.Config | Mapping[str, Mapping[str, Any]] | str | os.PathLike[str] | None,
    *,
    name: str | None,
    listen: str | None,
    cluster_key: str | os.PathLike[str] | None,
    seeds: Iterable[str] | str,
    net_ticktime: float | None,
    connect_all: bool | None,
    metrics: int | None,
    metrics_bind: str | None,
    trust_peers: bool | None = None,
) -> NodeOptions:
    """`Node`'s arguments, read as `Node` documents them."""
    cfg = as_config(config)
    # ``metrics=`` / ``metrics_bind=`` override ``[metrics] port`` / ``bind`` (docs/metrics.md).
    metrics_port = metrics if metrics is not None else _metrics_port(cfg)
    metrics_bind = metrics_bind or cfg.get("metrics", "bind") or _METRICS_BIND
    # Each keyword given overrides its own ``[cluster]`` key, whichever
    # of them came from the config (``net_ticktime=`` on an ini node too).
    given: dict[str, Any] = {
        "name": name,
        "listen": listen,
        "cluster_key": os.fspath(cluster_key) if cluster_key is not None else None,
        "seeds": parse_seeds(seeds) or None,
        "net_ticktime": net_ticktime,
        "connect_all": connect_all,
        "trust_peers": trust_peers,
    }
    cluster = ClusterSettings.from_config(cfg, **{key: value for key, value in given.items() if value is not None})
    return NodeOptions(cfg, cluster, metrics_port, metrics_bind)


def _metrics_port(cfg: _config.Config) -> int | None:
    """``[metrics] port`` (None when unset): a bad value refuses the node before anything starts."""
    if cfg.get("metrics", "port") is None:
        return None
    port = cfg.get_integer("metrics", "port", 0)
    if not 0 <= port <= 65535:
        raise _config.ConfigError(f"[metrics] port = {port!r} must be 0..65535")
    return port


def as_config(config: Any) -> _config.Config:
    """A `Config` from what `Node` accepts: None (empty), a `Config`, a mapping, an ini file's path."""
    if config is None:
        return _config.Config()
    if isinstance(config, _config.Config):
        return config
    if isinstance(config, Mapping):
        return _config.Config(config)
    return _config.Config.from_ini(config)


def new_identity(name: str | None) -> tuple[int, str]:
    """A fresh incarnation number, and the node id of node ``name`` (None: not distributed)."""
    incarnation = int.from_bytes(os.urandom(8), "big") >> 1
    if name is not None:
        # A distributed node's id names it and its incarnation: refs to the
        # actors of a previous incarnation never reach the next one.
        return incarnation, f"{name}@{incarnation:x}"
    return incarnation, f"{os.getpid()}-{next(_node_counter)}-{os.urandom(3).hex()}"
