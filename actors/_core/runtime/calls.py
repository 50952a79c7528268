"""Messages and calls from one actor (or program thread) to another.

A call across processes is answered straight into the calling thread's own
reply channel, which that thread reads itself; a call within the process is
answered through a `Waiter`.  A call from asyncio is answered through the
I/O thread onto the event loop.  A send or cast to a mailbox bounded with
``overflow="block"`` waits, as a call, until the receiver took it in.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import zmq

from actors._core.runtime.context import current_cell, thread_state
from actors._core.runtime.dispatch import Dispatch
from actors._core.runtime.kinds import K_CALL, K_CAST, K_INFO, K_REPLY, K_REPLY_EXIT, K_STOP
from actors._core.runtime.mailbox import Admit
from actors._core.runtime.waiters import ChannelWaiter, FutureWaiter, Waiter, exit_of
from actors._core.transport.transport import ReplyChannel, Transport
from actors._core.wire.codec import FrameError, decode_frame, encode_frame, unwrap_remote
from actors._core.wire.fragments import Reassembly
from actors._core.wire.plain import REFUSED, Refused
from actors._core.wire.reasons import CallTimeout, Exit
from actors._core.wire.ref import ActorRef

if TYPE_CHECKING:  # imported by `acall` itself: only an asyncio program needs it
    import asyncio

__all__ = ["BLOCK_GRACE", "CHAIN_LENGTH", "Calls"]

#: Seconds a blocked sender waits for the receiver's word beyond its own timeout.
BLOCK_GRACE = 1.0
#: The most calls a call carries in its chain of waiting callers (`actors.CallCycle`):
#: a cycle longer than this is not seen, and waits for its timeout as in OTP.
CHAIN_LENGTH = 16


class Calls(Dispatch):
    """send, cast, call and their waits."""

    def __init__(self, node_id: str, transport: Transport, node_proc: str = "n") -> None:
        super().__init__(node_id, transport, node_proc)
        self.handle_kind(K_REPLY, self._on_reply)
        self.handle_kind(K_REPLY_EXIT, self._on_reply)

    def _on_reply(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        """K_REPLY, K_REPLY_EXIT: resolve the request ``ref`` (dropped when it
        is no longer pending: it timed out)."""
        waiter = self.pending.pop(ref, None)
        if waiter is not None:
            waiter.resolve(kind == K_REPLY, body)

    def _answer_channel(self, proc: str, channel: str, ref: int, ok: bool, value: Any) -> None:
        """Fail or answer a call into its caller's reply channel (`ChannelWaiter`)."""
        kind = K_REPLY if ok else K_REPLY_EXIT
        self._emit(proc, channel, encode_frame(kind, None, None, ref, self.proc, value))

    # -- public messaging ----------------------------------------------------

    def send(self, target: ActorRef, message: Any, timeout: float | None = 5.0) -> None:
        if target.blocks:
            self._post_waiting(target, K_INFO, message, timeout)
            return
        self._post(target.proc, K_INFO, target.id, message)

    def cast(self, target: ActorRef, request: Any, timeout: float | None = 5.0) -> None:
        if target.blocks:
            self._post_waiting(target, K_CAST, request, timeout)
            return
        self._post(target.proc, K_CAST, target.id, request)

    def call(self, target: ActorRef, request: Any, timeout: float | None) -> Any:
        if self.calls_refused:
            raise self.refused()
        if target.blocks:
            request = Admit(K_CALL, request, timeout)
        return self._request(target, K_CALL, request, timeout)

    def _post_waiting(self, target: ActorRef, kind: int, body: Any, timeout: float | None) -> None:
        """A cast or send to a mailbox bounded with ``overflow="block"``: it
        waits until the receiver has taken the message in (`actors._core.runtime.mailbox`),
        at most ``timeout`` seconds (and the receiver's answer a little
        longer, so both sides agree whether it got in).  A sender that must
        not wait -- the actor itself, or this process's I/O thread -- sends
        as usual, and a full mailbox drops what it sent."""
        cell = current_cell()
        if (cell is not None and cell.id == target.id and target.proc == self.proc) or self.transport.on_io_thread():
            self._post(target.proc, kind, target.id, body)
            return
        try:
            self._request(
                target, K_CALL, Admit(kind, body, timeout), None if timeout is None else timeout + BLOCK_GRACE
            )
        except CallTimeout:
            self.stats.increment("actors.mailbox.block_timeouts")
        except Exit:  # full past its timeout (counted there), or the actor is dead
            pass

    def stop_actor(self, target: ActorRef, reason: Any, timeout: float | None) -> Any:
        return self._request(target, K_STOP, reason, timeout)

    def _request(self, target: ActorRef, kind: int, body: Any, timeout: float | None) -> Any:
        cell, proc, ref = self._open_request(target)
        chain: list[Any] | None = None
        if cell is not None and kind == K_CALL:
            # The chain of calls waiting on this one (`actors.CallCycle`):
            # the one the actor is serving, if any, and this.
            link = [self.node_id, self.proc, ref, cell.label]
            serving = cell.serving
            up = serving.chain if serving is not None else None
            chain = [*up[1 - CHAIN_LENGTH :], link] if up else [link]
            cell.waiting = link
        try:
            if proc == self.proc:
                waiter = Waiter(proc)
                self.pending[ref] = waiter
                frm = None if cell is None else cell.id if chain is None else [cell.id, None, chain]
                self._deliver(kind, target.id, frm, ref, body, proc)
                self._await(waiter, ref, target, timeout)
                if waiter.ok:
                    return waiter.value
                raise exit_of(waiter.value)
            # Across processes the reply comes straight to this thread's channel.
            channel = self.reply_channel()
            self.pending[ref] = ChannelWaiter(proc, self._answer_channel, channel.name, ref)
            # A process of another node answers straight to the channel, on the
            # tcp port it names (`actors._core.net.direct`).
            reply_to = self.transport.remote_reply_name(channel) if "|" in proc else channel.name
            frm = [cell.id if cell else None, reply_to] if chain is None else [cell.id, reply_to, chain]
            self._emit(proc, proc, encode_frame(kind, target.id, frm, ref, self.proc, body))
            ok, value = self._await_channel(channel, ref, target, timeout)
            if ok:
                return value
            raise exit_of(value)
        finally:
            if chain is not None:
                cell.waiting = None

    def _open_request(self, target: ActorRef) -> tuple[Any, str, int]:
        """What `call` and `acall` check and do before sending: a call to
        oneself and one to a process known gone fail at once, casts batched
        so far go out first (they were sent before the call), and the call
        gets its ref.  Returns the calling cell (or None), the target's
        process and the ref."""
        cell = current_cell()
        if cell is not None and cell.id == target.id and target.proc == self.proc:
            raise Exit("calling_self", f"{target!r} called itself")
        proc = target.proc
        if proc in self.dead_procs:
            raise Exit(self._dead_reason(proc), f"{target!r} is not alive")
        self.flush_casts()
        return cell, proc, next(self._ref_counter)

    async def acall(self, target: ActorRef, request: Any, timeout: float | None) -> Any:
        """`call` for asyncio programs: the reply comes back through this
        process's I/O thread, which schedules it onto the running loop; no
        thread blocks on the call, and the loop runs on meanwhile."""
        if self.calls_refused:
            raise self.refused()
        import asyncio  # already imported by the program awaiting this

        loop = asyncio.get_running_loop()
        if target.blocks:
            request = Admit(K_CALL, request, timeout)
        cell, proc, ref = self._open_request(target)
        future: asyncio.Future[Any] = loop.create_future()
        self.pending[ref] = FutureWaiter(proc, loop, future)
        self.route(proc, K_CALL, target.id, cell.id if cell else None, ref, request)
        timer = None
        if timeout is not None:

            def expire() -> None:
                if self.pending.pop(ref, None) is not None and not future.done():
                    future.set_exception(CallTimeout(target, timeout))

            timer = loop.call_later(max(0.0, timeout), expire)
        try:
            return await future
        finally:
            if timer is not None:
                timer.cancel()
            self.pending.pop(ref, None)  # cancelled or done: a late reply is dropped

    def _await_channel(self, channel: ReplyChannel, ref: int, target: Any, timeout: float | None) -> tuple[bool, Any]:
        """Read this thread's channel until the answer to ``ref`` comes.

        Frames for other refs are late answers to calls that timed out: they
        are dropped, as is garbage (counted).  On timeout the pending entry is
        withdrawn first, so nobody answers it later.
        """
        worker = thread_state.worker
        if worker is not None:  # a worker of the scheduler: the run queue goes to a spare meanwhile
            self.scheduler.block()
        try:
            return self._read_channel(channel, ref, target, timeout)
        finally:
            if worker is not None:
                self.scheduler.unblock(worker)

    def _read_channel(self, channel: ReplyChannel, ref: int, target: Any, timeout: float | None) -> tuple[bool, Any]:
        sock = channel.sock
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            ms = -1 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000.0 + 0.999))
            if ms != channel.timeout_ms:
                sock.setsockopt(zmq.RCVTIMEO, ms)
                channel.timeout_ms = ms
            try:
                frame = sock.recv()
            except zmq.Again:
                if self.pending.pop(ref, None) is not None:
                    raise CallTimeout(target, timeout) from None
                deadline = None  # resolved meanwhile: its answer is on the way
                continue
            try:
                data: bytes | memoryview = frame
                if frame[:1] == b"S":  # straight from the other node's process
                    origin, data = unwrap_remote(frame)
                    if origin in self.dead_nodes:  # an incarnation declared down here: fenced
                        self.stats.increment("actors.net.fenced_frames")
                        continue
                    if data[0] == 70:  # b"F": a fragment of a big answer
                        if channel.fragments is None:
                            channel.fragments = Reassembly()
                        whole = channel.fragments.add(origin, data)
                        if whole is None:
                            continue
                        data = whole
                    if self.peer_loads is not None:  # ``trust_peers = false``: an answer of plain data only
                        kind, _to, _frm, got, _src, body = decode_frame(data, self.peer_loads)
                        if type(body) is Refused:
                            self.stats.increment("actors.net.refused_frames")
                            kind, body = K_REPLY_EXIT, (REFUSED, body.what)
                    else:
                        kind, _to, _frm, got, _src, body = decode_frame(data)
                else:
                    kind, _to, _frm, got, _src, body = decode_frame(data)
            except (FrameError, ValueError):
                self._count_garbage()
                continue
            if got != ref or (kind != K_REPLY and kind != K_REPLY_EXIT):
                continue
            self.pending.pop(ref, None)
            return kind == K_REPLY, body

    def _await(self, waiter: Waiter, ref: int, target: Any, timeout: float | None) -> None:
        """Block until ``waiter`` is resolved; `CallTimeout` after ``timeout``.

        On timeout the pending entry is withdrawn, so a late answer is dropped
        on arrival and never reaches a later request.
        """
        self.flush_casts()
        loan = self.transport.loan
        if loan is not None:  # the answer comes through the endpoint: nobody may sit on it
            loan.blocking()
        lock = waiter.lock
        assert lock is not None, "a waiter with a callback is not waited on"
        if lock.acquire(False):  # answered already (a call to an actor that ran it inline)
            return
        worker = thread_state.worker
        if worker is not None:  # a worker of the scheduler: the run queue goes to a spare meanwhile
            self.scheduler.block()
        try:
            if not lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
                if self.pending.pop(ref, None) is not None:
                    raise CallTimeout(target, timeout)
                lock.acquire()  # resolved in the meantime: take the result
        finally:
            if worker is not None:
                self.scheduler.unblock(worker)

    def colocated(self, target: ActorRef) -> Any:
        """The behaviour object of ``target`` when that actor is alive in this
        OS process (and this node); None otherwise.  One check of the ref and
        one dictionary lookup: cheap enough for a per-message fast path."""
        if target.proc != self.proc or target.node_id != self.node_id:
            return None
        cell = self.cells.get(target.id)
        if cell is None or not cell.alive:
            return None
        return cell.server
