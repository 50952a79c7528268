"""The bottom layer of the kernel: one process's endpoint and its I/O thread.

A `Transport` is one OS process's view of the node's ipc fabric.  It binds one
ZeroMQ PULL socket in the node's 0700 runtime directory, runs one I/O thread
that drains it, fires timers from a heap (`actors._core.transport.timers`),
runs tasks handed to it and watches file descriptors (host pidfds in the node
process).  Any thread sends directly, with no thread hop, through the
process's one PUSH socket per peer (`actors._core.transport.peers`).  A thread
that calls across processes reads its replies from its own reply channel
(`actors._core.transport.channels`).

It knows nothing of actors: a frame is bytes, a peer is a process name, and
what arrives is handed, a drained batch at a time, to the `Upcalls` it is
given (the runtime, `actors._core.runtime`), which it holds and never imports.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

import zmq
from zmq.utils import z85

from actors._core.base import stats as _stats
from actors._core.net.zap import open_zap, serve_zap
from actors._core.transport.channels import ChannelPool, ReplyChannel
from actors._core.transport.endpoint_loan import IO, EndpointLoan, drain, timers_available
from actors._core.transport.peers import RCVHWM, SEND_WAIT, SNDHWM, Peers, owner_of
from actors._core.transport.tcp import NoFreePort, TcpSettings, bind_tcp
from actors._core.transport.timers import Timer, TimerHeap

__all__ = [
    "RCVHWM",
    "SEND_WAIT",
    "SNDHWM",
    "ReplyChannel",
    "TcpSettings",
    "Timer",
    "Transport",
    "Upcalls",
    "owner_of",
]

log = logging.getLogger("actors.transport")


class Upcalls(Protocol):
    """What a transport hands up to the layer that holds it."""

    def handle_frames(self, frames: list[bytes]) -> None:
        """Frames drained from the endpoint, in arrival order (I/O thread)."""

    def handle_lent_frames(self, frames: list[bytes]) -> None:
        """Frames read by the borrower of the endpoint (`Transport.lend_endpoint`), on its thread."""

    def fire_timer(self, timer: Timer) -> None:
        """A timer with a target fell due (I/O thread)."""

    def send_remote(self, dest: str, frame: bytes) -> None:
        """A frame for ``dest``, a process of another node (``<node_id>|<proc>``)."""


class Transport:
    """One process's endpoint, outgoing sockets, reply channels, timers and I/O thread."""

    def __init__(self, rundir: str, proc: str, upcalls: Upcalls) -> None:
        self.rundir = rundir
        self.proc = proc
        self.pid = os.getpid()
        self._upcalls = upcalls
        self.ctx = zmq.Context()
        self.ctx.setsockopt(zmq.LINGER, 0)
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.setsockopt(zmq.RCVHWM, RCVHWM)
        self.endpoint = self.endpoint_of(proc)
        self.pull.bind(self.endpoint)
        self._tasks: list[Callable[[], None]] = []
        self._tasks_lock = threading.Lock()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._fd_handlers: dict[int, Callable[[int], None]] = {}
        self._stopping = False
        self._loan: EndpointLoan | None = None
        #: Where this process listens on tcp for other nodes' frames
        #: (`enable_tcp`; None: it does not), the endpoint's port (0: only its
        #: reply channels listen), and the ZAP handler's socket.
        self.tcp: TcpSettings | None = None
        self.tcp_port = 0
        self._zap: zmq.Socket[bytes] | None = None
        self._zap_key = b""  # the cluster public key, raw, as ZAP requests carry it
        self.stats = _stats.current()
        self.io_thread = threading.Thread(target=self._io_loop, name=f"actors-io-{proc}", daemon=True)
        self.timers = TimerHeap(self.wake, upcalls.fire_timer)
        self.peers = Peers(self.ctx, proc, rundir, self.endpoint_of, self.io_thread, self.stats, upcalls.send_remote)
        self.channels = ChannelPool(self.ctx, proc, self.endpoint_of)
        #: Peers known to be gone (name -> why, opaque here); sends to them are dropped.
        self.dead_procs = self.peers.dead_procs
        # The peers' and the channels' own methods, reached without a hop.
        self.send_frame = self.peers.send_frame
        self.connect_peer = self.peers.connect_peer
        self.is_connected = self.peers.is_connected
        self.mark_gone = self.peers.mark_gone
        self.close_peer = self.peers.close_peer
        self.forget_peer = self.peers.forget_peer
        self.reply_channel = self.channels.for_thread
        self.release_thread_sockets = self.channels.release_thread
        self.add_timer = self.timers.add
        self.call_later = self.timers.call_later
        #: Frames read by the borrower of the endpoint (`lend_endpoint`), on its
        #: thread: handed straight up.
        self.handle_lent_frames = upcalls.handle_lent_frames

    # -- lending the endpoint --------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def loan(self) -> EndpointLoan | None:
        """The endpoint's loan while it is lent (or was, and not given back yet)."""
        return self._loan

    def on_io_thread(self) -> bool:
        """Whether the calling thread is this transport's I/O thread."""
        return threading.current_thread() is self.io_thread

    def lend_endpoint(self, on_returned: Callable[[], None]) -> EndpointLoan | None:
        """Lend the endpoint to the thread that will call the loan's ``serve``
        (see `actors._core.transport.endpoint_loan`); None when it is lent already, or this
        system cannot time a takeover."""
        if self._loan is not None or self._stopping or not timers_available():
            return None
        # Made on the I/O thread (a spawn it is handling), the loan starts
        # free: the I/O thread has finished reading for this turn and stops
        # polling the endpoint at the top of the next one.
        loan = EndpointLoan(self, on_returned, free=threading.current_thread() is self.io_thread)
        self._loan = loan
        self.wake()  # the I/O thread starts polling the loan's timer
        return loan

    # -- tcp -------------------------------------------------------------------

    def enable_tcp(self, settings: TcpSettings, endpoint: bool) -> None:
        """Let other nodes' processes send here straight (`actors._core.transport.tcp`):
        the reply channels of threads that call across nodes listen on tcp
        from now on, and with ``endpoint`` the endpoint too, which must be
        said before `start` (the I/O thread owns the endpoint from then on)."""
        if self.tcp is not None:
            return
        if endpoint and self.io_thread.is_alive():
            raise RuntimeError("the endpoint listens on tcp only if told so before the transport starts")
        if settings.public is not None and settings.secret is not None:
            # Bound before any tcp endpoint, so ZeroMQ asks it about every
            # client: without a handler it would let any CURVE client in.
            self._zap_key = z85.decode(settings.public)
            self._zap = open_zap(self.ctx)
            self.wake()
        if endpoint:
            try:
                self.tcp_port = bind_tcp(self.pull, settings)
            except NoFreePort as exc:  # frames from other nodes come through the node's port instead
                log.warning("%s does not listen on tcp: %s", self.proc, exc)
        self.tcp = settings

    def remote_reply_name(self, channel: ReplyChannel) -> str:
        """The name a call across nodes gives for ``channel`` (the calling
        thread's own): with the tcp port it listens on (``h1~r3:41234``),
        bound on the first such call, so the answer comes straight to it."""
        name = channel.remote_name
        if name is None:
            settings = self.tcp
            if settings is None:
                return channel.name
            try:
                name = f"{channel.name}:{bind_tcp(channel.sock, settings)}"
            except NoFreePort as exc:  # answers come through the node's port instead, for good
                log.warning("reply channel %s does not listen on tcp: %s", channel.name, exc)
                name = channel.name
            channel.remote_name = name
        return name

    def _serve_zap(self, sock: zmq.Socket[bytes]) -> None:
        serve_zap(sock, self._zap_key, lambda what: self.stats.increment(f"actors.net.{what}"))

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        self.io_thread.start()

    def endpoint_of(self, proc: str) -> str:
        return f"ipc://{self.rundir}/{proc}.sock"

    def shutdown(self, linger: bool = False) -> None:
        """Stop the I/O thread and close every socket.

        With ``linger`` the sockets first deliver what they hold (a host that
        halts must not lose its last exit signals); otherwise they drop it.
        """
        self._stopping = True
        self.peers.stopping = True
        self.wake()
        loan = self._loan
        if loan is not None and not loan.wait_released(5.0):
            log.warning("the endpoint's borrower did not let go of it in 5 s")
        if self.io_thread.is_alive() and threading.current_thread() is not self.io_thread:
            self.io_thread.join(timeout=5.0)
        self.peers.close(linger)
        self.channels.close()
        self.pull.close(linger=0)
        if self._zap is not None:
            self._zap.close(linger=0)
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

    # -- timers ------------------------------------------------------------------

    @staticmethod
    def cancel_timer(timer: Timer) -> float | bool:
        """Seconds that were left, or False when it already fired or was cancelled."""
        return TimerHeap.cancel(timer)

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
        def unwatch() -> None:
            self._fd_handlers.pop(fd, None)

        self.call_soon(unwatch)

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
        zap: zmq.Socket[bytes] | None = None
        handle_frames = self._upcalls.handle_frames
        fd_handlers = self._fd_handlers
        fire_timers = self.timers.fire_due
        next_deadline: float | None = None
        while not self._stopping:
            if zap is not self._zap and self._zap is not None:
                zap = self._zap
                poller.register(zap, zmq.POLLIN)
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
                elif sock is zap and zap is not None:
                    self._serve_zap(zap)
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
            next_deadline = fire_timers()
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
