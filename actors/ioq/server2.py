"""The IOQ2 server actor (`ioq_server2`): a thin GenServer over `Ioq2State`.

One runs per CPU core, registered as ``ioq_server_<N>``.  Callers *call* it
with an `IoqRequest`; it answers later, when the IO is done
(``noreply`` + ``self.reply``), so a slow disk never blocks the server:

1. ``handle_call(request)`` -- an `IoqRequest`, or the same fields as the
   plain tuple `request_payload` builds (much cheaper to encode between
   processes: no class to look up, the file's ref as its wire form) -- queues the request (or merges it into an
   identical read) and makes sure a *submit* message is in its own mailbox;
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

from actors import ActorRef, GenServer, noreply
from actors import config as _config
from actors import stats as _stats

from ._names import register_self
from .file_server import IO_MSG, IO_REPLY, IoFailure
from .hqueue import DEFAULT_MAX_SIZE, Full
from .ioq_config import affects_ioq
from .request import Completion, IoqRequest
from .server2_state import Ioq2State

__all__ = ["IOQ2_REQUEST", "Ioq2Server", "SUBMIT", "UPDATE_CONFIG", "request_payload"]

#: First element of the plain request tuple (see `request_payload`).
IOQ2_REQUEST = "$ioq2"
_MAX_FD_CACHE = 10_000

#: The message a server sends itself so it submits once its mailbox is drained.
SUBMIT = "$ioq_submit"
#: Cast by the config listener (and by anyone wanting a re-read).
UPDATE_CONFIG = "update_config"


def request_payload(req: IoqRequest) -> tuple[Any, ...]:
    """``req`` as the plain tuple a caller sends: encodes in a few microseconds,
    where a dataclass holding an `ActorRef` costs tens (class lookups)."""
    return (IOQ2_REQUEST, req.fd.to_wire(), req.msg, req.class_, req.shard, req.user, req.db, req.ddoc, req.t0)


class Ioq2Server(GenServer):
    """``ioq_server_<N>``: queue, prioritise and submit IO requests for one core."""

    def init(self, name: str | None = None, server_id: int = 1, max_queue: int = DEFAULT_MAX_SIZE) -> None:
        if name is not None:
            register_self(self, name)
        cfg = _config.current()
        self.state = Ioq2State.from_config(cfg, name, server_id, stats=_stats.current(), max_queue=max_queue)
        self._submit_pending = False
        self._fd_monitor: dict[Any, Any] = {}  # fd -> mref
        self._mref_fd: dict[Any, Any] = {}  # mref -> fd
        self._config = cfg
        self._fds: dict[str, ActorRef] = {}  # actor id -> ref, so equal fds are one object
        me = self.ref
        self._me_wire = me.to_wire()

        def on_change(section: str, key: str, value: Any, persist: bool) -> None:
            if affects_ioq(section):
                me.cast(UPDATE_CONFIG)

        self._listener = cfg.listen(on_change)

    # -- the request path --------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        if type(request) is tuple and request and request[0] == IOQ2_REQUEST:
            request = self._from_payload(request)
        if type(request) is IoqRequest:
            try:
                self.state.enqueue(request, from_)
            except Full as exc:
                return IoFailure("error", exc)
            if not self._submit_pending:
                self._submit_pending = True
                self.ref.send(SUBMIT)
            return noreply
        return self._control(request)

    def _from_payload(self, p: tuple[Any, ...]) -> IoqRequest:
        _tag, wire, msg, class_, shard, user, db, ddoc, t0 = p
        fds = self._fds
        fd = fds.get(wire[2])
        if fd is None:
            if len(fds) >= _MAX_FD_CACHE:
                fds.clear()
            fd = fds[wire[2]] = ActorRef.from_wire(wire)
        return IoqRequest(fd, msg, t0=t0, shard=shard, user=user, db=db, class_=class_, ddoc=ddoc)

    def handle_info(self, message: Any) -> None:
        if message == SUBMIT:
            self._submit_pending = False
            self._submit()
            return None
        kind = type(message)
        if kind is tuple and message[0] == IO_REPLY:
            done = self.state.complete(message[1], message[2], time.monotonic())
            if done is not None:
                reply = self.reply
                value = done.reply
                for waiter in done.waiters:
                    reply(waiter, value)
                self._submit()
            return None
        if kind is tuple and message[0] == "DOWN":
            _down, mref, _ref, reason = message
            fd = self._mref_fd.pop(mref, None)
            if fd is not None:
                self._fd_monitor.pop(fd, None)
                self._fds.pop(getattr(fd, "id", None), None)
                for done in self.state.fd_down(fd, reason):
                    self._fail(done)
                self._submit()
            return None
        return super().handle_info(message)

    def _submit(self) -> None:
        reqs = self.state.maybe_submit(time.monotonic())
        if not reqs:
            return
        me = self._me_wire
        monitors = self._fd_monitor
        for req in reqs:
            fd = req.fd
            if fd not in monitors:
                try:
                    mref = self.monitor(fd)
                except (AttributeError, TypeError):
                    # not an actor: the request can never be answered
                    self._fail(self.state.io_down(req.ref, ("badarg", repr(fd))))
                    continue
                monitors[fd] = mref
                self._mref_fd[mref] = fd
            fd.send((IO_MSG, req.ref, me, req.msg))

    def _fail(self, done: Completion | None) -> None:
        if done is None:
            return
        failure = IoFailure("down", done.error.reason if done.error is not None else None)
        for waiter in done.waiters:
            self.reply(waiter, failure)

    # -- control -----------------------------------------------------------

    def _control(self, request: Any) -> Any:
        state = self.state
        if request == "get_concurrency":
            return state.get_concurrency()
        if type(request) is tuple and len(request) == 2 and request[0] == "set_concurrency":
            try:
                return state.set_concurrency(request[1])
            except ValueError as exc:
                return IoFailure("error", exc)
            finally:
                self._submit()
        if request == "get_queue_depths":
            return state.get_queue_depths()
        if request == "get_pending_reqs":
            return state.pending_requests()
        if request == "get_reqs":
            return state.in_flight()
        if request == "get_state":
            return state.get_state()
        if request == "get_counters":
            return None
        if request == UPDATE_CONFIG:
            state.update_config(self._config)
            self._submit()
            return "ok"
        return IoFailure("error", ValueError(f"{state.server_name}: unknown request {request!r}"))

    def handle_cast(self, request: Any) -> None:
        if request == UPDATE_CONFIG:
            self.state.update_config(self._config)
            self._submit()
            return None
        return None

    def terminate(self, reason: Any) -> None:
        self._config.unlisten(self._listener)
