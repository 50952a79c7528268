"""The per-process runtime: signals between actors over the transport.

Every OS process of a node runs one `Runtime`, built on the process's
`actors._core.transport.transport.Transport` (sockets, I/O thread, timers).  The runtime
adds what is about actors: signal kinds and their dispatch to cells,
pending calls, system requests between processes, names and timers that
deliver messages.  Cells (`actors._core.cell.cell`) sit above it and are reached only
through the small interface they share with monitor sinks.

Signals between actors are Erlang's: messages, casts, calls and replies,
exit signals, link/unlink, monitor/demonitor and DOWN.  Delivery between two
actors of the same process never touches ZeroMQ.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import zmq

from actors._core.wire import ref as _ref
from actors._core.runtime.mailbox import MAILBOX_FULL, Admit, MailboxFull
from actors._core.wire.codec import FrameError, decode_frame, encode_frame, is_scalar, unwrap_relay, wrap_relay
from actors._core.runtime.meter import Meters
from actors._core.net.direct import DirectLinks
from actors._core.wire.reasons import CallTimeout, Exit
from actors._core.wire.ref import ActorRef, From
from actors._core.transport.transport import SEND_WAIT, ReplyChannel, Timer, Transport, owner_of

if TYPE_CHECKING:
    from actors._core.cell.cell import Cell

__all__ = ["DEFER", "EXIT_KILL", "EXIT_LINKED", "EXIT_SENT", "Runtime", "Timer", "current_cell", "current_runtime",
           "runtime_for", "set_current_cell"]

log = logging.getLogger("actors.runtime")

# Frame kinds.
K_INFO = 0
K_CAST = 1
K_CALL = 2
K_REPLY = 3
K_REPLY_EXIT = 4
K_EXIT = 5
K_LINK = 6
K_UNLINK = 7
K_MONITOR = 8
K_DEMONITOR = 9
K_DOWN = 10
K_SYS = 11
K_STOP = 12
K_BATCH = 13  # consecutive casts/sends from one thread to one process: [[kind, to, body], ...]

# How a K_EXIT signal was sent (its body is ``[sender, reason, how]``); Erlang
# treats the two sources of exit signals differently.
#: ``exit(Pid, Reason)``: trappable, leaves any link with the sender in place.
EXIT_SENT = 0
#: ``exit(Pid, kill)``: untrappable, the target dies with ``killed``.
EXIT_KILL = 1
#: The death of a linked actor: removes the link; reason ``kill`` stays trappable.
EXIT_LINKED = 2

#: A thread's casts to one process go out as one frame after this many...
CAST_BATCH = 64
#: ... or this long after the first of them, when its callback is still running.
CAST_FLUSH_AFTER = 0.002
#: A batch frame bigger than this goes out as one frame per cast instead, and
#: the thread stops batching for that process until a single cast is small
#: again: one huge frame would hold every other frame on its way (the same
#: connection, the same ZeroMQ I/O thread) until the whole of it has passed.
BIG_BATCH = 512 * 1024

#: Seconds a blocked sender waits for the receiver's word beyond its own timeout.
BLOCK_GRACE = 1.0


def _exit_of(reason: Any) -> Exit:
    """The exception a failed request raises: `MailboxFull` for a full mailbox."""
    if reason == MAILBOX_FULL:
        return MailboxFull()
    return Exit(reason)


_runtimes: dict[str, "Runtime"] = {}
_runtimes_lock = threading.Lock()
class _ThreadState(threading.local):
    """Per thread: the actor it runs (None for the host program's threads) and
    its cast batches.  Class-level defaults keep the lookups on a thread that
    is no actor's as cheap as on an actor's: a missing attribute of a
    ``threading.local`` costs an exception caught in C on every call."""

    cell: "Cell | None" = None
    outbox: "_Outbox | None" = None


_thread_state = _ThreadState()


def runtime_for(node_id: str) -> "Runtime":
    rt = _runtimes.get(node_id)
    if rt is None:
        raise Exit("noconnection", f"node {node_id} is not running in this process")
    return rt


def current_runtime() -> "Runtime":
    """The runtime of this process (the only one in a host; the newest in the node process)."""
    cell = _thread_state.cell
    if cell is not None:
        return cell.runtime
    with _runtimes_lock:
        if not _runtimes:
            raise RuntimeError("no actors node is running in this process")
        return next(reversed(_runtimes.values()))


def current_cell() -> "Cell | None":
    return _thread_state.cell


def set_current_cell(cell: "Cell | None") -> None:
    """Make this thread an actor's (or no longer): an actor thread batches
    its casts and sends (see `Runtime.flush_casts`)."""
    outbox = _Outbox() if cell is not None else None
    _thread_state.cell = cell
    _thread_state.outbox = outbox
    if cell is not None:
        cell.outbox = outbox  # so a death handled on another thread can flush it first


class _Batch:
    """Casts and sends waiting to go to one process as one frame."""

    __slots__ = ("items", "plain")

    def __init__(self) -> None:
        self.items: list[list[Any]] = []
        self.plain = True


class _Outbox:
    """An actor thread's batches, one per destination process.

    Every send of an actor thread goes out under ``lock`` after the batch for
    the same process, so nothing the thread sends overtakes its own casts.
    The I/O thread takes the same lock to flush a batch that has waited
    `CAST_FLUSH_AFTER` (a callback that runs on without returning or
    blocking in the kernel), so the order on the wire holds.
    """

    __slots__ = ("lock", "batches", "armed", "closed", "unbatched")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: dict[str, _Batch] = {}
        self.armed = False
        self.closed = False
        #: Processes this thread sends big casts to: not batched (`BIG_BATCH`).
        self.unbatched: set[str] = set()


class _ChannelWaiter:
    """A call whose reply goes to the caller's own reply channel.

    The calling thread reads the channel itself; when the target's process
    dies first, whoever learns it resolves the call by sending the failure
    into the same channel, so the caller has one place to wait on.
    """

    __slots__ = ("proc", "rt", "channel", "ref")

    def __init__(self, proc: str, rt: "Runtime", channel: str, ref: int) -> None:
        self.proc = proc
        self.rt = rt
        self.channel = channel
        self.ref = ref

    def resolve(self, ok: bool, value: Any) -> None:
        rt = self.rt
        kind = K_REPLY if ok else K_REPLY_EXIT
        rt._emit(self.proc, self.channel, encode_frame(kind, None, None, self.ref, rt.proc, value))


class _FutureWaiter:
    """A call awaited by an asyncio program: resolving it schedules the
    result onto the event loop's thread (no thread waits for it)."""

    __slots__ = ("proc", "loop", "future")

    def __init__(self, proc: str, loop: asyncio.AbstractEventLoop, future: "asyncio.Future[Any]") -> None:
        self.proc = proc
        self.loop = loop
        self.future = future

    def resolve(self, ok: bool, value: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self._settle, ok, value)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    def _settle(self, ok: bool, value: Any) -> None:
        if not self.future.done():
            if ok:
                self.future.set_result(value)
            else:
                self.future.set_exception(_exit_of(value))


class _Mail:
    """What one read of an endpoint brought one actor: its mailbox entries
    in arrival order, and the calls among them (put in flight together)."""

    __slots__ = ("items", "calls")

    def __init__(self) -> None:
        self.items: list[tuple[int, Any, Any]] = []
        self.calls: list[From] = []


class _Waiter:
    """One outstanding request: a lock released by whoever resolves it."""

    __slots__ = ("lock", "proc", "ok", "value", "callback")

    def __init__(self, proc: str | None, callback: Callable[[bool, Any], None] | None = None) -> None:
        self.proc = proc
        self.callback = callback
        self.ok = False
        self.value: Any = None
        if callback is None:
            self.lock = threading.Lock()
            self.lock.acquire()
        else:
            self.lock = None

    def resolve(self, ok: bool, value: Any) -> None:
        if self.callback is not None:
            try:
                self.callback(ok, value)
            except Exception:  # a continuation must never kill the I/O thread
                log.exception("continuation failed")
            return
        self.ok = ok
        self.value = value
        self.lock.release()


class Runtime(Transport):
    """Process-local kernel state on top of the process's transport."""

    def __init__(self, node_id: str, rundir: str, proc: str, node_proc: str = "n") -> None:
        super().__init__(rundir, proc)
        self.node_id = node_id
        self.node_proc = node_proc
        self.is_node = proc == node_proc
        self.cells: dict[str, Cell] = {}
        #: Per-class call, cast and exit counts of this process's actors (`actors._core.runtime.meter`).
        self.meters = Meters()
        self.sinks: dict[str, Any] = {}
        self.pending: dict[int, _Waiter] = {}
        self._ref_counter = itertools.count(1)
        self._id_counter = itertools.count(1)
        self._sys_handlers: dict[str, Callable[..., Any]] = {}
        self._deferring: set[str] = {"spawn"}
        self.dropped_frames = 0
        self.registry: Any = None  # set in the node process
        self.on_cell_gone: Callable[[Cell], None] | None = None
        #: In a distributed node's node process: hands a frame for another
        #: node's process to the node-to-node link.  Elsewhere None: hosts
        #: hand such frames to their node process.
        self.relay: Callable[[str, bytes], None] | None = None
        #: Other nodes known lost (node id -> reason).
        self.dead_nodes: dict[str, Any] = {}
        #: In a host of a distributed node: its own connections to other nodes
        #: (`actors._core.net.direct`), opened for a node the node process told it
        #: of; it also remembers the nodes it reached through the relay, whose
        #: frames keep that one path.
        self.direct: DirectLinks | None = None
        if "@" in node_id and not self.is_node:
            # Backpressure as on the ipc pipes: any thread but the I/O thread
            # waits for room on a full connection.
            self.direct = DirectLinks(self.ctx, node_id, proc, self._io_thread, SEND_WAIT)
        _ref.local_node_ids.add(node_id)
        self._install_default_handlers()

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        with _runtimes_lock:
            _runtimes[self.node_id] = self
        super().start()

    def shutdown(self, linger: bool = False) -> None:
        """Stop the I/O thread and close every socket.

        With ``linger`` the sockets first deliver what they hold (a host that
        halts must not lose its last exit signals); otherwise they drop it.
        """
        with _runtimes_lock:
            if _runtimes.get(self.node_id) is self:
                del _runtimes[self.node_id]
                _ref.local_node_ids.discard(self.node_id)
        if self.direct is not None:
            self.direct.close(linger)
        super().shutdown(linger)

    def send_remote(self, dest: str, frame: bytes) -> None:
        """A frame for a process of another node: the node process sends it
        over the link; a host on its own connection to that node when it has
        one (`actors._core.net.direct`), else through its node process."""
        relay = self.relay
        if relay is not None:
            relay(dest, frame)
            return
        direct = self.direct
        if direct is not None:
            node_id, _, proc = dest.partition("|")
            if direct.send(node_id, proc, frame):
                return
        self.send_frame(self.node_proc, wrap_relay(dest, frame))

    # -- ids -----------------------------------------------------------------

    def new_actor_id(self) -> str:
        return f"{self.proc}.{next(self._id_counter)}"

    def new_ref(self) -> int:
        return next(self._ref_counter)

    def make_ref(self, actor_id: str, name: str | None = None) -> ActorRef:
        return ActorRef(self.node_id, self.proc, actor_id, self.pid, name)

    # -- sending -------------------------------------------------------------

    def _send(self, proc: str, kind: int, to: str | None, frm: Any, ref: int | None, body: Any) -> None:
        if proc not in self.dead_procs:
            self._emit(proc, proc, encode_frame(kind, to, frm, ref, self.proc, body))

    def _emit(self, proc: str, dest: str, frame: bytes) -> None:
        """Send ``frame`` to ``dest`` (``proc``'s endpoint or one of its reply
        channels) after whatever this thread has batched for ``proc``."""
        outbox = _thread_state.outbox
        if outbox is None:
            self.send_frame(dest, frame)
            return
        with outbox.lock:
            if proc in outbox.batches:
                self._flush_locked(outbox, proc)
            self.send_frame(dest, frame)

    def route(self, proc: str, kind: int, to: str | None, frm: Any, ref: int | None, body: Any) -> None:
        """Deliver a signal: in place when the target lives here, else over ZeroMQ."""
        if proc == self.proc:
            self._deliver(kind, to, frm, ref, body, self.proc)
        else:
            self._send(proc, kind, to, frm, ref, body)

    # -- cast batching -------------------------------------------------------

    def _post(self, proc: str, kind: int, to: str, body: Any) -> None:
        """A cast or send: batched per destination process on actor threads."""
        cell = _thread_state.cell
        if cell is not None and not cell.alive:
            # A killed actor's callback runs on (Python cannot stop it), but
            # a dead process sends nothing.
            return
        if proc == self.proc:
            self._deliver(kind, to, None, None, body, proc)
            return
        outbox = _thread_state.outbox
        if outbox is None:  # not an actor thread: sent at once
            self._send(proc, kind, to, None, None, body)
            return
        if proc in self.dead_procs:
            return
        with outbox.lock:
            batch = outbox.batches.get(proc)
            if batch is None:
                batch = outbox.batches[proc] = _Batch()
                if not outbox.armed:
                    outbox.armed = True
                    self.call_later(CAST_FLUSH_AFTER, lambda: self._flush_stale(outbox))
            batch.items.append([kind, to, body])
            if batch.plain and not is_scalar(body):
                batch.plain = False
            if len(batch.items) >= CAST_BATCH or (outbox.unbatched and proc in outbox.unbatched):
                self._flush_locked(outbox, proc)

    def _flush_locked(self, outbox: _Outbox, proc: str) -> None:
        batch = outbox.batches.pop(proc)
        items = batch.items
        if len(items) == 1:
            kind, to, body = items[0]
            frame = encode_frame(kind, to, None, None, self.proc, body)
            if outbox.unbatched and len(frame) * CAST_BATCH < BIG_BATCH:
                outbox.unbatched.discard(proc)  # small casts again: batch them
        else:
            frame = encode_frame(K_BATCH, None, None, None, self.proc, items, plain=batch.plain)
            if len(frame) > BIG_BATCH:
                outbox.unbatched.add(proc)
                for kind, to, body in items:
                    self.send_frame(proc, encode_frame(kind, to, None, None, self.proc, body))
                return
        self.send_frame(proc, frame)

    def _flush_stale(self, outbox: _Outbox) -> None:
        """I/O thread: a batch waited too long for its callback to return."""
        with outbox.lock:
            outbox.armed = False  # a cast from now on arms a timer of its own
        self.flush_outbox(outbox)

    def flush_outbox(self, outbox: _Outbox) -> None:
        """Send what an actor's thread left batched, from any thread: the
        death of an actor handled on another thread (a ``kill``) must not
        overtake the casts and sends it made before it died."""
        with outbox.lock:
            if not outbox.closed:
                while outbox.batches:
                    self._flush_locked(outbox, next(iter(outbox.batches)))

    def flush_casts(self) -> None:
        """Send what this thread's casts left batched: when an actor's
        callback returns, and before the thread blocks in the kernel."""
        outbox = _thread_state.outbox
        if outbox is not None and outbox.batches:
            self.flush_outbox(outbox)

    def end_actor_thread(self) -> None:
        """An actor thread ends: flush, close its outbox, pool its sockets."""
        outbox = _thread_state.outbox
        if outbox is not None:
            with outbox.lock:
                while outbox.batches:
                    self._flush_locked(outbox, next(iter(outbox.batches)))
                outbox.closed = True
            _thread_state.outbox = None
        self.release_thread_sockets()

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
        if (cell is not None and cell.id == target.id and target.proc == self.proc) or \
                threading.current_thread() is self._io_thread:
            self._post(target.proc, kind, target.id, body)
            return
        try:
            self._request(target, K_CALL, Admit(kind, body, timeout),
                          None if timeout is None else timeout + BLOCK_GRACE)
        except CallTimeout:
            self.stats.increment("actors.mailbox.block_timeouts")
        except Exit:  # full past its timeout (counted there), or the actor is dead
            pass

    def stop_actor(self, target: ActorRef, reason: Any, timeout: float | None) -> Any:
        return self._request(target, K_STOP, reason, timeout)

    def _request(self, target: ActorRef, kind: int, body: Any, timeout: float | None) -> Any:
        cell, proc, ref = self._open_request(target)
        if proc == self.proc:
            waiter = _Waiter(proc)
            self.pending[ref] = waiter
            self._deliver(kind, target.id, cell.id if cell else None, ref, body, proc)
            self._await(waiter, ref, target, timeout)
            if waiter.ok:
                return waiter.value
            raise _exit_of(waiter.value)
        # Across processes the reply comes straight to this thread's channel.
        channel = self.reply_channel()
        self.pending[ref] = _ChannelWaiter(proc, self, channel.name, ref)
        self._emit(proc, proc, encode_frame(kind, target.id, [cell.id if cell else None, channel.name], ref,
                                            self.proc, body))
        ok, value = self._await_channel(channel, ref, target, timeout)
        if ok:
            return value
        raise _exit_of(value)

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

    def _dead_reason(self, proc: str) -> str:
        """What a request to a process known gone fails with: ``noconnection``
        for one of another node that was lost, ``noproc`` otherwise."""
        return "noconnection" if self.dead_procs.get(proc) == "noconnection" and "|" in proc else "noproc"

    async def acall(self, target: ActorRef, request: Any, timeout: float | None) -> Any:
        """`call` for asyncio programs: the reply comes back through this
        process's I/O thread, which schedules it onto the running loop; no
        thread blocks on the call, and the loop runs on meanwhile."""
        loop = asyncio.get_running_loop()
        if target.blocks:
            request = Admit(K_CALL, request, timeout)
        cell, proc, ref = self._open_request(target)
        future: asyncio.Future[Any] = loop.create_future()
        self.pending[ref] = _FutureWaiter(proc, loop, future)
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

    def _await_channel(self, channel: ReplyChannel, ref: int, target: Any,
                       timeout: float | None) -> tuple[bool, Any]:
        """Read this thread's channel until the answer to ``ref`` comes.

        Frames for other refs are late answers to calls that timed out: they
        are dropped, as is garbage (counted).  On timeout the pending entry is
        withdrawn first, so nobody answers it later.
        """
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
                kind, _to, _frm, got, _src, body = decode_frame(frame)
            except FrameError:
                self._count_garbage()
                continue
            if got != ref or (kind != K_REPLY and kind != K_REPLY_EXIT):
                continue
            self.pending.pop(ref, None)
            return kind == K_REPLY, body

    def _await(self, waiter: _Waiter, ref: int, target: Any, timeout: float | None) -> None:
        """Block until ``waiter`` is resolved; `CallTimeout` after ``timeout``.

        On timeout the pending entry is withdrawn, so a late answer is dropped
        on arrival and never reaches a later request.
        """
        self.flush_casts()
        loan = self._loan
        if loan is not None:  # the answer comes through the endpoint: nobody may sit on it
            loan.blocking()
        if not waiter.lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            if self.pending.pop(ref, None) is not None:
                raise CallTimeout(target, timeout)
            waiter.lock.acquire()  # resolved in the meantime: take the result

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
        waiter = _Waiter(proc, callback)
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

    def reply(self, from_: From, value: Any) -> None:
        self._answer(from_, K_REPLY, value)

    def reply_exit(self, from_: From, reason: Any) -> None:
        self._answer(from_, K_REPLY_EXIT, reason)

    def _answer(self, from_: From, kind: int, value: Any) -> None:
        channel = from_.channel
        if channel is None:
            self.route(from_.proc, kind, None, None, from_.ref, value)
            return
        proc = from_.proc
        if proc in self.dead_procs:
            return
        self._emit(proc, channel, encode_frame(kind, None, None, from_.ref, self.proc, value))

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

    def is_alive(self, target: ActorRef, timeout: float = 5.0) -> bool:
        if target.proc in self.dead_procs:
            return False
        if target.proc == self.proc:
            return target.id in self.cells
        try:
            return bool(self.sys_request(target.proc, "alive", (target.id,), timeout))
        except Exit:
            return False

    # -- receiving -----------------------------------------------------------

    def handle_lent_frames(self, frames: list[bytes]) -> None:
        """Frames read by the actor the endpoint is lent to, on its thread: handled
        as the I/O thread would, not as that actor (whose casts are batched
        and who would be taken for a spawner's parent)."""
        state = _thread_state
        cell, outbox = state.cell, state.outbox
        state.cell = state.outbox = None
        try:
            self.handle_frames(frames)
        except Exception:
            log.exception("frame handling failed")
        finally:
            state.cell, state.outbox = cell, outbox

    def handle_frames(self, frames: list[bytes]) -> None:
        batch: dict[Any, _Mail] = {}
        on_frame = self._on_frame
        for frame in frames:
            on_frame(frame, batch)
        if batch:
            self._flush_batch(batch)

    def _on_frame(self, frame: bytes, batch: dict[Any, _Mail]) -> None:
        try:
            kind, to, frm, ref, src, body = decode_frame(frame)
        except FrameError:  # garbage is dropped and counted, never fatal
            if self.relay is not None and frame[:1] == b"R":  # a host's frame for another node
                try:
                    dest, inner = unwrap_relay(frame)
                except FrameError:
                    self._count_garbage()
                    return
                self.relay(dest, inner)
                return
            self._count_garbage()
            return
        try:
            if kind == K_BATCH:
                if type(body) is not list or any(type(i) is not list or len(i) != 3 or
                                                 (i[0] != K_CAST and i[0] != K_INFO) for i in body):
                    self._count_garbage()
                    return
                cells = self.cells
                for item_kind, item_to, item_body in body:
                    cell = cells.get(item_to)
                    if cell is not None and cell.limit is not None:
                        # A bounded mailbox takes (or drops) each at once:
                        # a drained burst is never held decoded in full.
                        if batch:
                            self._flush_batch(batch)
                        cell.enqueue(item_kind, item_body)
                    elif cell is not None:
                        mail = batch.get(cell)
                        if mail is None:
                            mail = batch[cell] = _Mail()
                        mail.items.append((item_kind, item_body, None))
                    else:
                        if batch:
                            self._flush_batch(batch)
                        self._deliver(item_kind, item_to, None, None, item_body, src)
                return
            if kind == K_CAST or kind == K_INFO or kind == K_CALL:
                cell = self.cells.get(to)
                if cell is not None:
                    # Gathered per actor, which wakes once per read: a server
                    # sent a burst of requests is woken once for the burst.
                    mail = batch.get(cell)
                    if mail is None:
                        mail = batch[cell] = _Mail()
                    if kind == K_CALL:
                        from_ = From(src, ref, frm[0], frm[1]) if type(frm) is list else From(src, ref, frm)
                        mail.items.append((kind, body, from_))
                        mail.calls.append(from_)
                    else:
                        mail.items.append((kind, body, None))
                    return
            elif batch:
                self._flush_batch(batch)
            self._deliver(kind, to, frm, ref, body, src)
        except Exception:  # a well-formed frame with a body its kind cannot take
            self._count_garbage()
            log.exception("failed to deliver a frame of kind %s to %s", kind, to)

    def _count_garbage(self) -> None:
        self.dropped_frames += 1
        self.stats.increment("actors.transport.dropped_frames")

    def _flush_batch(self, batch: dict[Any, _Mail]) -> None:
        for cell, mail in batch.items():
            for from_ in cell.enqueue_batch(mail.items, mail.calls):
                self.reply_exit(from_, "noproc")
        batch.clear()

    def _deliver(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        if kind == K_CALL or kind == K_STOP:
            cell = self.cells.get(to)
            if type(frm) is list:  # [caller, reply channel]
                from_ = From(src, ref, frm[0], frm[1])
            else:
                from_ = From(src, ref, frm)
            if cell is None or not cell.enqueue_call(kind, body, from_):
                self.reply_exit(from_, "noproc")
            return
        if kind == K_REPLY or kind == K_REPLY_EXIT:
            waiter = self.pending.pop(ref, None)
            if waiter is not None:
                waiter.resolve(kind == K_REPLY, body)
            return
        if kind == K_INFO or kind == K_CAST:
            cell = self.cells.get(to)
            if cell is not None:
                cell.enqueue(kind, body)
            else:
                sink = self.sinks.get(to)
                if sink is not None:
                    sink.on_message(kind, body)
            return
        if kind == K_SYS:
            self._handle_sys(src, ref, body)
            return
        if kind == K_EXIT:
            sender, reason, how = body
            cell = self.cells.get(to)
            if cell is not None:
                cell.exit_signal(sender, reason, how)
            return
        if kind == K_LINK:
            linker = body
            cell = self.cells.get(to)
            ok = cell is not None and cell.add_link(linker)
            if ref is not None:
                self.route(src, K_REPLY, None, None, ref, ok)
            elif not ok:
                self.route(linker.proc, K_EXIT, linker.id, None, None, (self.make_ref(to), "noproc", EXIT_LINKED))
            return
        if kind == K_UNLINK:
            cell = self.cells.get(to)
            if cell is not None:
                cell.remove_link(body)
            return
        if kind == K_MONITOR:
            mref, watcher, target = body
            cell = self.cells.get(to)
            ok = cell is not None and cell.add_monitor(mref, watcher)
            if not ok:
                self.route(watcher.proc, K_DOWN, watcher.id, None, None, (mref, target, "noproc"))
            if ref is not None:
                self.route(src, K_REPLY, None, None, ref, ok)
            return
        if kind == K_DEMONITOR:
            cell = self.cells.get(to)
            if cell is not None:
                cell.remove_monitor(body)
            return
        if kind == K_DOWN:
            mref, target, reason = body
            cell = self.cells.get(to)
            if cell is not None:
                cell.down(mref, target, reason)
            else:
                sink = self.sinks.get(to)
                if sink is not None:
                    sink.down(mref, target, reason)
            return
        self._count_garbage()

    # -- link / monitor helpers used by cells and the node --------------------

    def send_exit(self, target: ActorRef, sender: ActorRef | None, reason: Any, how: int = EXIT_LINKED) -> None:
        """An exit signal; ``how`` says where it comes from (`EXIT_LINKED`:
        the sender died and was linked; `EXIT_SENT`/`EXIT_KILL`: ``exit/2``)."""
        self.route(target.proc, K_EXIT, target.id, None, None, (sender, reason, how))

    def send_exit_signal(self, target: ActorRef, sender: ActorRef | None, reason: Any) -> None:
        """``exit(Pid, Reason)``: ``kill`` is untrappable, anything else is not."""
        self.send_exit(target, sender, reason, EXIT_KILL if reason == "kill" else EXIT_SENT)

    def send_down(self, watcher: ActorRef, mref: Any, target: ActorRef, reason: Any) -> None:
        self.route(watcher.proc, K_DOWN, watcher.id, None, None, (mref, target, reason))

    def request_monitor(self, watcher: ActorRef, target: ActorRef, mref: Any, timeout: float = 10.0) -> None:
        """Establish a monitor before returning, as a local ``monitor/2`` does in
        Erlang: a signal sent to the target afterwards, from any process, cannot
        overtake it.  A dead target gets the watcher a DOWN ``noproc``
        (``noconnection`` for one on a node that is lost, as in Erlang)."""
        if target.proc in self.dead_procs:
            self.send_down(watcher, mref, target, self._dead_reason(target.proc))
            return
        if target.proc == self.proc:
            self._deliver(K_MONITOR, target.id, None, None, (mref, watcher, target), self.proc)
            return
        ref = next(self._ref_counter)
        waiter = _Waiter(target.proc)
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
        waiter = _Waiter(target.proc)
        self.pending[ref] = waiter
        self._send(target.proc, K_LINK, target.id, linker.id, ref, linker)
        self._await(waiter, ref, target, timeout)
        return bool(waiter.ok and waiter.value)

    def request_unlink(self, linker: ActorRef, target: ActorRef) -> None:
        self.route(target.proc, K_UNLINK, target.id, None, None, linker)

    # -- process death ---------------------------------------------------------

    def proc_down(self, proc: str, reason: Any) -> None:
        """A whole OS process of the node died: fail what pointed into it.

        Its sockets and socket files are cleaned up last, once everything
        here that pointed into it has been told (a supervisor restarting a
        child waits on this)."""
        if not self.mark_gone(proc, reason):
            return
        for ref, waiter in list(self.pending.items()):
            if waiter.proc == proc and self.pending.pop(ref, None) is not None:
                waiter.resolve(False, reason)
        for cell in list(self.cells.values()):
            cell.proc_down(proc, reason)
        for sink in list(self.sinks.values()):
            sink.proc_down(proc, reason)
        self.close_peer(proc)

    def learn_node(self, node_id: str, address: str, public: str | None, secret: str | None) -> None:
        """A host hears from its node process that node ``node_id`` is up at
        ``address``: frames for it may leave on a connection of this host's own."""
        if self.direct is None or node_id in self.dead_nodes:
            return
        self.direct.learn(node_id, address, public.encode() if public else None,
                          secret.encode() if secret else None)

    def node_down(self, node_id: str, reason: Any) -> None:
        """Another node is lost: every process of it that anything here
        points at is down with ``reason`` (``noconnection``), and later
        sends to any of them are dropped."""
        prefix = f"{node_id}|"
        procs = {w.proc for w in list(self.pending.values()) if isinstance(w.proc, str)}
        for cell in list(self.cells.values()):
            with cell.lock:
                procs.update(r.proc for r in cell.links.values())
                procs.update(r.proc for r in cell.monitors_in.values())
                procs.update(r.proc for r in cell.monitors_out.values())
        for sink in list(self.sinks.values()):
            target = getattr(sink, "target", None)
            if target is not None:
                procs.add(target.proc)
        with self._pool_lock:
            procs.update(owner_of(p) for p in self._peers)
        self.dead_nodes[node_id] = reason
        if self.direct is not None:
            self.direct.forget(node_id)
        for proc in procs:
            if proc.startswith(prefix):
                self.proc_down(proc, reason)

    # -- system requests -------------------------------------------------------

    def procs_gone_before(self, gone: list[tuple[str, Any]]) -> None:
        """``[(proc, reason)]``: processes that died before this one was up
        (the node tells a new host, before its first spawn).  Nothing here
        can point into them yet, so they are only marked gone: a later
        request to one of them fails at once (``noproc``) instead of being
        sent to a socket nobody reads."""
        for proc, reason in gone:
            self.mark_gone(proc, reason)

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

    def _install_default_handlers(self) -> None:
        self.register_sys("alive", lambda src, actor_id: actor_id in self.cells)
        self.register_sys("proc_down", lambda src, proc, reason: self.proc_down(proc, reason))
        self.register_sys("procs_down", lambda src, gone: self.procs_gone_before(gone))
        self.register_sys("node_down", lambda src, node_id, reason: self.node_down(node_id, reason))
        self.register_sys("net_peer", lambda src, *peer: self.learn_node(*peer))
        self.register_sys("stats", lambda src: self.stats_snapshot())
        self.register_sys("connect", lambda src, peers: [self.connect_peer(p) for p in peers] and None)
        self.register_sys("info", lambda src: self.info())
        self.register_sys("adopt_name", self._adopt_name)
        self.register_sys("drop_name", self._drop_name)

    def stats_snapshot(self) -> dict[str, Any]:
        """This process's metrics, with the endpoint loan's counts (kept as
        plain attributes on its hot path, and read here)."""
        snap = self.stats.snapshot()
        snap["actors"] = self.meters.snapshot(self.cells)
        if self.direct is not None and self.direct.dropped:
            snap.setdefault("counters", {})["actors.net.direct_dropped"] = self.direct.dropped
        loan = self._loan
        if loan is not None:
            counters = snap.setdefault("counters", {})
            counters["actors.transport.lent_frames"] = loan.frames_read
            counters["actors.transport.endpoint_takeovers"] = loan.takeovers
            counters["actors.transport.endpoint_returns"] = loan.returns
        return snap

    # -- names -------------------------------------------------------------------

    def register_name(self, name: str, ref: ActorRef) -> ActorRef | None:
        """Take ``name``; returns the holder when it is taken by another actor."""
        if self.registry is not None:
            return self.registry.register(name, ref)
        return self.sys_request(self.node_proc, "register", (name, ref))

    def unregister_name(self, name: str, ref: ActorRef | None = None) -> bool:
        if self.registry is not None:
            return self.registry.unregister(name, ref)
        return bool(self.sys_request(self.node_proc, "unregister", (name, ref)))

    def unregister_name_then(self, name: str, ref: ActorRef, then: Callable[..., None]) -> None:
        """Unregister without blocking this thread, then run ``then``."""
        if self.registry is not None:
            self.registry.unregister(name, ref)
            then()
            return
        self.sys_request(self.node_proc, "unregister", (name, ref), callback=lambda ok, v: then())

    def _adopt_name(self, src: str, actor_id: str, name: str) -> Any:
        cell = self.cells.get(actor_id)
        return "dead" if cell is None else cell.adopt_name(name)

    def _drop_name(self, src: str, actor_id: str, name: str) -> None:
        cell = self.cells.get(actor_id)
        if cell is not None:
            cell.drop_name(name)

    def whereis(self, name: str) -> ActorRef | None:
        if self.registry is not None:
            return self.registry.whereis(name)
        return self.sys_request(self.node_proc, "whereis", (name,))

    def channel_names(self) -> list[str]:
        """This process's reply channels (a new host connects to the node's
        ahead of time, so its first answers need no handshake)."""
        with self._pool_lock:
            return [c.name for c in self._channels]

    def info(self) -> list[dict[str, Any]]:
        """A cheap snapshot of the actors of this process."""
        return [cell.info() for cell in list(self.cells.values())]

    # -- timers ------------------------------------------------------------------

    def send_after(self, seconds: float, target: ActorRef, message: Any) -> Timer:
        return self.add_timer(Timer(time.monotonic() + max(0.0, seconds), target, message))

    def cancel_timer(self, timer: Timer) -> float | bool:
        """Seconds that were left, or False when the timer already fired, was
        cancelled, or its target is dead: as ``erlang:cancel_timer/1``, a timer
        addressed to a process goes with that process.  (A target on another
        node is not asked: Erlang's timers only address local processes.)"""
        left = Transport.cancel_timer(timer)
        if left is False:
            return False
        target = timer.target
        if isinstance(target, ActorRef) and target.node_id == self.node_id:
            try:
                if not self.is_alive(target):
                    return False
            except CallTimeout:  # no answer: it may live, as far as we know
                pass
        return left

    def fire_timer(self, timer: Timer) -> None:
        target = timer.target
        self.route(target.proc, K_INFO, target.id, None, None, timer.message)


#: Returned by a deferring system handler that replies later itself.
DEFER = object()

_ref.set_runtime_resolver(runtime_for, current_runtime)
