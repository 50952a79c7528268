"""System requests: one process's runtime asking another's (not an actor).

A system request names an operation and its arguments; the receiving
runtime runs the handler registered for that operation and answers with its
return value (or later, when the handler returns `DEFER`).  The node uses
them to run its processes (spawn, names, deaths); every process answers the
ones installed here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from actors._core.runtime.deaths import Deaths
from actors._core.runtime.kinds import K_REPLY, K_REPLY_EXIT, K_SYS
from actors._core.runtime.waiters import Waiter
from actors._core.transport.transport import Transport
from actors._core.wire.reasons import Exit
from actors._core.wire.ref import ActorRef

__all__ = ["DEFER", "System"]

log = logging.getLogger("actors.runtime")

#: Returned by a deferring system handler that replies later itself.
DEFER = object()


class System(Deaths):
    """System requests, both ends, and the operations every process answers."""

    def __init__(self, node_id: str, transport: Transport, node_proc: str = "n") -> None:
        super().__init__(node_id, transport, node_proc)
        self._sys_handlers: dict[str, Callable[..., Any]] = {}
        self._deferring: set[str] = {"spawn"}
        self.handle_kind(K_SYS, self._on_sys)
        self.register_sys("alive", lambda src, actor_id: actor_id in self.cells)
        self.register_sys("proc_down", lambda src, proc, reason: self.proc_down(proc, reason))
        self.register_sys("procs_down", lambda src, gone: self.procs_gone_before(gone))
        self.register_sys("node_down", lambda src, node_id, reason: self.node_down(node_id, reason))
        self.register_sys("net_peer", lambda src, *peer: self.learn_node(*peer))
        self.register_sys("stats", lambda src: self.stats_snapshot())
        self.register_sys("connect", lambda src, peers: [self.connect_peer(p) for p in peers] and None)
        self.register_sys("info", lambda src: self.info())

    def register_sys(self, op: str, handler: Callable[..., Any], threaded: bool = False) -> None:
        """``handler(src_proc, *args)``; its return value is the reply.

        A handler that must answer later returns `DEFER` and replies itself
        with `reply_sys`.  A ``threaded`` handler may block (it sends requests
        of its own): it runs on a short-lived thread, never on the I/O thread.
        """
        if threaded:
            def run_threaded(src: str, *args: Any, _ref: int | None = None) -> Any:
                def work() -> None:
                    try:
                        self.reply_sys(src, _ref, True, handler(src, *args))
                    except Exception as exc:  # reported to the asker, not fatal here
                        self.reply_sys(src, _ref, False, ("error", repr(exc)))

                threading.Thread(target=work, name=f"actors-sys-{op}", daemon=True).start()
                return DEFER

            self._sys_handlers[op] = run_threaded
            self._deferring.add(op)
        else:
            self._sys_handlers[op] = handler

    def _on_sys(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        self._handle_sys(src, ref, body)

    def _handle_sys(self, src: str, ref: int | None, body: Any) -> None:
        op, args = body
        handler = self._sys_handlers.get(op)
        if handler is None:
            if ref is not None:
                self.route(src, K_REPLY_EXIT, None, None, ref, ("unknown_system_request", op))
            return
        try:
            result = handler(src, *args, _ref=ref) if op in self._deferring else handler(src, *args)
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

    def sys_request(
        self,
        proc: str,
        op: str,
        args: Any,
        timeout: float | None = 30.0,
        callback: Callable[[bool, Any], None] | None = None,
    ) -> Any:
        """A request to another process's runtime (not to an actor)."""
        if proc == self.proc and callback is None and op not in self._deferring:
            return self._sys_handlers[op](self.proc, *args)
        ref = next(self._ref_counter)
        waiter = Waiter(proc, callback)
        self.pending[ref] = waiter
        if proc == self.proc:
            self.call_soon(lambda: self._handle_sys(self.proc, ref, (op, args)))
        else:
            self._send(proc, K_SYS, None, None, ref, (op, args))
        if proc in self.dead_procs and self.pending.pop(ref, None) is not None:
            waiter.resolve(False, "noproc")
        if callback is not None:
            return None
        self._await(waiter, ref, f"{proc}:{op}", timeout)
        if waiter.ok:
            return waiter.value
        raise Exit(waiter.value)

    def sys_send(self, proc: str, op: str, args: Any) -> None:
        """A one-way system message to another process's runtime."""
        self.route(proc, K_SYS, None, None, None, (op, args))

    # -- what every process answers --------------------------------------------------

    def is_alive(self, target: ActorRef, timeout: float = 5.0) -> bool:
        if target.proc in self.dead_procs:
            return False
        if target.proc == self.proc:
            return target.id in self.cells
        try:
            return bool(self.sys_request(target.proc, "alive", (target.id,), timeout))
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
