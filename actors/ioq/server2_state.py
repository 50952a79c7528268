"""One IOQ2 server's logic (the seed's `ioq_server2`) as a plain state class.

An IOQ2 server owns a max-priority heap of queued requests, the requests it
has submitted to their IO targets, and the callers waiting on each.  The
actor that wraps it (one per CPU core, ``ioq_server_1`` ... ``ioq_server_N``)
does only the messaging; each callback maps onto one method here:

=====================================  ======================================
seed callback                          method
=====================================  ======================================
``handle_call(#ioq_request{})``        `enqueue` (then `maybe_submit`)
``handle_info(timeout)``               `maybe_submit` -> requests to send
``handle_info({Ref, Reply})``          `complete` -> `Completion`
``handle_info({'DOWN', Ref, ...})``    `io_down` / `fd_down` -> `Completion`
``handle_cast(update_config)``         `update_config`
``get_state`` / ``get_pending_reqs``   `get_state` / `pending_requests`
``get_concurrency`` / ``set_...``      `get_concurrency` / `set_concurrency`
=====================================  ======================================

The seed returns timeout 0 from every callback so it submits only once its
mailbox is drained; queueing a whole burst before choosing is what gives the
heap a backlog to prioritise.  The wrapper should likewise call
`maybe_submit` when it has no more messages waiting (or after each message
if it cannot tell).

Time comes in as ``now`` (seconds from a shared monotonic clock, the same one
callers stamp ``t0`` with); nothing here reads a clock or does IO.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from actors.config import Config

from . import ioq_stats
from .dispatch import server_name as _server_name
from .hqueue import DEFAULT_MAX_SIZE, HQueue
from .ioq_config import Ioq2Settings, check_concurrency, read_settings
from .ioq_priorities import prioritize
from .ioq_stats import Recorder, StatsBuffer
from .request import (
    Completion,
    IoqRequest,
    IoTargetDown,
    QueueDepths,
    dedupe_key,
    get_queue_depths,
    rw,
)

__all__ = ["Ioq2State", "check_concurrency", "total_concurrency"]


class Ioq2State:
    """Queue, in-flight requests and waiters of one IOQ2 server."""

    def __init__(
        self,
        server_name: str | None = None,
        server_id: int = 1,
        settings: Ioq2Settings | None = None,
        *,
        stats: Recorder | None = None,
        max_queue: int = DEFAULT_MAX_SIZE,
    ) -> None:
        self.server_name = server_name or _server_name(server_id)
        self.scheduler_id = server_id
        self.queue: HQueue[IoqRequest] = HQueue(max_queue)
        self.reqs: dict[Any, IoqRequest] = {}
        self.waiters: dict[Any, list[Any]] = {}
        self.iterations = 0
        self.next_key = 1
        self._next_ref = 0
        self.stats = stats
        self.apply_settings(settings or Ioq2Settings())

    @classmethod
    def from_config(
        cls,
        config: Config,
        server_name: str | None = None,
        server_id: int = 1,
        *,
        stats: Recorder | None = None,
        max_queue: int = DEFAULT_MAX_SIZE,
    ) -> "Ioq2State":
        """The seed's ``init/1``: an empty server configured from ``config``."""
        return cls(server_name, server_id, read_settings(config), stats=stats, max_queue=max_queue)

    # -- configuration -----------------------------------------------------

    def apply_settings(self, settings: Ioq2Settings) -> None:
        self.settings = settings
        self.concurrency = settings.concurrency
        self.resize_limit = settings.resize_limit
        self.dedupe = settings.dedupe
        self.scale_factor = settings.scale_factor
        self.max_priority = settings.max_priority
        self.class_p = settings.class_p
        self.user_p = settings.user_p
        self.shard_p = settings.shard_p

    def update_config(self, config: Config) -> None:
        """Re-read every setting (the seed's ``update_config`` cast); queued work stays."""
        self.apply_settings(read_settings(config))

    def get_concurrency(self) -> int:
        return self.concurrency

    def set_concurrency(self, value: int) -> int:
        """Set this server's concurrency; returns the old value."""
        new = check_concurrency(value)
        old, self.concurrency = self.concurrency, new
        return old

    # -- queueing ------------------------------------------------------------

    def prioritize_request(self, req: IoqRequest) -> float:
        """The request's multiplicative priority, clamped to ``[0, max_priority]``."""
        priority = prioritize(req, self.class_p, self.user_p, self.shard_p)
        if priority < 0.0:
            return 0.0
        if priority > self.max_priority:
            return self.max_priority
        return priority

    def waiter_key(self, req: IoqRequest) -> Any:
        """Identical reads share a key when dedupe is on; anything else gets a fresh one."""
        if self.dedupe:
            key = dedupe_key(req.fd, req.msg)
            if key is not None:
                return key
        key = self.next_key
        self.next_key = key + 1
        return key

    def enqueue(self, req: IoqRequest, from_: Any) -> bool:
        """Queue a caller's request; True if queued, False if merged into an identical read.

        Raises `actors.ioq.hqueue.Full` when the queue is at its bound; the
        caller should then be failed with that error.
        """
        priority = self._take_in(req, from_)
        if priority is None:
            return False
        self.queue.insert(priority, req)
        self.waiters[req.key] = [from_]
        return True

    def admit(self, req: IoqRequest, from_: Any, now: float) -> IoqRequest | None:
        """`enqueue` then `maybe_submit`, for a request that finds the queue
        empty and a slot free (check `can_admit` first): the request comes
        back submitted, as `extract_max` would have handed it straight back,
        with the same priority and the same stats; None when it joined an
        identical read in flight.  The heap is not touched."""
        priority = self._take_in(req, from_)
        if priority is None:
            return None
        self.waiters[req.key] = [from_]
        req.fin_priority = priority
        return self.submit(req, now)

    def can_admit(self) -> bool:
        """Whether a request arriving now would be submitted at once: nothing queued, a slot free."""
        return not self.queue and len(self.reqs) < self.concurrency

    def _take_in(self, req: IoqRequest, from_: Any) -> float | None:
        """Count a caller's request in and key it; its priority (the caller
        then registers it as the first waiter of its key), or None when it
        was merged into an identical read (queued or in flight)."""
        req.from_ = from_
        msg = req.msg
        key = dedupe_key(req.fd, msg) if self.dedupe else None
        if key is None:
            key = self.next_key
            self.next_key = key + 1
        stats = self.stats
        if type(stats) is StatsBuffer:  # a server's buffer: one call for the records
            stats.queued(rw(msg))
        elif stats is not None:
            ioq_stats.record_queued(stats, rw(msg))
        waiters = self.waiters
        waiting = waiters.get(key)
        if waiting is None:
            priority = prioritize(req, self.class_p, self.user_p, self.shard_p)
            if priority < 0.0:
                priority = 0.0
            elif priority > self.max_priority:
                priority = self.max_priority
            req.key = key
            req.init_priority = priority
            return priority
        if stats is not None:
            ioq_stats.record_merged(stats)
        waiting.insert(0, from_)
        return None

    # -- submitting --------------------------------------------------------

    def maybe_submit(self, now: float) -> list[IoqRequest]:
        """Take requests off the queue up to the concurrency; returns them to be sent.

        Each returned request has ``ref`` set: send ``req.msg`` to ``req.fd``,
        watch the target, and report the outcome with that ref.
        """
        reqs = self.reqs
        queue = self.queue
        limit = self.concurrency
        if len(reqs) >= limit or not queue:
            return []
        out: list[IoqRequest] = []
        submit = self.submit
        extract_max = queue.extract_max
        for _ in range(min(limit - len(reqs), len(queue))):
            priority, req = extract_max()
            req.fin_priority = priority
            out.append(submit(req, now))
        return out

    def make_next_request(self, now: float) -> IoqRequest | None:
        """Submit the highest-priority queued request, if any."""
        if self.queue.is_empty():
            return None
        priority, req = self.queue.extract_max()
        req.fin_priority = priority
        return self.submit(req, now)

    def submit(self, req: IoqRequest, now: float) -> IoqRequest:
        """Record ``req`` as in flight; every ``resize_limit`` submissions first
        scale the still-queued priorities up by ``scale_factor`` (the elevator
        that keeps low priorities from starving; zero stays zero)."""
        if self.iterations >= self.resize_limit:
            self.queue.scale_by(self.scale_factor)
            self.iterations = 0
        self._next_ref += 1
        ref = self._next_ref
        req.ref = ref
        req.tsub = now
        self.reqs[ref] = req
        self.iterations += 1
        stats = self.stats
        if stats is not None:
            t0 = req.t0
            delay = 0.0 if t0 is None else (now - t0) * 1000.0
            if type(stats) is StatsBuffer:
                stats.submitted(req.class_, rw(req.msg), delay)
            else:
                ioq_stats.record_submitted(stats, req.class_, rw(req.msg), delay)
        return req

    # -- completing --------------------------------------------------------

    def _take_waiters(self, req: IoqRequest) -> list[Any]:
        return self.waiters.pop(req.key, [])

    def complete(self, ref: Any, reply: Any, now: float) -> Completion | None:
        """The target answered ``ref``: who to reply to; None for an unknown ref."""
        req = self.reqs.pop(ref, None)
        if req is None:
            return None
        stats = self.stats
        if stats is not None:
            tsub = req.tsub if req.tsub is not None else now
            t0 = req.t0 if req.t0 is not None else tsub
            if type(stats) is StatsBuffer:
                stats.completed((now - tsub) * 1000.0, (now - t0) * 1000.0)
            else:
                ioq_stats.record_completed(stats, (now - tsub) * 1000.0, (now - t0) * 1000.0)
        return Completion(req, self.waiters.pop(req.key, []), reply)

    def io_down(self, ref: Any, reason: Any) -> Completion | None:
        """The target of ``ref`` died: its waiters fail with ``reason``."""
        req = self.reqs.pop(ref, None)
        if req is None:
            return None
        ioq_stats.record_io_error(self.stats)
        return Completion(req, self._take_waiters(req), None, IoTargetDown(reason))

    def fd_down(self, fd: Any, reason: Any) -> list[Completion]:
        """Target ``fd`` died: fail every request in flight to it."""
        refs = [ref for ref, req in self.reqs.items() if req.fd == fd]
        return [c for c in (self.io_down(ref, reason) for ref in refs) if c is not None]

    def fail_all(self, reason: Any) -> list[Completion]:
        """The server is stopping: every queued and in-flight caller fails with ``reason``."""
        out = [self.io_down(ref, reason) for ref in list(self.reqs)]
        for _priority, req in self.queue.clear():
            out.append(Completion(req, self._take_waiters(req), None, IoTargetDown(reason)))
        return [c for c in out if c is not None]

    # -- introspection -----------------------------------------------------

    def pending_requests(self) -> list[tuple[float, IoqRequest]]:
        """Queued ``(priority, request)`` pairs, highest first (``get_pending_reqs``)."""
        return self.queue.to_list()

    def in_flight(self) -> list[tuple[Any, IoqRequest]]:
        """Submitted ``(ref, request)`` pairs (``get_reqs``)."""
        return list(self.reqs.items())

    def get_queue_depths(self) -> QueueDepths:
        return get_queue_depths(req for _p, req in self.queue.to_list())

    def get_state(self) -> dict[str, Any]:
        """A plain-data picture of the server, like the seed's ``get_state``."""
        return {
            "reqs": list(self.reqs.items()),
            "waiters": [(k, list(v)) for k, v in self.waiters.items()],
            "queue": self.queue.to_list(),
            "concurrency": self.concurrency,
            "iterations": self.iterations,
            "class_p": list(self.class_p.items()),
            "user_p": list(self.user_p.items()),
            "shard_p": list(self.shard_p.items()),
            "scale_factor": self.scale_factor,
            "dedupe": self.dedupe,
            "resize_limit": self.resize_limit,
            "next_key": self.next_key,
            "server_name": self.server_name,
            "scheduler_id": self.scheduler_id,
            "max_priority": self.max_priority,
        }


def total_concurrency(values: Iterable[int]) -> int:
    """The node's IOQ2 concurrency: the sum over servers (it is multiplicative)."""
    return sum(values)
