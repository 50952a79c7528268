"""What the IOQ1 and IOQ2 server actors share: the actor plumbing around a queue.

Both answer callers later (``noreply`` + ``reply``), queue a whole burst
before choosing by sending themselves a *submit* message, submit with
``("$io", ref, self, msg)`` to the file actor (monitored once per file),
answer waiters on ``("$io_reply", ref, result)`` and fail them with the
file's exit reason on ``DOWN``.  Only the policy differs: a subclass sets
``self.state`` and says which requests are due (`_due`).

Two shortcuts keep a request from paying thread hand-offs that change
nothing the seed can observe:

* the seed submits when its mailbox is drained (timeout 0); when the
  mailbox is already empty after a request is queued, the server submits at
  once instead of sending itself a *submit* message first;
* a read whose file actor lives in this OS process and is idle is done on
  the server's own thread (`FileServer.try_read`, reached through the
  kernel's `GenServer.colocated`) instead of the
  ``("$io", ...)`` / ``("$io_reply", ...)`` round trip to the file's thread.
  It is still chosen by `_due` -- same priority order, elevator,
  concurrency limit and dedupe -- and completed through the same
  ``state.complete``.  If the read raises anything but an IO error, the
  server kills the file actor with that crash as its exit reason, so its
  ``DOWN`` fails the waiters exactly as if the file had crashed on it.

A server may record its stats through an `ioq_stats.StatsBuffer`
(``self._stats_buffer``, set by IOQ2): a write-behind log that the
process's `Stats` folds in whenever it is read, so a request's records cost
a deque append each and no lock; the server folds the log itself once
`ioq_stats.FOLD_AT` records wait, and when it stops.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any

from actors import ActorRef, Crash, GenServer
from actors import config as _config

from ._names import register_self
from .file_server import BUSY, IO_MSG, IO_REPLY, FileServer, IoFailure
from .ioq_config import affects_ioq
from .ioq_stats import StatsBuffer
from .request import Completion

__all__ = ["SUBMIT", "UPDATE_CONFIG", "QueueServer"]

#: The message a server sends itself so it submits once its mailbox is drained.
SUBMIT = "$ioq_submit"
#: Cast by the config listener (and by anyone wanting a re-read).
UPDATE_CONFIG = "update_config"
_MAX_FD_CACHE = 10_000
#: Rounds of inline reads one `_submit` may run before it yields to the mailbox.
_MAX_INLINE_ROUNDS = 64
#: Callbacks a server that watches its own mailbox (`QueueServer._watch_drain`)
#: may run with a submit pending before it submits anyway.
_MAX_PENDING_CALLBACKS = 256
#: `QueueServer._submit_one`: the request went to its file, which will answer.
_SENT = "$ioq_sent"
#: `QueueServer._submit_one`: the request will not be answered by its file.
_DROPPED = "$ioq_dropped"


class QueueServer(GenServer):
    """Base of `Ioq1Server` and `Ioq2Server`; subclasses set ``self.state``."""

    #: The I/O thread keeps reading the host's endpoint (docs/kernel.md, *The
    #: endpoint loan*): a queue server works per burst of its mailbox, and
    #: the bursts the I/O thread hands it while it works are larger than
    #: what it finds itself between bursts.  Measured (bench/_ioq_cpu.py,
    #: alternated): small reads IOQ2/bypass 0.62-0.66x reading itself,
    #: 0.76-0.85x not, 0.73-0.77x before the loan existed.
    reads_host_endpoint = False

    state: Any
    #: ``_due(now)``: the requests to submit now, chosen by the subclass's policy.
    _due: Callable[[float], list[Any]]
    #: False: a pending submit is a *submit* message in the mailbox.  True: it
    #: is only a flag, and the subclass calls `_after_callback` at the end of
    #: every callback, which submits once the mailbox is empty -- every
    #: message an alive actor receives reaches one of its callbacks, so the
    #: check runs after the last message of the burst; no message is sent.
    _watch_drain = False

    def _setup(self, name: str | None) -> _config.Config:
        """Register, and listen for config changes (the listener only casts)."""
        if name is not None:
            register_self(self, name)
        cfg = _config.current()
        self._config = cfg
        self._submit_pending = False
        self._pending_callbacks = 0
        self._fd_monitor: dict[Any, Any] = {}  # fd -> mref
        self._mref_fd: dict[Any, Any] = {}  # mref -> fd
        self._fds: dict[str, ActorRef] = {}  # actor id -> ref, so equal fds are one object
        self._stats_buffer: StatsBuffer | None = None
        me = self.ref
        self._me_wire = me.to_wire()

        def on_change(section: str, key: str, value: Any, persist: bool) -> None:
            if affects_ioq(section):
                me.cast(UPDATE_CONFIG)

        self._listener = cfg.listen(on_change)
        return cfg

    def _control_extra(self, request: Any) -> Any:
        """Control requests only one of the servers knows; `LookupError` if unknown."""
        raise LookupError(request)

    # -- the request path ------------------------------------------------------

    def _fd_from_wire(self, wire: list[Any]) -> ActorRef:
        fds = self._fds
        fd = fds.get(wire[2])
        if fd is None:
            if len(fds) >= _MAX_FD_CACHE:
                fds.clear()
            fd = fds[wire[2]] = ActorRef.from_wire(wire)
        return fd

    def _schedule_submit(self) -> None:
        """Submit once the mailbox is drained: now if it already is, else after it."""
        if self._submit_pending:
            return
        if self.mailbox_empty():
            self._submit()
        else:
            self._submit_later()

    def _submit_later(self) -> None:
        """Make sure a *submit* message waits in the mailbox (behind what is there now),
        or, for a server that watches its mailbox, that `_after_callback` submits."""
        if not self._submit_pending:
            self._submit_pending = True
            if self._watch_drain:
                self._pending_callbacks = 0
            else:
                self.ref.send(SUBMIT)

    def _after_callback(self) -> None:
        """End of a callback of a server that watches its mailbox: submit if
        one is pending and the mailbox is drained (the seed's timeout 0), or
        after `_MAX_PENDING_CALLBACKS` callbacks, so a mailbox that never
        drains cannot hold the queue back for ever."""
        if self._submit_pending:
            self._pending_callbacks += 1
            if self._pending_callbacks >= _MAX_PENDING_CALLBACKS or self.mailbox_empty():
                self._submit_pending = False
                self._submit()

    def handle_info(self, message: Any) -> None:
        if message == SUBMIT:
            self._submit_pending = False
            self._submit()
            return None
        kind = type(message)
        if kind is tuple and message[0] == IO_REPLY:
            done = self.state.complete(message[1], message[2], time.monotonic())
            if done is not None:
                self._reply_all([done])
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
        """Submit what `_due` chooses; reads done inline free their slot at
        once, so choose again -- while nothing new waits in the mailbox (the
        seed would handle that first) and for a bounded number of rounds."""
        try:
            for _ in range(_MAX_INLINE_ROUNDS):
                reqs = self._due(time.monotonic())
                if not reqs or not self._send(reqs):
                    return
                if not self.mailbox_empty():
                    break
            self._submit_later()
        finally:
            self._bound_stats()

    def _bound_stats(self) -> None:
        """Fold the stats buffer in once it is full, so it stays bounded when nobody reads the stats."""
        buffer = self._stats_buffer
        if buffer is not None:
            buffer.fold_if_full()

    def _reply_all(self, completions: list[Completion]) -> None:
        """Answer every waiter of ``completions``."""
        reply = self.reply
        for done in completions:
            value = done.reply
            for waiter in done.waiters:
                reply(waiter, value)

    def _send(self, reqs: list[Any]) -> bool:
        """Submit each request (`_submit_one`) and answer the round's inline
        reads together; True if an inline read freed a slot."""
        submit_one = self._submit_one
        completed: list[Completion] = []
        freed = False
        for req in reqs:
            outcome = submit_one(req)
            if outcome is _SENT or outcome is _DROPPED:
                continue
            freed = True
            if outcome is not None:
                completed.append(outcome)
        if completed:
            self._reply_all(completed)
        return freed

    def _submit_one(self, req: Any) -> Any:
        """Submit one chosen request: read it on this thread when its file
        lives in this process and is idle (the `Completion`, or None for a
        ref the state no longer knows), else send it to the file (`_SENT`).
        `_DROPPED` when this submission will never be answered by the file:
        ``fd`` is no actor (its callers are failed now), or the read crashed
        (the file is killed with that crash, and its ``DOWN`` fails them)."""
        fd = req.fd
        monitors = self._fd_monitor
        if fd not in monitors:
            try:
                mref = self.monitor(fd)
            except (AttributeError, TypeError):
                # not an actor: the request can never be answered
                self._fail(self.state.io_down(req.ref, ("badarg", repr(fd))))
                return _DROPPED
            monitors[fd] = mref
            self._mref_fd[mref] = fd
        local = self.colocated(fd)
        if local is not None and isinstance(local, FileServer):
            try:
                result = local.try_read(req.msg)
            except Exception as exc:  # noqa: BLE001 - the file would have crashed on it
                self.exit(fd, Crash(type(exc).__name__, str(exc), traceback.format_exc()))
                return _DROPPED
            if result is not BUSY:
                return self.state.complete(req.ref, result, time.monotonic())
        fd.send((IO_MSG, req.ref, self._me_wire, req.msg))
        return _SENT

    def _fail(self, done: Completion | None) -> None:
        if done is None:
            return
        failure = IoFailure("down", done.error.reason if done.error is not None else None)
        for waiter in done.waiters:
            self.reply(waiter, failure)

    # -- control -----------------------------------------------------------------

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
        if request == UPDATE_CONFIG:
            self._update_config()
            return "ok"
        try:
            return self._control_extra(request)
        except LookupError:
            return IoFailure("error", ValueError(f"{self._label()}: unknown request {request!r}"))

    def _label(self) -> str:
        return self.ref.name or self.ref.id

    def _update_config(self) -> None:
        self.state.update_config(self._config)
        self._submit()

    def handle_cast(self, request: Any) -> None:
        if request == UPDATE_CONFIG:
            self._update_config()
        return None

    def terminate(self, reason: Any) -> None:
        self._config.unlisten(self._listener)
        if self._stats_buffer is not None:
            self._stats_buffer.close()
