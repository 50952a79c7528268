"""The ``[cluster]`` section: who this node is on the network and whom it joins.

::

    [cluster]
    name = a                          ; this node's name, unique in the cluster
    listen = tcp://0.0.0.0:7100       ; where other nodes connect (port 0: any free port)
    cluster_key = /etc/otpy/cluster.key  ; made by `python -m actors keygen PATH`, mode 0600
    seeds = tcp://10.0.0.2:7100, tcp://10.0.0.3:7100   ; dialed at start, retried until up, re-dialed when lost
    net_ticktime = 15                 ; seconds of silence before a node is declared down
    connect_all = true                ; connect to the nodes a connected node knows (Erlang's default)
    direct = true                     ; processes listen on tcp too: one hop between nodes (false: one port per node)
    direct_ports = 41000-41999        ; the ports they listen on (default: any free port)
    trust_peers = true                ; unpickle what other nodes send (false: plain data only)

Parsed once into a frozen `ClusterSettings`, validated as a whole so a bad
value is reported before anything listens: a name without a listen address
(or the reverse), a non-loopback ``listen`` without ``cluster_key`` (the
link would refuse to start), a seed that is not ``tcp://HOST:PORT``.  The
key file itself is read by `ClusterSettings.load_key`, which applies the
ssh-like permission check of `actors._core.net.keys`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

from actors._core.base.config import Config, ConfigError
from actors._core.net.keys import ClusterKey, load
from actors._core.net.protocol import NetError, is_loopback, parse_tcp
from actors._core.net.tick import DEFAULT_NET_TICKTIME

__all__ = ["SECTION", "ClusterSettings", "parse_port_range", "parse_seeds"]

SECTION = "cluster"
KEYS = (
    "name",
    "listen",
    "cluster_key",
    "seeds",
    "net_ticktime",
    "connect_all",
    "direct",
    "direct_ports",
    "trust_peers",
)

_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,255}$")


def _address(key: str, raw: str) -> str:
    try:
        parse_tcp(raw)
    except NetError:
        raise ConfigError(f"[{SECTION}] {key} = {raw!r} is not tcp://HOST:PORT") from None
    return raw


def parse_port_range(raw: str) -> tuple[int, int]:
    """``"41000-41999"`` (or one port, ``"41000"``): the first and last port, checked."""
    first, dash, last = raw.strip().partition("-")
    try:
        lo, hi = int(first), int(last if dash else first)
    except ValueError:
        raise ConfigError(f"[{SECTION}] direct_ports = {raw!r}: not FIRST-LAST (e.g. 41000-41999)") from None
    if not 1 <= lo <= hi <= 65535:
        raise ConfigError(f"[{SECTION}] direct_ports = {raw!r}: ports go from 1 to 65535, the first not after the last")
    return lo, hi


def parse_seeds(seeds: str | Iterable[str]) -> tuple[str, ...]:
    """Seed addresses from the ini's text (comma- or space-separated) or a list of them."""
    if isinstance(seeds, str):
        return tuple(s for s in re.split(r"[\s,]+", seeds.strip()) if s)
    return tuple(seeds)


@dataclass(frozen=True)
class ClusterSettings:
    """This node's distribution settings; ``name is None`` means not distributed."""

    name: str | None = None
    listen: str | None = None
    cluster_key: str | None = None
    seeds: tuple[str, ...] = ()
    net_ticktime: float = DEFAULT_NET_TICKTIME
    connect_all: bool = True
    #: Host processes (and reply channels) listen on tcp themselves, so a
    #: frame between nodes takes one hop (`actors._core.net.direct`); false
    #: keeps every frame on the node's one listening port.
    direct: bool = True
    #: The first and last tcp port those processes listen on (None: any
    #: free port), so a firewall can open a range rather than every port.
    direct_ports: tuple[int, int] | None = None
    #: Unpickle whatever other nodes send, as this node's own processes'
    #: frames are: any holder of the cluster key may then run code here.
    #: False builds plain data only from other nodes' frames and refuses the
    #: rest (`actors._core.wire.plain`; docs/distribution.md, *Security model*).
    trust_peers: bool = True

    def __post_init__(self) -> None:
        if self.name is not None and not _NAME.match(self.name):
            raise ConfigError(f"[{SECTION}] name = {self.name!r}: use 1-255 letters, digits, '_', '.', '@' or '-'")
        if self.listen is not None:
            _address("listen", self.listen)
        if (self.name is None) != (self.listen is None):
            missing = "listen" if self.listen is None else "name"
            raise ConfigError(f"[{SECTION}] a distributed node needs both name and listen; {missing} is not set")
        if self.listen is not None and self.cluster_key is None and not is_loopback(parse_tcp(self.listen)[0]):
            raise ConfigError(
                f"[{SECTION}] listen = {self.listen!r} is not a loopback address and no cluster_key is set "
                f"(create one with: python -m actors keygen PATH)"
            )
        for seed in self.seeds:
            _address("seeds", seed)
        if self.seeds and self.listen is None:
            raise ConfigError(f"[{SECTION}] seeds are set but this node has no name and listen address")
        tick = self.net_ticktime
        if isinstance(tick, bool) or not isinstance(tick, (int, float)) or not math.isfinite(tick) or tick <= 0:
            raise ConfigError(f"[{SECTION}] net_ticktime = {tick!r} must be a number of seconds > 0")
        object.__setattr__(self, "net_ticktime", float(tick))
        if not isinstance(self.connect_all, bool):
            raise ConfigError(f"[{SECTION}] connect_all = {self.connect_all!r} must be true or false")
        if not isinstance(self.direct, bool):
            raise ConfigError(f"[{SECTION}] direct = {self.direct!r} must be true or false")
        if not isinstance(self.trust_peers, bool):
            raise ConfigError(f"[{SECTION}] trust_peers = {self.trust_peers!r} must be true or false")
        if isinstance(self.direct_ports, str):
            object.__setattr__(self, "direct_ports", parse_port_range(self.direct_ports))
        elif self.direct_ports is not None:
            ports = self.direct_ports
            if not (isinstance(ports, tuple) and len(ports) == 2 and all(type(p) is int for p in ports)):
                raise ConfigError(f"[{SECTION}] direct_ports = {ports!r} must be FIRST-LAST or a (first, last) pair")
            parse_port_range(f"{ports[0]}-{ports[1]}")

    @property
    def distributed(self) -> bool:
        return self.name is not None

    @classmethod
    def from_config(cls, config: Config, **overrides: Any) -> "ClusterSettings":
        """Read ``[cluster]``; an absent section is a node that is not distributed.

        ``overrides`` (keyword arguments of `Node`, options of ``otpy node``)
        replace their keys before the whole is checked, so a section may
        leave out what they give (a shared section without ``name``)."""
        section = config.section(SECTION)
        unknown = sorted(set(section) - set(KEYS))
        if unknown:
            raise ConfigError(f"[{SECTION}] unknown key {unknown[0]!r} (known: {', '.join(KEYS)})")
        values: dict[str, Any] = {}
        for key in ("name", "listen", "cluster_key"):
            text = section.get(key, "").strip()
            if text:
                values[key] = text
        values["seeds"] = parse_seeds(section.get("seeds", ""))
        values["net_ticktime"] = config.get_float(SECTION, "net_ticktime", DEFAULT_NET_TICKTIME)
        values["connect_all"] = config.get_boolean(SECTION, "connect_all", True)
        values["direct"] = config.get_boolean(SECTION, "direct", True)
        values["trust_peers"] = config.get_boolean(SECTION, "trust_peers", True)
        ports = section.get("direct_ports", "").strip()
        if ports:
            values["direct_ports"] = parse_port_range(ports)
        values.update(overrides)
        return cls(**values)

    def load_key(self) -> ClusterKey | None:
        """The cluster key, read and checked now (`KeyFileError` on an unsafe file)."""
        return None if self.cluster_key is None else load(self.cluster_key)
