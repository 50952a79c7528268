"""System requests: one process's runtime asking another's (not an actor).

A system request is one of the typed operations of `actors._core.wire.system`
(a record whose fields are its arguments); the receiving runtime runs the
handler registered for that operation and answers with its return value (or
later, when the handler returns `DEFER`).  The node uses them to run its
processes (spawn, names, deaths); every process answers the ones installed
here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from actors._core.runtime.deaths import Deaths
from actors._core.runtime.kinds import K_REPLY, K_REPLY_EXIT, K_SYS
from actors._core.runtime.waiters import Waiter
from actors._core.transport.transport import Transport
from actors._core.wire import system as sysop
from actors._core.wire.reasons import Exit
from actors._core.wire.ref import ActorRef

__all__ = ["DEFER", "System"]

log = logging.getLogger("actors.runtime")

#: Returned by a deferring system handler that replies later itself.
DEFER = object()

M = TypeVar("M", bound=sysop.SysOp[Any])
R = TypeVar("R")
#: ``(the operation's record, its handler, whether the handler takes the request's ref)``.
_Entry = tuple[type[sysop.SysOp[Any]], Callable[..., Any], bool]


class System(Deaths):
    """System requests, both ends, and the operations every process answers."""

    def __init__(self, node_id: str, transport: Transport, node_proc: str = "n") -> None:
        super().__init__(node_id, transport, node_proc)
        self._sys_handlers: dict[str, _Entry] = {}
        self.handle_kind(K_SYS, self._on_sys)
        self.register_sys(sysop.Alive, lambda src, m: m.actor_id in self.cells)
        self.register_sys(sysop.ProcDown, lambda src, m: self.proc_down(m.proc, m.reason))
        self.register_sys(sysop.ProcsDown, lambda src, m: self.procs_gone_before(m.gone))
        self.register_sys(sysop.NodeDown, lambda src, m: self.node_down(m.node_id, m.reason))
        self.register_sys(sysop.NetPeer, lambda src, m: self.learn_node(m.node_id, m.address, m.public, m.secret))
        self.register_sys(sysop.Stats, lambda src, m: self.stats_snapshot())
        self.register_sys(sysop.Connect, lambda src, m: [self.connect_peer(p) for p in m.peers] and None)
        self.register_sys(sysop.Info, lambda src, m: self.info())

    def register_sys(self, op: type[M], handler: Callable[[str, M], Any], threaded: bool = False) -> None:
        """Answer operation ``op`` with ``handler(src_proc, record)``; its return value is the reply.

        A ``threaded`` handler may block (it sends requests of its own): it
        runs on a short-lived thread, never on the I/O thread.
        """
        if threaded:

            def run_threaded(src: str, msg: M, ref: int | None) -> Any:
                def work() -> None:
                    try:
                        self.reply_sys(src, ref, True, handler(src, msg))
                    except Exception as exc:  # reported to the asker, not fatal here
                        self.reply_sys(src, ref, False, ("error", repr(exc)))

                threading.Thread(target=work, name=f"actors-sys-{op.OP}", daemon=True).start()
                return DEFER

            self._sys_handlers[op.OP] = (op, run_threaded, True)
        else:
            self._sys_handlers[op.OP] = (op, handler, False)

    def register_sys_later(self, op: type[M], handler: Callable[[str, M, int | None], Any]) -> None:
        """Answer operation ``op`` with ``handler(src_proc, record, ref)``, which
        may answer later: it returns `DEFER` and replies itself with
        `reply_sys` (``ref`` is None for a one-way `sys_send`)."""
        self._sys_handlers[op.OP] = (op, handler, True)

    def _on_sys(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        self._handle_sys(src, ref, body)

    def _handle_sys(self, src: str, ref: int | None, body: Any) -> None:
        op, args = body
        entry = self._sys_handlers.get(op)
        if entry is None:
            if ref is not None:
                self.route(src, K_REPLY_EXIT, None, None, ref, ("unknown_system_request", op))
            return
        cls, handler, later = entry
        try:
            msg = cls(*args)
            result = handler(src, msg, ref) if later else handler(src, msg)
        except Exception as exc:
            log.exception("system request %s from %s failed", op, src)
            if ref is not None:
                self.route(src, K_REPLY_EXIT, None, None, ref, ("error", repr(exc)))
            return
        if ref is not None and result is not DEFER:
            self.route(src, K_REPLY, None, None, ref, result)

    def reply_sys(self, src: str, ref: int | None, ok: bool, value: Any) -> None:
        if ref is not None:
            self.route(src, K_REPLY if ok else K_REPLY_EXIT, None, None, ref, value)

    def sys_request(self, proc: str, msg: sysop.SysOp[R], timeout: float | None = 30.0) -> R:
        """Operation ``msg`` asked of process ``proc``'s runtime (not of an actor); its answer."""
        if proc == self.proc:
            entry = self._sys_handlers[msg.OP]
            if not entry[2]:
                return entry[1](self.proc, msg)
        waiter = Waiter(proc)
        ref = self._ask_sys(proc, msg, waiter)
        self._await(waiter, ref, f"{proc}:{msg.OP}", timeout)
        if waiter.ok:
            return waiter.value
        raise Exit(waiter.value)

    def sys_request_then(self, proc: str, msg: sysop.SysOp[Any], callback: Callable[[bool, Any], None]) -> None:
        """`sys_request` without waiting: ``callback(ok, answer)`` runs when the answer comes."""
        self._ask_sys(proc, msg, Waiter(proc, callback))

    def _ask_sys(self, proc: str, msg: sysop.SysOp[Any], waiter: Waiter) -> int:
        ref = next(self._ref_counter)
        self.pending[ref] = waiter
        body = sysop.encode(msg)
        if proc == self.proc:
            self.call_soon(lambda: self._handle_sys(self.proc, ref, body))
        else:
            self._send(proc, K_SYS, None, None, ref, body)
        if proc in self.dead_procs and self.pending.pop(ref, None) is not None:
            waiter.resolve(False, "noproc")
        return ref

    def sys_send(self, proc: str, msg: sysop.SysOp[Any]) -> None:
        """Operation ``msg`` sent one way to process ``proc``'s runtime."""
        self.route(proc, K_SYS, None, None, None, sysop.encode(msg))

    # -- what every process answers --------------------------------------------------

    def is_alive(self, target: ActorRef, timeout: float = 5.0) -> bool:
        if target.proc in self.dead_procs:
            return False
        if target.proc == self.proc:
            return target.id in self.cells
        try:
            return self.sys_request(target.proc, sysop.Alive(target.id), timeout)
        except Exit:
            return False

    def stats_snapshot(self) -> dict[str, Any]:
        """This process's metrics, with the endpoint loan's counts (kept as
        plain attributes on its hot path, and read here)."""
        snap = self.stats.snapshot()
        snap["actors"] = self.meters.snapshot(self.cells)
        if self.direct is not None and self.direct.dropped:
            snap.setdefault("counters", {})["actors.net.direct_dropped"] = self.direct.dropped
        loan = self.transport.loan
        if loan is not None:
            counters = snap.setdefault("counters", {})
            counters["actors.transport.lent_frames"] = loan.frames_read
            counters["actors.transport.endpoint_takeovers"] = loan.takeovers
            counters["actors.transport.endpoint_returns"] = loan.returns
        return snap

    def info(self) -> list[dict[str, Any]]:
        """A cheap snapshot of the actors of this process."""
        return [cell.info() for cell in list(self.cells.values())]

    def channel_names(self) -> list[str]:
        """This process's reply channels (a new host connects to the node's
        ahead of time, so its first answers need no handshake)."""
        return self.transport.channels.names()
