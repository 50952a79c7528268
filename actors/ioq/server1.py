"""The IOQ1 server actor (`ioq_server`), kept for comparison: a GenServer over `Ioq1State`.

A single server for the whole node, registered as ``ioq_server``.  Callers
call it with ``(IOQ1_REQUEST, fd, msg, dimensions, t0)`` (``fd`` an `ActorRef`
or its wire form, which is much cheaper to encode); like IOQ2 it
answers later, queues a whole burst before choosing (its own *submit*
message), submits with ``("$io", ref, self, msg)`` and fails waiters with the
exit reason of a file that dies.  The difference is the policy: channels and
a lottery (`sort_queues`) instead of one heap, and dedupe by scanning queues.
"""

from __future__ import annotations

import random
import time
from typing import Any

from actors import ActorRef, GenServer, noreply
from actors import config as _config
from actors import stats as _stats

from ._names import register_self
from .file_server import IO_MSG, IO_REPLY, IoFailure
from .ioq_config import affects_ioq
from .request import Completion
from .server1_state import Ioq1State

__all__ = ["IOQ1_REQUEST", "IOQ1_SERVER", "Ioq1Server"]

#: Registered name of the IOQ1 server.
IOQ1_SERVER = "ioq_server"
#: First element of a request tuple ``(IOQ1_REQUEST, fd, msg, dimensions, t0)``.
IOQ1_REQUEST = "$ioq1"
_SUBMIT = "$ioq_submit"


class Ioq1Server(GenServer):
    """``ioq_server``: channels, lottery and dedupe over the node's IO."""

    def init(self, name: str | None = None, seed: int | None = None) -> None:
        if name is not None:
            register_self(self, name)
        cfg = _config.current()
        self.state = Ioq1State.from_config(cfg, stats=_stats.current())
        self.rng = random.Random(seed)
        self._config = cfg
        self._submit_pending = False
        self._fd_monitor: dict[Any, Any] = {}
        self._mref_fd: dict[Any, Any] = {}
        self._fds: dict[str, ActorRef] = {}
        me = self.ref
        self._me_wire = me.to_wire()

        def on_change(section: str, key: str, value: Any, persist: bool) -> None:
            if affects_ioq(section):
                me.cast("update_config")

        self._listener = cfg.listen(on_change)

    def handle_call(self, request: Any, from_: Any) -> Any:
        if type(request) is tuple and len(request) == 5 and request[0] == IOQ1_REQUEST:
            _tag, fd, msg, dimensions, t0 = request
            if type(fd) is list:
                fd = self._fds.get(fd[2]) or self._remember(fd)
            state = self.state
            state.enqueue(state.make_request(fd, msg, dimensions, t0), from_)
            if not self._submit_pending:
                self._submit_pending = True
                self.ref.send(_SUBMIT)
            return noreply
        return self._control(request)

    def _remember(self, wire: list[Any]) -> ActorRef:
        if len(self._fds) >= 10_000:
            self._fds.clear()
        ref = self._fds[wire[2]] = ActorRef.from_wire(wire)
        return ref

    def handle_info(self, message: Any) -> None:
        if message == _SUBMIT:
            self._submit_pending = False
            self._submit()
            return None
        kind = type(message)
        if kind is tuple and message[0] == IO_REPLY:
            done = self.state.complete(message[1], message[2], time.monotonic())
            if done is not None:
                for waiter in done.waiters:
                    self.reply(waiter, done.reply)
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
        me = self._me_wire
        for req in self.state.maybe_submit(time.monotonic(), self.rng):
            fd = req.fd
            if fd not in self._fd_monitor:
                try:
                    mref = self.monitor(fd)
                except (AttributeError, TypeError):
                    self._fail(self.state.io_down(req.ref, ("badarg", repr(fd))))
                    continue
                self._fd_monitor[fd] = mref
                self._mref_fd[mref] = fd
            fd.send((IO_MSG, req.ref, me, req.msg))

    def _fail(self, done: Completion | None) -> None:
        if done is None:
            return
        failure = IoFailure("down", done.error.reason if done.error is not None else None)
        for waiter in done.waiters:
            self.reply(waiter, failure)

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
        if request == "get_counters":
            return state.get_counters()
        if request == "reset_histos":
            state.reset_histos()
            return "ok"
        if type(request) is tuple and len(request) == 4 and request[0] == "add_channel":
            state.add_channel(request[1], request[2], request[3])
            return "ok"
        if type(request) is tuple and len(request) == 3 and request[0] == "rem_channel":
            state.rem_channel(request[1], request[2])
            return "ok"
        if request == "list_custom_channels":
            return state.list_custom_channels()
        if request == "update_config":
            state.update_config(self._config)
            self._submit()
            return "ok"
        return IoFailure("error", ValueError(f"ioq_server: unknown request {request!r}"))

    def handle_cast(self, request: Any) -> None:
        if request == "update_config":
            self.state.update_config(self._config)
            self._submit()
        return None

    def terminate(self, reason: Any) -> None:
        self._config.unlisten(self._listener)
