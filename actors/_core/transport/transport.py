"""The bottom layer of the kernel: sockets, frames on the wire, the I/O loop.

A `Transport` is one OS process's view of the node's ipc fabric.  It binds one
ZeroMQ PULL socket in the node's 0700 runtime directory, runs one I/O thread
that drains it, fires timers from a heap, runs tasks handed to it and watches
file descriptors (host pidfds in the node process).  Any thread sends
directly, with no thread hop, through the process's one PUSH socket per peer
(shared under a lock, so one pipe per pair of processes keeps their order).
A thread that calls across processes reads its replies from its own reply
channel (`ReplyChannel`), pooled and handed to the next thread when it ends.

It knows nothing of actors: a frame is bytes, a peer is a process name, and
what arrives is handed, a drained batch at a time, to `handle_frames`, which
the layer above (`actors._core.runtime.runtime`) overrides.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from actors._core.base import stats as _stats
from actors._core.transport.endpoint_loan import IO, EndpointLoan, drain, timers_available

__all__ = ["ReplyChannel", "Timer", "Transport", "owner_of"]

log = logging.getLogger("actors.transport")

#: Frames queued at most towards one peer (ZeroMQ's high-water marks, its
#: default), on the sending side and again on the receiving side of each
#: pipe.  A frame is one signal or a batch of at most 64 casts, so a pipe
#: holds a few thousand frames at most, and memory stays bounded however
#: fast a sender is: a full pipe holds the sender back (`Transport.send_frame`).
SNDHWM = 1000
RCVHWM = 1000
#: Seconds a sender waits, at most, for room in a full pipe before the frame
#: is dropped and counted: the receiving process reads its endpoint on a
#: thread that never waits, so a pipe stays full only while that process
#: is stopped or wedged.
SEND_WAIT = 30.0


def owner_of(peer: str) -> str:
    """The process a peer name belongs to: a reply channel ``h1~r3`` is h1's."""
    return peer.partition("~")[0]


class ReplyChannel:
    """A PULL socket that one calling thread binds and reads itself.

    Replies to that thread's calls are sent straight to it, so no other
    thread wakes on the way: the round trip costs what a raw DEALER/ROUTER
    one does.  A channel belongs to one thread at a time and goes back to
    the transport's pool when the thread ends.
    """

    __slots__ = ("name", "sock", "timeout_ms")

    def __init__(self, name: str, sock: zmq.Socket) -> None:
        self.name = name
        self.sock = sock
        self.timeout_ms = -1


class _ChannelLease:
    """Held in a thread's locals: when the thread ends (and its locals go),
    the channel returns to the pool for the next thread."""

    __slots__ = ("channel", "pool", "lock")

    def __init__(self, channel: ReplyChannel, pool: list[ReplyChannel], lock: threading.Lock) -> None:
        self.channel = channel
        self.pool = pool
        self.lock = lock

    def __del__(self) -> None:
        try:
            with self.lock:
                self.pool.append(self.channel)
        except Exception:  # interpreter teardown: nothing left to pool for
            pass


class _Peer:
    """The one PUSH socket this process sends to a peer through, shared by
    all its threads under ``lock``: one pipe per pair of processes keeps
    their order, and a connection made once (ahead of time, for a spare
    host) serves every thread."""

    __slots__ = ("sock", "lock", "stalled")

    def __init__(self, sock: zmq.Socket) -> None:
        self.sock: zmq.Socket | None = sock
        self.lock = threading.Lock()
        #: A wait for room ran out: until a send gets through again, the
        #: next frames do not wait (a stuck reader costs one wait, not one each).
        self.stalled = False


class _Relay:
    """Stands in for the socket to a process of another node (``<node_id>|<proc>``):
    what is sent to it goes to `Transport.send_remote`.  Local peers never
    see it, so the fast path pays nothing for distribution."""

    __slots__ = ("transport", "dest", "closed")

    def __init__(self, transport: "Transport", dest: str) -> None:
        self.transport = transport
        self.dest = dest
        self.closed = False

    def send(self, frame: bytes, flags: int = 0) -> None:
        self.transport.send_remote(self.dest, frame)

    def close(self, linger: int = 0) -> None:
        self.closed = True


class Timer:
    """A pending `send_after`; cancel it with `cancel_timer`.

    The transport only orders timers by deadline; ``target`` and ``message``
    are the layer above's (a ``target`` of None makes ``message`` a callable
    run on the I/O thread).
    """

    __slots__ = ("deadline", "target", "message", "cancelled", "fired")

    def __init__(self, deadline: float, target: Any, message: Any) -> None:
        self.deadline = deadline
        self.target = target
        self.message = message
        self.cancelled = False
        self.fired = False

    def __lt__(self, other: "Timer") -> bool:
        return self.deadline < other.deadline

    def __repr__(self) -> str:
        return f"<Timer to={self.target!r} in={self.deadline - time.monotonic():.3f}s>"


class Transport:
    """One process's endpoint, outgoing sockets and I/O thread."""

    def __init__(self, rundir: str, proc: str) -> None:
        self.rundir = rundir
        self.proc = proc
        self.pid = os.getpid()
        self.ctx = zmq.Context()
        self.ctx.setsockopt(zmq.LINGER, 0)
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.setsockopt(zmq.RCVHWM, RCVHWM)
        self.endpoint = self.endpoint_of(proc)
        self.pull.bind(self.endpoint)
        #: Peers known to be gone (name -> why, opaque here); sends to them are dropped.
        self.dead_procs: dict[str, Any] = {}
        self._timers: list[Timer] = []
        self._timers_lock = threading.Lock()
        self._tasks: list[Callable[[], None]] = []
        self._tasks_lock = threading.Lock()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._fd_handlers: dict[int, Callable[[int], None]] = {}
        self._peers: dict[str, _Peer] = {}
        self._pool_lock = threading.Lock()
        self._tls = threading.local()
        self._channels: list[ReplyChannel] = []
        self._channel_pool: list[ReplyChannel] = []
        self._channel_counter = 0
        self._stopping = False
        self._loan: EndpointLoan | None = None
        self.stats = _stats.current()
        self._io_thread = threading.Thread(target=self._io_loop, name=f"actors-io-{proc}", daemon=True)

    # -- hooks for the layer above ------------------------------------------------

    def handle_frames(self, frames: list[bytes]) -> None:
        """Frames drained from the endpoint, in arrival order (I/O thread)."""

    def fire_timer(self, timer: Timer) -> None:
        """A timer with a target fell due (I/O thread)."""

    def send_remote(self, dest: str, frame: bytes) -> None:
        """A frame for ``dest``, a process of another node (``<node_id>|<proc>``)."""

    def handle_lent_frames(self, frames: list[bytes]) -> None:
        """Frames read by the borrower of the endpoint (`lend_endpoint`), on its thread."""
        self.handle_frames(frames)

    # -- lending the endpoint --------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping

    def lend_endpoint(self, on_returned: Callable[[], None]) -> EndpointLoan | None:
        """Lend the endpoint to the thread that will call the loan's ``serve``
        (see `actors._core.transport.endpoint_loan`); None when it is lent already, or this
        system cannot time a takeover."""
        if self._loan is not None or self._stopping or not timers_available():
            return None
        # Made on the I/O thread (a spawn it is handling), the loan starts
        # free: the I/O thread has finished reading for this turn and stops
        # polling the endpoint at the top of the next one.
        loan = EndpointLoan(self, on_returned, free=threading.current_thread() is self._io_thread)
        self._loan = loan
        self.wake()  # the I/O thread starts polling the loan's timer
        return loan

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        self._io_thread.start()

    def endpoint_of(self, proc: str) -> str:
        return f"ipc://{self.rundir}/{proc}.sock"

    def shutdown(self, linger: bool = False) -> None:
        """Stop the I/O thread and close every socket.

        With ``linger`` the sockets first deliver what they hold (a host that
        halts must not lose its last exit signals); otherwise they drop it.
        """
        self._stopping = True
        self.wake()
        loan = self._loan
        if loan is not None and not loan.wait_released(5.0):
            log.warning("the endpoint's borrower did not let go of it in 5 s")
        if self._io_thread.is_alive() and threading.current_thread() is not self._io_thread:
            self._io_thread.join(timeout=5.0)
        with self._pool_lock:
            peers = list(self._peers.values())
            self._peers.clear()
        for peer in peers:
            with peer.lock:
                sock, peer.sock = peer.sock, None
            if sock is not None:
                sock.close(linger=2000 if linger else 0)
        with self._pool_lock:
            channels = list(self._channels)
        for channel in channels:
            channel.sock.close(linger=0)
            try:
                os.unlink(self.endpoint_of(channel.name)[len("ipc://") :])
            except OSError:
                pass
        self.pull.close(linger=0)
        if loan is not None:
            loan.close()
        self.ctx.term()
        try:
            os.unlink(self.endpoint[len("ipc://") :])
        except OSError:
            pass
        try:
            os.close(self._wake_fd)
        except OSError:
            pass

    # -- sending -------------------------------------------------------------

    def release_thread_sockets(self) -> None:
        """Give this thread's reply channel to the pool; called when an actor thread ends."""
        self._tls.chan = None  # the lease hands the reply channel back

    def reply_channel(self) -> ReplyChannel:
        """This thread's reply channel, bound on first use (or from the pool)."""
        lease = getattr(self._tls, "chan", None)
        if lease is not None:
            return lease.channel
        with self._pool_lock:
            channel = self._channel_pool.pop() if self._channel_pool else None
            if channel is None:
                self._channel_counter += 1
                name = f"{self.proc}~r{self._channel_counter}"
        if channel is None:
            sock = self.ctx.socket(zmq.PULL)
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.bind(self.endpoint_of(name))
            sock.bind(f"inproc://{name}")  # this process's own threads answer here
            channel = ReplyChannel(name, sock)
            with self._pool_lock:
                self._channels.append(channel)
        self._tls.chan = _ChannelLease(channel, self._channel_pool, self._pool_lock)
        return channel

    def send_frame(self, proc: str, frame: bytes, wait: float = SEND_WAIT) -> None:
        """Queue ``frame`` for ``proc``'s endpoint (or a reply channel's);
        never raises for a peer that is gone.  When the pipe to ``proc`` is
        full the sending thread waits for room (backpressure: nothing is
        lost and nothing grows), at most ``wait`` seconds, except this
        process's I/O thread, which must keep reading, and drops and counts
        instead."""
        if proc in self.dead_procs or ("~" in proc and owner_of(proc) in self.dead_procs):
            return
        peer = self._peers.get(proc) or self.connect_peer(proc)
        with peer.lock:
            sock = peer.sock
            if sock is None:
                return
            try:
                sock.send(frame, zmq.NOBLOCK)
                if peer.stalled:
                    peer.stalled = False
            except zmq.Again:
                if peer.stalled or not self._send_when_room(proc, sock, frame, wait):
                    peer.stalled = wait > 0 and threading.current_thread() is not self._io_thread
                    self.stats.increment("actors.transport.send_dropped")
            except zmq.ZMQError:
                if not self._stopping:
                    raise

    def _send_when_room(self, proc: str, sock: zmq.Socket, frame: bytes, wait: float) -> bool:
        """Wait (at most ``wait`` seconds) for the full pipe to ``proc`` to
        take ``frame``; False when this thread may not wait, or ``proc`` went."""
        if wait <= 0 or threading.current_thread() is self._io_thread:
            return False
        self.stats.increment("actors.transport.send_waits")
        owner = owner_of(proc)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self._stopping or owner in self.dead_procs:
                return False
            if sock.poll(50, zmq.POLLOUT):
                try:
                    sock.send(frame, zmq.NOBLOCK)
                    return True
                except zmq.Again:
                    continue
        return False

    def is_connected(self, proc: str) -> bool:
        """Whether this process already has a socket to ``proc``."""
        return proc in self._peers

    def connect_peer(self, proc: str) -> _Peer:
        """The socket to ``proc``, connected now if it was not yet (the node
        connects to a spare host as soon as it is up, off any call's path).
        A reply channel of this very process is reached over inproc."""
        with self._pool_lock:
            peer = self._peers.get(proc)
            if peer is None and "|" in proc:
                peer = self._peers[proc] = _Peer(_Relay(self, proc))  # type: ignore[arg-type]
            elif peer is None:
                sock = self.ctx.socket(zmq.PUSH)
                sock.setsockopt(zmq.SNDHWM, SNDHWM)
                sock.setsockopt(zmq.LINGER, 2000)
                if owner_of(proc) == self.proc and "~" in proc:
                    sock.connect(f"inproc://{proc}")
                else:
                    sock.connect(self.endpoint_of(proc))
                peer = self._peers[proc] = _Peer(sock)
        return peer

    def forget_peer(self, proc: str, why: Any) -> bool:
        """Mark ``proc`` gone: later sends to it are dropped and every thread
        closes its socket to it.  False when it was already gone."""
        if not self.mark_gone(proc, why):
            return False
        self.close_peer(proc)
        return True

    def mark_gone(self, proc: str, why: Any) -> bool:
        """The first half of `forget_peer`: later sends to ``proc`` are dropped.
        False when it was already gone."""
        if proc == self.proc or proc in self.dead_procs:
            return False
        self.dead_procs[proc] = why
        return True

    def close_peer(self, proc: str) -> None:
        """The second half of `forget_peer`: close the sockets to ``proc`` (and
        its reply channels) and remove its socket files."""
        prefix = f"{proc}~"
        with self._pool_lock:
            gone = [n for n in self._peers if n == proc or n.startswith(prefix)]
            peers = [self._peers.pop(n) for n in gone]
        for peer in peers:
            with peer.lock:
                sock, peer.sock = peer.sock, None
            if sock is not None:
                sock.close(linger=0)
        try:
            names = [n for n in os.listdir(self.rundir) if n.startswith(prefix)]
        except OSError:
            names = []
        for name in [f"{proc}.sock", *names]:
            try:
                os.unlink(os.path.join(self.rundir, name))
            except OSError:
                pass

    # -- timers ------------------------------------------------------------------

    def add_timer(self, timer: Timer) -> Timer:
        with self._timers_lock:
            heapq.heappush(self._timers, timer)
            earliest = self._timers[0] is timer
        if earliest:
            self.wake()
        return timer

    def call_later(self, seconds: float, fn: Callable[[], None]) -> Timer:
        """Run ``fn`` on the I/O thread after ``seconds``."""
        return self.add_timer(Timer(time.monotonic() + max(0.0, seconds), None, fn))

    @staticmethod
    def cancel_timer(timer: Timer) -> float | bool:
        """Seconds that were left, or False when it already fired or was cancelled."""
        if timer.fired or timer.cancelled:
            return False
        timer.cancelled = True
        return max(0.0, timer.deadline - time.monotonic())

    def _fire_timers(self) -> float | None:
        if not self._timers:
            return None
        now = time.monotonic()
        due: list[Timer] = []
        with self._timers_lock:
            while self._timers and self._timers[0].deadline <= now:
                due.append(heapq.heappop(self._timers))
            next_deadline = self._timers[0].deadline if self._timers else None
        for timer in due:
            if not timer.cancelled:
                timer.fired = True
                try:
                    if timer.target is None:
                        timer.message()
                    else:
                        self.fire_timer(timer)
                except Exception:
                    log.exception("timer failed")
        return next_deadline

    # -- the I/O thread ------------------------------------------------------------

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the I/O thread."""
        with self._tasks_lock:
            self._tasks.append(fn)
        self.wake()

    def watch_fd(self, fd: int, handler: Callable[[int], None]) -> None:
        """Call ``handler(fd)`` on the I/O thread whenever ``fd`` is readable.

        A ready descriptor is served in the same turn of the loop, right
        after the frames already queued on the endpoint (a dead host's last
        frames come before the report of its death).
        """
        self.call_soon(lambda: self._fd_handlers.__setitem__(fd, handler))

    def unwatch_fd(self, fd: int) -> None:
        self.call_soon(lambda: self._fd_handlers.pop(fd, None))

    def wake(self) -> None:
        try:
            os.eventfd_write(self._wake_fd, 1)
        except OSError:
            pass

    def _io_loop(self) -> None:
        pull = self.pull
        registered: dict[int, bool] = {}
        poller = zmq.Poller()
        poller.register(pull, zmq.POLLIN)
        poller.register(self._wake_fd, zmq.POLLIN)
        # While the endpoint is lent (actors._core.transport.endpoint_loan) this thread must
        # not touch it: it polls the loan's takeover timer instead.
        polling_pull = True
        loan: EndpointLoan | None = None
        loan_timer = -1
        handle_frames = self.handle_frames
        fd_handlers = self._fd_handlers
        next_deadline: float | None = None
        while not self._stopping:
            if loan is not self._loan:
                if loan is not None:
                    poller.unregister(loan_timer)
                loan = self._loan
                if loan is not None:
                    loan_timer = loan.timer.fd
                    poller.register(loan_timer, zmq.POLLIN)
                    if loan.state != IO and polling_pull:  # made free on this thread
                        poller.unregister(pull)
                        polling_pull = False
            if next_deadline is None:
                timeout = None
            else:
                # Whole milliseconds, rounded up: zmq_poll truncates, and a
                # 0.7 ms wait taken as 0 spins the CPU until the timer is due.
                timeout = max(0, int((next_deadline - time.monotonic()) * 1000.0 + 0.999))
            try:
                events = poller.poll(timeout)
            except zmq.ZMQError:
                if self._stopping:
                    break
                raise
            ready_fds: list[int] = []
            got_frames = False
            timer_fired = False
            for sock, _ev in events:
                if sock is pull:
                    got_frames = True
                elif sock == self._wake_fd:
                    try:
                        os.eventfd_read(self._wake_fd)
                    except OSError:
                        pass
                elif sock == loan_timer and loan is not None:
                    loan.timer.clear()
                    timer_fired = True
                else:
                    ready_fds.append(sock)
            if self._tasks:
                with self._tasks_lock:
                    tasks, self._tasks = self._tasks, []
                for task in tasks:
                    try:
                        task()
                    except Exception:
                        log.exception("I/O task failed")
            if registered.keys() != fd_handlers.keys():
                for fd in list(registered):
                    if fd not in fd_handlers:
                        poller.unregister(fd)
                        del registered[fd]
                for fd in fd_handlers:
                    if fd not in registered:
                        poller.register(fd, zmq.POLLIN)
                        registered[fd] = True
            # Timers and tasks before the frames: once a frame has been
            # handed to an actor's thread, this thread goes straight back to
            # the poll and lets go of the GIL the actor is waiting for.
            next_deadline = self._fire_timers()
            if polling_pull and (got_frames or ready_fds):
                # A dead host's last frames (a reply it sent before it was
                # killed) are drained before its death is handled, so a
                # death report never overtakes them.
                frames = drain(pull, got_frames)
                if frames:
                    try:
                        handle_frames(frames)
                    except Exception:
                        log.exception("frame handling failed")
            for fd in ready_fds:
                handler = fd_handlers.get(fd)
                if handler is not None:
                    try:
                        handler(fd)
                    except Exception:
                        log.exception("fd handler failed")
            if loan is not None:
                # Last in the turn: what this thread read went to the
                # mailboxes before the borrower may read again.
                owns = loan.io_turn(timer_fired) == IO
                if owns != polling_pull:
                    if owns:
                        poller.register(pull, zmq.POLLIN)
                    else:
                        poller.unregister(pull)
                    polling_pull = owns

