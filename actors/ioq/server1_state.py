"""IOQ1's logic (the seed's `ioq_server`) as a plain state class, kept for comparison.

IOQ1 is a single server with four top-level channels -- compaction,
internal replication, low, and a round-robin queue of per-customer channels
each holding interactive, db-update and view-update queues.  Choosing the next
request is a two-level lottery (`sort_queues`): the class priorities
(``customer``, ``replication``, ``compaction``, ``low``) weight the draw between
top-level channels, the op priorities (``reads``, ``writes``, ``views``) the draw
inside a customer channel.  Reads of the same block already queued are merged
by scanning the queue, which is part of why IOQ1 is slow under load.

The wrapper actor (registered ``ioq_server``) maps callbacks onto methods:
`enqueue`, `maybe_submit` (on mailbox idle), `complete`, `io_down`,
`update_config`, `get_queue_depths`, `get_concurrency`/`set_concurrency`,
`take_counters` (the seed's periodic ``dump_table``).  Randomness comes in as
an ``rng`` with ``random()``; time as ``now``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from actors.config import Config

from . import ioq_stats
from .ioq_config import check_concurrency
from .request import Completion, IoTargetDown, QueueDepths, dedupe_key, rw

__all__ = [
    "Channel",
    "Ioq1Request",
    "Ioq1Settings",
    "Ioq1State",
    "analyze_priority",
    "channel_name",
    "ioq1_bypassed",
    "ioq1_to_float",
    "make_key",
    "read_ioq1_settings",
    "sort_queues",
    "summarize_counters",
    "timebin",
]

IOQ1_SECTION = "ioq"
IOQ1_BYPASS_SECTION = "ioq.bypass"
DEFAULT_IOQ1_CONCURRENCY = 20
_MIN_PRIORITY = 0.00001


class _Rng(Protocol):
    def random(self) -> float: ...


@dataclass(slots=True)
class Ioq1Request:
    """The seed's IOQ1 ``#request{}``; ``from_`` lists merged callers, newest first."""

    fd: Any = None
    msg: Any = None
    class_: str = "other"
    channel: Any = None
    from_: list[Any] = field(default_factory=list)
    ref: Any = None
    t0: float | None = None
    tsub: float | None = None
    key: Any = None


@dataclass(slots=True)
class Channel:
    """One customer channel: interactive, db-update and view-update queues."""

    name: Any
    qI: deque = field(default_factory=deque)
    qU: deque = field(default_factory=deque)
    qV: deque = field(default_factory=deque)

    def is_empty(self) -> bool:
        return not (self.qI or self.qU or self.qV)


@dataclass(frozen=True, slots=True)
class Ioq1Settings:
    concurrency: int = DEFAULT_IOQ1_CONCURRENCY
    dedupe: bool = True
    #: customer, replication, compaction, low
    class_priorities: tuple[float, float, float, float] = (1.0, 0.001, 0.0001, 0.0001)
    #: reads, writes, views
    op_priorities: tuple[float, float, float] = (1.0, 1.0, 1.0)


def ioq1_to_float(value: Any) -> float:
    """IOQ1's lenient priority parse: zero becomes 0.00001 so no channel loses
    its lottery ticket entirely; unparseable values become 0.5."""
    if not isinstance(value, str):
        return 0.5
    try:
        f = float(value)
    except ValueError:
        return 0.5
    if not math.isfinite(f):
        return 0.5
    return f if f > 0.0 else _MIN_PRIORITY


def read_ioq1_settings(config: Config) -> Ioq1Settings:
    """The seed's IOQ1 ``update_config``: ``[ioq]`` concurrency, dedupe and priorities."""
    try:
        concurrency = int(str(config.get(IOQ1_SECTION, "concurrency", "20")).strip())
    except ValueError:
        concurrency = DEFAULT_IOQ1_CONCURRENCY
    if concurrency < 1:
        concurrency = DEFAULT_IOQ1_CONCURRENCY
    g = config.get
    return Ioq1Settings(
        concurrency=concurrency,
        dedupe=g(IOQ1_SECTION, "dedupe", "true") == "true",
        class_priorities=(
            ioq1_to_float(g(IOQ1_SECTION, "customer", "1.0")),
            ioq1_to_float(g(IOQ1_SECTION, "replication", "0.001")),
            ioq1_to_float(g(IOQ1_SECTION, "compaction", "0.0001")),
            ioq1_to_float(g(IOQ1_SECTION, "low", "0.0001")),
        ),
        op_priorities=(
            ioq1_to_float(g(IOQ1_SECTION, "reads", "1.0")),
            ioq1_to_float(g(IOQ1_SECTION, "writes", "1.0")),
            ioq1_to_float(g(IOQ1_SECTION, "views", "1.0")),
        ),
    )


def ioq1_bypassed(config: Config, class_: str) -> bool:
    """``[ioq.bypass] <class> = true`` sends that class straight to its target."""
    return config.get(IOQ1_BYPASS_SECTION, class_) == "true"


# -- classifying -------------------------------------------------------------


def channel_name(shard: Any, custom: Mapping[tuple[Any, Any], Any] | None = None) -> Any:
    """The customer channel of a shard: the account, unless a custom channel is set."""
    if not isinstance(shard, str):
        return "other"
    custom = custom or {}
    parts = shard.split("/")
    n = len(parts)
    if n < 3 or parts[0] != "shards":
        return "other"
    if n >= 4 and parts[2] == "heroku":
        return f"{parts[3]}.heroku"
    if n == 3:
        return custom.get(("other", parts[2]), "other")
    if n == 4:
        return custom.get((parts[2], parts[3]), parts[2])
    return custom.get((parts[2], "/".join(parts[3:])), parts[2])


def analyze_priority(priority: Any, custom: Mapping[tuple[Any, Any], Any] | None = None) -> tuple[str, Any]:
    """``(class, channel)`` from IOQ1 dimensions; background classes have no channel."""
    if type(priority) in (tuple, list) and priority:
        class_ = priority[0]
        n = len(priority)
        if n == 2 and class_ in ("interactive", "db_update"):
            return class_, channel_name(priority[1], custom)
        if n == 3 and class_ == "view_update":
            return class_, channel_name(priority[1], custom)
        if (n == 2 and class_ in ("db_compact", "internal_repl", "low")) or (n == 3 and class_ == "view_compact"):
            return class_, None
    return "other", "other"


# -- the lottery -------------------------------------------------------------


def sort_queues(queues_and_priorities: Sequence[tuple[Any, float]], normalization: float, choice: float) -> list[Any]:
    """Order queues for one draw: walk the cumulative priorities and take the
    first queue whose share reaches ``choice``; repeat on what remains with the
    same ``choice``.  Earlier queues get tried first, so a high-priority queue
    is usually served but every non-empty queue keeps a chance."""
    rest = list(queues_and_priorities)
    norm = normalization
    skipped: list[tuple[Any, float]] = []
    acc: list[Any] = []
    x = 0.0
    while rest:
        q, pri = rest[0]
        if len(rest) == 1:
            acc.append(q)
            if not skipped:
                return acc
            norm -= pri
            rest, skipped, x = skipped, [], 0.0
            continue
        if norm > 0 and choice < (x + pri) / norm:
            acc.append(q)
            rest = skipped + rest[1:]
            skipped, x = [], 0.0
            norm -= pri
        else:
            skipped.append((q, pri))
            x += pri
            rest = rest[1:]
    return acc


# -- stats helpers -----------------------------------------------------------


def timebin(micros: float) -> int:
    """IOQ1's logarithmic histogram bin: ``trunc(10 * log10(us))`` (1 us minimum)."""
    return math.trunc(10 * math.log10(max(micros, 1.0)))


def make_key(class_: str, msg: Any) -> str:
    """The IOQ1 histogram bucket of a request."""
    if class_ in ("db_compact", "view_compact"):
        return "compaction"
    if class_ == "internal_repl":
        return "replication"
    if class_ == "low":
        return "low"
    if class_ == "view_update":
        return "views"
    if class_ == "db_update":
        return "writes"
    if class_ == "interactive":
        kind = rw(msg)
        if kind in ("reads", "writes"):
            return kind
    return "other"


def summarize_counters(counters: Mapping[tuple[Any, str, str], int]) -> dict[Any, list[int]]:
    """Per-channel ``[reads, writes, views]`` from ``(channel, class, rw)`` counts
    (the seed's ``table_fold`` for the periodic stats document); the ``other``
    channel is left out."""
    out: dict[Any, list[int]] = {}
    for (chan, class_, kind), n in counters.items():
        if chan == "other" or chan is None:
            continue
        if class_ == "interactive" and kind == "reads":
            slot = 0
        elif (class_ == "interactive" and kind == "writes") or (class_ == "db_update" and kind in ("reads", "writes")):
            slot = 1
        elif class_ == "view_update" and kind in ("reads", "writes"):
            slot = 2
        else:
            continue
        counts = out.setdefault(chan, [0, 0, 0])
        counts[slot] += n
    return out


# -- the server --------------------------------------------------------------

_COMPACTION = frozenset({"db_compact", "view_compact"})


class Ioq1State:
    """Channels, in-flight requests and counters of the IOQ1 server."""

    def __init__(
        self,
        settings: Ioq1Settings | None = None,
        *,
        stats: Any = None,
        custom_channels: Mapping[tuple[Any, Any], Any] | None = None,
    ) -> None:
        self.channels: dict[Any, Channel] = {}
        self.qC: deque[Ioq1Request] = deque()
        self.qR: deque[Ioq1Request] = deque()
        self.qL: deque[Ioq1Request] = deque()
        self.reqs: dict[Any, Ioq1Request] = {}
        self.counters: dict[tuple[Any, str, str], int] = {}
        self.histos: dict[tuple[Any, str, int], int] = {}
        self.custom_channels: dict[tuple[Any, Any], Any] = dict(custom_channels or {})
        self.stats = stats
        self._next_ref = 0
        self.apply_settings(settings or Ioq1Settings())

    @classmethod
    def from_config(cls, config: Config, *, stats: Any = None) -> "Ioq1State":
        return cls(read_ioq1_settings(config), stats=stats)

    def apply_settings(self, settings: Ioq1Settings) -> None:
        self.settings = settings
        self.concurrency = settings.concurrency
        self.dedupe = settings.dedupe
        self.class_priorities = settings.class_priorities
        self.op_priorities = settings.op_priorities

    def update_config(self, config: Config) -> None:
        self.apply_settings(read_ioq1_settings(config))

    def get_concurrency(self) -> int:
        return self.concurrency

    def set_concurrency(self, value: int) -> int:
        """Returns the old concurrency; rejects anything but an integer >= 1."""
        new = check_concurrency(value)
        old, self.concurrency = self.concurrency, new
        return old

    # -- custom channels (the seed's ioq_kv) ---------------------------------

    def add_channel(self, account: Any, db_name: Any, name: Any) -> None:
        """Give one database its own channel instead of sharing its account's."""
        self.custom_channels[(account, db_name)] = name

    def rem_channel(self, account: Any, db_name: Any) -> None:
        self.custom_channels.pop((account, db_name), None)

    def list_custom_channels(self) -> list[tuple[tuple[Any, Any], Any]]:
        return list(self.custom_channels.items())

    # -- queueing ------------------------------------------------------------

    def make_request(self, fd: Any, msg: Any, priority: Any, t0: float | None) -> Ioq1Request:
        class_, chan = analyze_priority(priority, self.custom_channels)
        return Ioq1Request(fd=fd, msg=msg, class_=class_, channel=chan, t0=t0)

    def enqueue(self, req: Ioq1Request, from_: Any) -> bool:
        """Queue a caller's request; False when it merged into an identical queued read."""
        req.from_ = [from_]
        req.key = dedupe_key(req.fd, req.msg) if self.dedupe else None
        class_ = req.class_
        if class_ in _COMPACTION:
            return self._update_queue(req, self.qC)
        if class_ == "internal_repl":
            return self._update_queue(req, self.qR)
        if class_ == "low":
            return self._update_queue(req, self.qL)
        chan = self.channels.get(req.channel)
        if chan is None:
            chan = self.channels[req.channel] = Channel(req.channel)
        if class_ == "view_update":
            return self._update_queue(req, chan.qV)
        if class_ == "db_update":
            return self._update_queue(req, chan.qU)
        return self._update_queue(req, chan.qI)

    def _update_queue(self, req: Ioq1Request, q: deque) -> bool:
        key = req.key
        if key is not None:
            for queued in q:  # IOQ1 scans the queue: O(n) per read
                if queued.key == key:
                    ioq_stats.record_ioq1_merged(self.stats)
                    queued.from_[0:0] = req.from_
                    return False
        q.append(req)
        return True

    # -- submitting ----------------------------------------------------------

    def maybe_submit(self, now: float, rng: _Rng) -> list[Ioq1Request]:
        """Draw requests up to the concurrency; each returned request has ``ref`` set."""
        out: list[Ioq1Request] = []
        while len(self.reqs) < self.concurrency:
            req = self.make_next_request(now, rng)
            if req is None:
                break
            out.append(req)
        return out

    def make_next_request(self, now: float, rng: _Rng) -> Ioq1Request | None:
        p = self.class_priorities
        order = sort_queues(list(enumerate(p)), sum(p), rng.random())
        for i in order:
            if i == 0:
                if not self.channels:
                    continue
                name = next(iter(self.channels))
                chan = self.channels.pop(name)
                op = self.op_priorities
                sub = sort_queues(list(enumerate(op)), sum(op), rng.random())
                queues = (chan.qI, chan.qU, chan.qV)
                req = None
                for j in sub:
                    if queues[j]:
                        req = queues[j].popleft()
                        break
                if not chan.is_empty():
                    self.channels[name] = chan
                if req is None:
                    continue
                return self.submit(req, now)
            q = (None, self.qR, self.qC, self.qL)[i]
            if q:
                return self.submit(q.popleft(), now)
        return None

    def submit(self, req: Ioq1Request, now: float) -> Ioq1Request:
        self._next_ref += 1
        req.ref = self._next_ref
        req.tsub = now
        self.reqs[req.ref] = req
        kind = rw(req.msg)
        if self.stats is not None:
            latency = 0.0 if req.t0 is None else (now - req.t0) * 1000.0
            ioq_stats.record_ioq1_submitted(self.stats, req.class_, kind, latency)
        ckey = (req.channel, req.class_, kind)
        self.counters[ckey] = self.counters.get(ckey, 0) + 1
        return req

    # -- completing ----------------------------------------------------------

    def complete(self, ref: Any, reply: Any, now: float) -> Completion | None:
        req = self.reqs.pop(ref, None)
        if req is None:
            return None
        self._update_histograms(req, now)
        return Completion(req, list(req.from_), reply)

    def io_down(self, ref: Any, reason: Any) -> Completion | None:
        req = self.reqs.pop(ref, None)
        if req is None:
            return None
        return Completion(req, list(req.from_), None, IoTargetDown(reason))

    def fd_down(self, fd: Any, reason: Any) -> list[Completion]:
        refs = [ref for ref, req in self.reqs.items() if req.fd == fd]
        return [c for c in (self.io_down(ref, reason) for ref in refs) if c is not None]

    def fail_all(self, reason: Any) -> list[Completion]:
        """Stopping: fail every queued and in-flight caller with ``reason``."""
        out = [c for c in (self.io_down(ref, reason) for ref in list(self.reqs)) if c is not None]
        queued: list[Ioq1Request] = [*self.qC, *self.qR, *self.qL]
        for chan in self.channels.values():
            queued.extend((*chan.qI, *chan.qU, *chan.qV))
        self.qC.clear()
        self.qR.clear()
        self.qL.clear()
        self.channels.clear()
        out.extend(Completion(r, list(r.from_), None, IoTargetDown(reason)) for r in queued)
        return out

    def _update_histograms(self, req: Ioq1Request, now: float) -> None:
        tsub = req.tsub if req.tsub is not None else now
        t0 = req.t0 if req.t0 is not None else tsub
        d1 = (tsub - t0) * 1e6
        d2 = (now - tsub) * 1e6
        bins = (("submit_delay", timebin(d1)), ("svctm", timebin(d2)), ("iowait", timebin(d1 + d2)))
        h = self.histos
        keys = [make_key(req.class_, req.msg)]
        if req.channel is not None:
            keys.append(req.channel)
        for k in keys:
            for metric, b in bins:
                hk = (k, metric, b)
                h[hk] = h.get(hk, 0) + 1

    # -- introspection -------------------------------------------------------

    def get_queue_depths(self) -> QueueDepths:
        return {
            "compaction": len(self.qC),
            "replication": len(self.qR),
            "low": len(self.qL),
            "channels": {ch.name: [len(ch.qI), len(ch.qU), len(ch.qV)] for ch in self.channels.values()},
        }

    def get_counters(self) -> dict[tuple[Any, str, str], int]:
        return dict(self.counters)

    def take_counters(self) -> dict[tuple[Any, str, str], int]:
        """Hand over the counters and start afresh (the seed's periodic ``dump_table``)."""
        counters, self.counters = self.counters, {}
        return counters

    def reset_histos(self) -> None:
        self.histos.clear()

    def in_flight(self) -> list[tuple[Any, Ioq1Request]]:
        return list(self.reqs.items())

    def queued(self) -> Iterable[Ioq1Request]:
        yield from self.qC
        yield from self.qR
        yield from self.qL
        for chan in self.channels.values():
            yield from chan.qI
            yield from chan.qU
            yield from chan.qV
