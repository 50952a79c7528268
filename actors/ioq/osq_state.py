"""The OS-process queue (the seed's `ioq_osq`) as a plain state class.

Requests to external OS processes (view servers: ``{prompt, _}`` and
``{data, _}`` messages) are limited per account rather than prioritised:
each account has a channel, channels are served round-robin, and an account
may have at most ``max`` requests running (``min`` once the node-wide
``global_max`` is reached), so one busy account cannot take every OS process.

Two kinds of request exist.  An ``rlimit`` request is a permit: the server
grants it by replying a ref to the caller, who then talks to its OS process
directly and hands the permit back with `release` when done (the seed's
`ioq_osq:call`).  A ``call`` request is forwarded to ``fd`` by the server and
answered through `complete`.  Every method returns the submissions the wrapper
must carry out (`OsqSubmission`): grant the permit or forward the call, and
watch the caller (rlimit) or the target (call) for death.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from actors.config import Config

from . import ioq_stats
from .request import Completion, IoTargetDown

__all__ = ["OsqRequest", "OsqState", "OsqSubmission", "osq_channel_name"]

OSQ_SECTION = "osq"


def osq_channel_name(shard: Any) -> str:
    """The account a shard belongs to (``<app>.heroku`` for heroku apps), else ``other``."""
    if not isinstance(shard, str):
        return "other"
    parts = shard.split("/")
    if len(parts) >= 4 and parts[0] == "shards" and parts[2] == "heroku":
        return f"{parts[3]}.heroku"
    if len(parts) >= 3 and parts[0] == "shards":
        return parts[2]
    return "other"


@dataclass(slots=True)
class OsqRequest:
    """``kind`` is ``"rlimit"`` (a permit) or ``"call"`` (forward ``msg`` to ``fd``)."""

    kind: str
    priority: Any = None
    t0: float | None = None
    from_: Any = None
    fd: Any = None
    msg: Any = None

    @property
    def io_class(self) -> Any:
        p = self.priority
        return p[0] if type(p) in (tuple, list) and p else p

    @property
    def channel(self) -> str:
        p = self.priority
        if type(p) in (tuple, list):
            if len(p) == 2 and p[0] == "interactive":
                return osq_channel_name(p[1])
            if len(p) == 3 and p[0] == "view_update":
                return osq_channel_name(p[1])
        return "other"


@dataclass(slots=True)
class OsqSubmission:
    """Carry out one request: for ``rlimit`` reply ``ref`` to ``request.from_`` and
    watch the caller; for ``call`` send ``request.msg`` to ``request.fd`` and watch it."""

    ref: int
    channel: str
    request: OsqRequest


@dataclass(slots=True)
class _Channel:
    name: str
    q: deque = field(default_factory=deque)


def _threshold(config: Config, name: str, default: int) -> int:
    try:
        value = int(str(config.get(OSQ_SECTION, name)).strip())
    except (TypeError, ValueError):
        return default
    return value if value > 0 else default


def _check_threshold(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be an integer >= 1, got {value!r}")
    return value


class OsqState:
    """Per-account limits on requests to OS processes."""

    def __init__(self, minimum: int = 2, maximum: int = 6, global_maximum: int = 15, *, stats: Any = None) -> None:
        self.min = _check_threshold(minimum, "minimum")
        self.max = _check_threshold(maximum, "maximum")
        self.global_max = _check_threshold(global_maximum, "global_maximum")
        self.channels: deque[_Channel] = deque()
        #: ref -> (channel, request)
        self.reqs: dict[int, tuple[str, OsqRequest]] = {}
        self._running: dict[str, int] = {}
        self.counters: dict[tuple[str, Any, str], int] = {}
        self.stats = stats
        self._next_ref = 0

    @classmethod
    def from_config(cls, config: Config, *, stats: Any = None) -> "OsqState":
        """Thresholds from ``[osq] minimum / maximum / global_maximum``."""
        return cls(
            _threshold(config, "minimum", 2),
            _threshold(config, "maximum", 6),
            _threshold(config, "global_maximum", 15),
            stats=stats,
        )

    def set_minimum(self, value: int) -> None:
        self.min = _check_threshold(value, "minimum")

    def set_maximum(self, value: int) -> None:
        self.max = _check_threshold(value, "maximum")

    def set_global_maximum(self, value: int) -> None:
        self.global_max = _check_threshold(value, "global_maximum")

    # -- queueing --------------------------------------------------------

    def enqueue(self, req: OsqRequest, now: float) -> list[OsqSubmission]:
        """Queue a request in its account's channel, then maybe start one."""
        if req.kind not in ("rlimit", "call"):
            raise ValueError(f"osq request kind must be 'rlimit' or 'call', got {req.kind!r}")
        name = req.channel
        for chan in self.channels:
            if chan.name == name:
                chan.q.append(req)
                break
        else:
            self.channels.append(_Channel(name, deque([req])))
        threshold = self.max if len(self.reqs) < self.global_max else self.min
        return self._make_next_request(threshold, now)

    def _make_next_request(self, threshold: int, now: float) -> list[OsqSubmission]:
        channels = self.channels
        running = self._running
        blocked: list[_Channel] = []
        chosen = None
        while channels:
            chan = channels.popleft()
            if running.get(chan.name, 0) >= threshold:
                blocked.append(chan)
                continue
            chosen = chan
            break
        # channels after the chosen one keep their order; blocked ones go behind them
        channels.extend(blocked)
        if chosen is None:
            return []
        req = chosen.q.popleft()
        if chosen.q:
            channels.append(chosen)
        return [self._submit(chosen.name, req, now)]

    def _submit(self, channel: str, req: OsqRequest, now: float) -> OsqSubmission:
        self._next_ref += 1
        ref = self._next_ref
        self.reqs[ref] = (channel, req)
        self._running[channel] = self._running.get(channel, 0) + 1
        io_class = req.io_class
        latency = 0.0 if req.t0 is None else (now - req.t0) * 1000.0
        # the seed records a request without dimensions under its class `undefined`
        stat_class = "undefined" if io_class is None else str(io_class)
        ioq_stats.record_osq_submitted(self.stats, stat_class, latency)
        key = (channel, io_class, "osproc")
        self.counters[key] = self.counters.get(key, 0) + 1
        return OsqSubmission(ref, channel, req)

    def _finish(self, ref: int) -> tuple[str, OsqRequest] | None:
        entry = self.reqs.pop(ref, None)
        if entry is not None:
            channel = entry[0]
            left = self._running[channel] - 1
            if left:
                self._running[channel] = left
            else:
                del self._running[channel]
        return entry

    # -- completing ------------------------------------------------------

    def complete(self, ref: int, reply: Any, now: float) -> tuple[Completion | None, list[OsqSubmission]]:
        """A forwarded call answered, or a permit came back; starts the next request."""
        entry = self._finish(ref)
        if entry is None:
            return None, []
        _channel, req = entry
        done = None if req.kind == "rlimit" else Completion(req, [req.from_], reply)
        return done, self._make_next_request(self.max, now)

    def release(self, ref: int, now: float) -> list[OsqSubmission]:
        """The holder of permit ``ref`` is done with its OS process."""
        return self.complete(ref, None, now)[1]

    def down(self, ref: int, reason: Any, now: float) -> tuple[Completion | None, list[OsqSubmission]]:
        """The target of a call (or the holder of a permit) died."""
        entry = self._finish(ref)
        if entry is None:
            return None, []
        _channel, req = entry
        done = None if req.kind == "rlimit" else Completion(req, [req.from_], None, IoTargetDown(reason))
        return done, self._make_next_request(self.max, now)

    # -- introspection ---------------------------------------------------

    def get_queue_depths(self) -> list[tuple[str, int]]:
        return [(chan.name, len(chan.q)) for chan in self.channels]

    def get_requests(self) -> list[tuple[str, Any, int]]:
        """``(channel, from_ or "notify", ref)`` of every running request."""
        return [(chan, "notify" if req.kind == "rlimit" else req.from_, ref) for ref, (chan, req) in self.reqs.items()]
