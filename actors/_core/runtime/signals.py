"""Erlang's signals between actors: exit, link/unlink, monitor/demonitor, DOWN.

A link or monitor across processes is established before the request
returns, as a local one is in Erlang: a signal sent to the target afterwards,
from any process, cannot overtake it.  A target that is dead (or whose process
or node is lost) answers at once: ``noproc``, or ``noconnection``.
"""

from __future__ import annotations

from typing import Any

from actors._core.runtime.calls import Calls
from actors._core.runtime.kinds import (
    EXIT_KILL,
    EXIT_LINKED,
    EXIT_SENT,
    K_DEMONITOR,
    K_DOWN,
    K_EXIT,
    K_LINK,
    K_MONITOR,
    K_REPLY,
    K_UNLINK,
)
from actors._core.runtime.waiters import Waiter
from actors._core.transport.transport import Transport
from actors._core.wire.ref import ActorRef

__all__ = ["Signals"]


class Signals(Calls):
    """Exit signals, links and monitors, both ends."""

    def __init__(self, node_id: str, transport: Transport, node_proc: str = "n") -> None:
        super().__init__(node_id, transport, node_proc)
        self.handle_kind(K_EXIT, self._on_exit)
        self.handle_kind(K_LINK, self._on_link)
        self.handle_kind(K_UNLINK, self._on_unlink)
        self.handle_kind(K_MONITOR, self._on_monitor)
        self.handle_kind(K_DEMONITOR, self._on_demonitor)
        self.handle_kind(K_DOWN, self._on_down)

    # -- receiving -------------------------------------------------------------

    def _on_exit(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        sender, reason, how = body
        cell = self.cells.get(to)
        if cell is not None:
            cell.exit_signal(sender, reason, how)

    def _on_link(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        linker = body
        cell = self.cells.get(to)
        ok = cell is not None and cell.add_link(linker)
        if ref is not None:
            self.route(src, K_REPLY, None, None, ref, ok)
        elif not ok:
            self.route(linker.proc, K_EXIT, linker.id, None, None, (self.make_ref(to), "noproc", EXIT_LINKED))

    def _on_unlink(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        cell = self.cells.get(to)
        if cell is not None:
            cell.remove_link(body)

    def _on_monitor(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        mref, watcher, target = body
        cell = self.cells.get(to)
        ok = cell is not None and cell.add_monitor(mref, watcher)
        if not ok:
            self.route(watcher.proc, K_DOWN, watcher.id, None, None, (mref, target, "noproc"))
        if ref is not None:
            self.route(src, K_REPLY, None, None, ref, ok)

    def _on_demonitor(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        cell = self.cells.get(to)
        if cell is not None:
            cell.remove_monitor(body)

    def _on_down(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        mref, target, reason = body
        cell = self.cells.get(to)
        if cell is not None:
            cell.down(mref, target, reason)
        else:
            sink = self.sinks.get(to)
            if sink is not None:
                sink.down(mref, target, reason)

    # -- sending ---------------------------------------------------------------

    def send_exit(self, target: ActorRef, sender: ActorRef | None, reason: Any, how: int = EXIT_LINKED) -> None:
        """An exit signal; ``how`` says where it comes from (`EXIT_LINKED`:
        the sender died and was linked; `EXIT_SENT`/`EXIT_KILL`: ``exit/2``)."""
        self.route(target.proc, K_EXIT, target.id, None, None, (sender, reason, how))

    def send_exit_signal(self, target: ActorRef, sender: ActorRef | None, reason: Any) -> None:
        """``exit(Pid, Reason)``: ``kill`` is untrappable, anything else is not."""
        self.send_exit(target, sender, reason, EXIT_KILL if reason == "kill" else EXIT_SENT)

    def send_down(self, watcher: ActorRef, mref: Any, target: ActorRef, reason: Any) -> None:
        self.route(watcher.proc, K_DOWN, watcher.id, None, None, (mref, target, reason))

    def request_monitor(
        self, watcher: ActorRef, target: ActorRef, mref: Any, timeout: float = 10.0, wait: bool = True
    ) -> None:
        """Establish a monitor before returning, as a local ``monitor/2`` does in
        Erlang: a signal sent to the target afterwards, from any process, cannot
        overtake it.  A dead target gets the watcher a DOWN ``noproc``
        (``noconnection`` for one on a node that is lost, as in Erlang).

        ``wait=False`` returns at once: the monitor is set up when the target's
        process gets the request, and the answer (a DOWN if the target is dead,
        or its process or node is lost first) comes later.  For a watcher that
        must never wait on another node (a name server answering others)."""
        if target.proc in self.dead_procs:
            self.send_down(watcher, mref, target, self._dead_reason(target.proc))
            return
        if target.proc == self.proc:
            self._deliver(K_MONITOR, target.id, None, None, (mref, watcher, target), self.proc)
            return
        ref = next(self._ref_counter)
        if not wait:

            def answered(ok: bool, value: Any) -> None:
                if not ok:  # the target's process died first
                    self.send_down(watcher, mref, target, value)

            later = Waiter(target.proc, answered)
            self.pending[ref] = later
            self._send(target.proc, K_MONITOR, target.id, None, ref, (mref, watcher, target))
            if target.proc in self.dead_procs and self.pending.pop(ref, None) is not None:
                later.resolve(False, self._dead_reason(target.proc))
            return
        waiter = Waiter(target.proc)
        self.pending[ref] = waiter
        self._send(target.proc, K_MONITOR, target.id, None, ref, (mref, watcher, target))
        self._await(waiter, ref, target, timeout)
        if not waiter.ok:  # the target's process died meanwhile
            self.send_down(watcher, mref, target, waiter.value)

    def request_demonitor(self, target: ActorRef, mref: Any) -> None:
        self.route(target.proc, K_DEMONITOR, target.id, None, None, mref)

    def request_link(self, linker: ActorRef, target: ActorRef, timeout: float = 10.0) -> bool:
        """Link ``target`` back to ``linker``; False when the target is dead."""
        if target.proc in self.dead_procs:
            return False
        if target.proc == self.proc:
            cell = self.cells.get(target.id)
            return cell is not None and cell.add_link(linker)
        ref = next(self._ref_counter)
        waiter = Waiter(target.proc)
        self.pending[ref] = waiter
        self._send(target.proc, K_LINK, target.id, linker.id, ref, linker)
        self._await(waiter, ref, target, timeout)
        return bool(waiter.ok and waiter.value)

    def request_unlink(self, linker: ActorRef, target: ActorRef) -> None:
        self.route(target.proc, K_UNLINK, target.id, None, None, linker)
