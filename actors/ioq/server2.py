"""The IOQ2 server actor (`ioq_server2`): a thin GenServer over `Ioq2State`.

One runs per CPU core, registered as ``ioq_server_<N>``.  Callers *call* it
with an `IoqRequest`; it answers later, when the IO is done
(``noreply`` + ``self.reply``), so a slow disk never blocks the server:

1. ``handle_call(request)`` -- an `IoqRequest`, or what `request_payload`
   builds: ``("$ioq2", fd wire form, msg, dimensions, t0)`` (much cheaper
   to encode between processes: no class to look up, the file's ref as its
   wire form, the dimensions as the caller gave them, parsed here through
   the same cache as at the caller), or, when ``msg`` and the dimensions
   are flat tuples of scalars (every read), the same as `actors.plain.PlainData`
   with both as lists and the tag ``"$ioq2f"``: JSON between processes,
   which encodes and decodes in a third of pickle's time; the server makes
   them tuples again -- queues the request (or merges it into an
   identical read) and makes sure a *submit* message is in its own mailbox;
   a request that finds nothing queued, a slot free and nothing else in the
   mailbox would be chosen at once, and is submitted without the heap
   (`Ioq2State.admit`, `Ioq2Server._straight_through`);
2. that message is handled only after everything that arrived before it,
   so the whole burst is queued before anything is chosen -- the seed gets
   the same effect from returning timeout 0.  Only then does the heap have a
   backlog to prioritise;
3. submitting sends ``("$io", ref, self, msg)`` to the file actor and
   monitors the file (once per file, not per request);
4. ``("$io_reply", ref, result)`` answers every waiter of that request;
   ``DOWN`` of a file fails every waiter of its in-flight requests with the
   file's exit reason (`IoFailure` ``"down"``, raised by the caller as
   `IoTargetDown`).

Config changes arrive through a listener on the process's config replica,
which only casts ``update_config`` to the server (listeners run on the I/O
thread and must not block).
"""

from __future__ import annotations

import time
from typing import Any

from actors import ActorRef, noreply
from actors import stats as _stats
from actors.plain import PlainData

from ._queue_server import SUBMIT, UPDATE_CONFIG, QueueServer
from .file_server import IoFailure
from .hqueue import DEFAULT_MAX_SIZE, Full
from .ioq_stats import StatsBuffer
from .request import Completion, IoqRequest, request_dimensions
from .server2_state import Ioq2State

__all__ = [
    "IOQ2_FLAT",
    "IOQ2_REQUEST",
    "Ioq2Server",
    "SUBMIT",
    "UPDATE_CONFIG",
    "flat_dimensions",
    "payload_with",
    "request_payload",
    "wire_payload",
]

#: First element of the plain request tuple (see `request_payload`).
IOQ2_REQUEST = "$ioq2"
#: First element of the same request as `actors.plain.PlainData` (see `wire_payload`).
IOQ2_FLAT = "$ioq2f"
_INT_MIN = -(2**63)
_INT_END = 2**64


def request_payload(fd: ActorRef, msg: Any, dimensions: Any, t0: float | None) -> Any:
    """What a caller sends for IO ``msg`` on ``fd`` with ``dimensions``
    (``(class, shard[, group_id])`` or None): encodes in a few microseconds,
    where a dataclass holding an `ActorRef` costs tens (class lookups)."""
    return wire_payload(fd.to_wire(), msg, dimensions, t0)


def wire_payload(wire: list[Any], msg: Any, dimensions: Any, t0: float | None) -> Any:
    """`request_payload` with the file's wire form at hand (callers cache it)."""
    return payload_with(wire, msg, dimensions, flat_dimensions(dimensions), t0)


def payload_with(wire: list[Any], msg: Any, dimensions: Any, flat: list[Any] | bool | None, t0: float | None) -> Any:
    """`wire_payload` with `flat_dimensions` of ``dimensions`` at hand too."""
    if flat is not False and type(t0) is float and _flat(msg):
        return PlainData((IOQ2_FLAT, wire, list(msg), flat, t0))
    return (IOQ2_REQUEST, wire, msg, dimensions, t0)


def flat_dimensions(dimensions: Any) -> list[Any] | bool | None:
    """``dimensions`` as the list `wire_payload` sends (None for None), or
    False when they are not a flat tuple of scalars."""
    if dimensions is None:
        return None
    try:
        flat = _flat_dimensions.get(dimensions) if type(dimensions) is tuple else False
    except TypeError:  # an unhashable part: not flat either
        return False
    if flat is None:
        flat = _remember_dimensions(dimensions)
    return flat


#: ``dimensions -> their list form, or False`` when they are not `_flat`: a
#: caller sends the same few dimensions over and over.
_flat_dimensions: dict[tuple[Any, ...], list[Any] | bool] = {}
_MAX_FLAT_DIMENSIONS = 10_000


def _remember_dimensions(dimensions: tuple[Any, ...]) -> list[Any] | bool:
    flat = list(dimensions) if _flat(dimensions) else False
    if len(_flat_dimensions) >= _MAX_FLAT_DIMENSIONS:
        _flat_dimensions.clear()
    _flat_dimensions[dimensions] = flat
    return flat


def _flat(value: Any) -> bool:
    """A tuple of scalars that JSON carries unchanged, so it comes back equal as a tuple."""
    if type(value) is not tuple:
        return False
    if len(value) == 2 and type(value[0]) is str:  # ("pread_iolist", position): most requests
        v = value[1]
        if type(v) is int and _INT_MIN <= v < _INT_END:
            return True
    for v in value:
        t = type(v)
        if t is str or v is None or t is bool or (t is int and _INT_MIN <= v < _INT_END):
            continue
        if t is float and v - v == 0.0:  # finite: inf - inf and nan - nan are nan
            continue
        return False
    return True


class Ioq2Server(QueueServer):
    """``ioq_server_<N>``: queue, prioritise and submit IO requests for one core.

    It watches its own mailbox (`QueueServer._watch_drain`): every callback
    ends with `_after_callback`, so a burst is submitted once the mailbox is
    empty without the server sending itself a *submit* message per burst.
    """

    _watch_drain = True

    def init(self, name: str | None = None, server_id: int = 1, max_queue: int = DEFAULT_MAX_SIZE) -> None:
        cfg = self._setup(name)
        self._stats_buffer = StatsBuffer(_stats.current())
        self.state = Ioq2State.from_config(cfg, name, server_id, stats=self._stats_buffer, max_queue=max_queue)
        self._due = self.state.maybe_submit

    def handle_call(self, request: Any, from_: Any) -> Any:
        kind = type(request)
        if (kind is tuple or kind is PlainData or kind is list) and len(request) == 5:
            tag, wire, msg, dimensions, t0 = request
            if tag == IOQ2_FLAT and kind is not tuple:
                msg = tuple(msg)
                if dimensions is not None:
                    dimensions = tuple(dimensions)
            elif tag != IOQ2_REQUEST or kind is not tuple:
                return self._control_call(request)
            try:
                class_, shard, user, db, ddoc = request_dimensions(dimensions)
            except ValueError as exc:
                self._after_callback()
                return IoFailure("error", exc)
            fd = self._fds.get(wire[2])
            if fd is None:
                fd = self._fd_from_wire(wire)
            # positional: fd, msg, key, init_priority, fin_priority, ref, from_, t0, tsub, shard, user, db, class_, ddoc
            request = IoqRequest(fd, msg, None, 1.0, None, None, from_, t0, None, shard, user, db, class_, ddoc)
            if not self._submit_pending and self.state.can_admit():
                return self._straight_through(request, from_)
        elif kind is not IoqRequest:
            return self._control_call(request)
        try:
            self.state.enqueue(request, from_)
        except Full as exc:
            self._after_callback()
            return IoFailure("error", exc)
        self._schedule_submit()
        self._after_callback()
        return noreply

    def _control_call(self, request: Any) -> Any:
        try:
            return self._control(request)
        finally:
            self._after_callback()

    def _straight_through(self, req: IoqRequest, from_: Any) -> Any:
        """A request that finds nothing queued and a slot free, with nothing
        else in the mailbox: it would be queued and chosen at once, so
        `Ioq2State.admit` submits it without the heap and without the
        general submit loop (same priority, same stats, same dedupe).  With
        more messages waiting it is queued, so they are prioritised with it.
        A read done inline here is answered as the call's return value."""
        if not self.mailbox_empty():
            self.state.enqueue(req, from_)
            self._submit_later()
            self._after_callback()
            return noreply
        # Nothing is pending from here on: no `_after_callback` to run.
        answer = noreply
        if self.state.admit(req, from_, time.monotonic()) is not None:
            done = self._submit_one(req)
            if type(done) is Completion:
                waiters = done.waiters
                if len(waiters) == 1 and waiters[0] is from_:
                    answer = done.reply
                else:
                    self._reply_all([done])
        self._bound_stats()
        return answer

    def handle_cast(self, request: Any) -> None:
        try:
            return super().handle_cast(request)
        finally:
            self._after_callback()

    def handle_info(self, message: Any) -> None:
        try:
            return super().handle_info(message)
        finally:
            self._after_callback()

    def _control_extra(self, request: Any) -> Any:
        state = self.state
        if request == "get_pending_reqs":
            return state.pending_requests()
        if request == "get_reqs":
            return state.in_flight()
        if request == "get_state":
            return state.get_state()
        if request == "get_counters":
            return None  # IOQ2 keeps its counters in the stats registry
        raise LookupError(request)
