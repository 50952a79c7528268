"""The os-process queue actor (`ioq_osq`): a GenServer over `OsqState`.

Registered as ``ioq_osq``.  Two requests:

* ``("rlimit", dimensions, t0)`` -- a permit.  The reply (a permit number)
  comes once the caller's account is below its limit; the caller then talks
  to its OS process directly and hands the permit back by sending
  ``(RELEASE, permit)`` (`actors.ioq.api.call` does both, releasing in a
  ``finally``).
* ``("call", fd, msg, dimensions, t0)`` -- the server forwards ``msg`` to the
  actor ``fd`` (``("$io", ...)``) and replies its answer, failing the caller
  with the exit reason if ``fd`` dies.

Limitation: a caller that dies while holding a permit (its whole host
killed between the grant and the `finally`) does not give it back; the
kernel offers no public way to monitor a caller that is not an actor.
"""

from __future__ import annotations

import time
from typing import Any

from actors import GenServer, noreply
from actors import config as _config
from actors import stats as _stats

from ._names import register_self
from .file_server import IO_MSG, IO_REPLY, IoFailure
from .osq_state import OsqRequest, OsqState, OsqSubmission

__all__ = ["OSQ_SERVER", "OsqServer", "RELEASE"]

#: Registered name of the os-process queue.
OSQ_SERVER = "ioq_osq"
#: ``(RELEASE, permit)`` hands a permit back.
RELEASE = "$osq_release"


class OsqServer(GenServer):
    """``ioq_osq``: per-account limits on requests to OS processes."""

    def init(self, name: str | None = None) -> None:
        if name is not None:
            register_self(self, name)
        self.state = OsqState.from_config(_config.current(), stats=_stats.current())
        self._fd_monitor: dict[Any, Any] = {}
        self._mref_fd: dict[Any, Any] = {}

    def handle_call(self, request: Any, from_: Any) -> Any:
        if type(request) is tuple and request:
            op = request[0]
            if op == "rlimit" and len(request) == 3:
                req = OsqRequest("rlimit", request[1], request[2], from_)
                self._carry_out(self.state.enqueue(req, time.monotonic()))
                return noreply
            if op == "call" and len(request) == 5:
                req = OsqRequest("call", request[3], request[4], from_, request[1], request[2])
                self._carry_out(self.state.enqueue(req, time.monotonic()))
                return noreply
            if op in ("set_minimum", "set_maximum", "set_global_maximum") and len(request) == 2:
                try:
                    getattr(self.state, op)(request[1])
                except ValueError as exc:
                    return IoFailure("error", exc)
                return "ok"
        if request == "get_queue_depths":
            return self.state.get_queue_depths()
        if request == "get_requests":
            return self.state.get_requests()
        return IoFailure("error", ValueError(f"ioq_osq: unknown request {request!r}"))

    def handle_info(self, message: Any) -> None:
        if type(message) is tuple and message:
            op = message[0]
            now = time.monotonic()
            if op == RELEASE and len(message) == 2:
                self._carry_out(self.state.release(message[1], now))
                return None
            if op == IO_REPLY and len(message) == 3:
                done, subs = self.state.complete(message[1], message[2], now)
                if done is not None:
                    for waiter in done.waiters:
                        self.reply(waiter, done.reply)
                self._carry_out(subs)
                return None
            if op == "DOWN" and len(message) == 4:
                fd = self._mref_fd.pop(message[1], None)
                if fd is not None:
                    self._fd_monitor.pop(fd, None)
                    refs = [r for r, (_c, req) in self.state.reqs.items() if req.kind == "call" and req.fd == fd]
                    for ref in refs:
                        done, subs = self.state.down(ref, message[3], now)
                        if done is not None:
                            for waiter in done.waiters:
                                self.reply(waiter, IoFailure("down", message[3]))
                        self._carry_out(subs)
                return None
        return super().handle_info(message)

    def _carry_out(self, subs: list[OsqSubmission]) -> None:
        for sub in subs:
            req = sub.request
            if req.kind == "rlimit":
                self.reply(req.from_, sub.ref)
                continue
            fd = req.fd
            if fd not in self._fd_monitor:
                mref = self.monitor(fd)
                self._fd_monitor[fd] = mref
                self._mref_fd[mref] = fd
            fd.send((IO_MSG, sub.ref, self.ref.to_wire(), req.msg))
