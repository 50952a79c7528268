"""A link's I/O thread: the poll loop, and the commands other threads give it.

One thread per link owns its ZeroMQ context and every socket but a welcomed
DEALER: it binds the listener, polls it, the pending DEALERs, their socket
monitors, the ZAP handler and an eventfd through which other threads queue
commands (connect, send before a welcome, disconnect, close), and plans the
heartbeats and handshake deadlines (`actors._core.net.tick`).  It re-plans
only when one falls due or something other than a data frame happened, so
a wake-up for a frame costs the frame, not a scan of every peer.  Closing
says goodbye to every peer, closes every socket and terminates the context,
so nothing is left behind.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from typing import Any, cast

import zmq

from actors._core.net.listener import Listener
from actors._core.net.protocol import BYE, BYE_LINGER_MS, LISTEN_EVENTS, TICK, ConnectError, NetError, parse_tcp
from actors._core.net.zap import ZAP_DOMAIN, open_zap, serve_zap

__all__ = ["IOLoop"]

log = logging.getLogger("actors.net")


class IOLoop(Listener):
    """The I/O thread of a link (see the module's docstring)."""

    listen: str  # the address asked for
    address: str  # the address bound
    _commands: collections.deque[tuple[Any, ...]]
    _cmd_lock: threading.Lock
    _wake_pending: bool
    _wake_fd: int
    _started: threading.Event
    _start_error: BaseException | None
    _closed: bool
    _loop_ident: int | None  # the I/O thread's
    _zap: zmq.Socket[bytes] | None

    def _command(self, *cmd: Any) -> None:
        with self._cmd_lock:
            if self._wake_fd < 0 or (self._closed and cmd[0] != "close"):
                raise NetError(f"link {self.name} is {'closed' if self._closed else 'not started'}")
            self._commands.append(cmd)
            if not self._wake_pending:
                self._wake_pending = True
                os.eventfd_write(self._wake_fd, 1)

    def _run(self) -> None:
        self._loop_ident = threading.get_ident()
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._ctx = ctx
        self._poller = zmq.Poller()
        self._zap = None
        try:
            self._bind(ctx)
        except BaseException as exc:  # reported to start(), never raised on this thread
            self._start_error = exc if isinstance(exc, NetError) else NetError(f"cannot listen on {self.listen}: {exc}")
            self._teardown()
            self._started.set()
            return
        self._started.set()
        try:
            self._loop()
        except BaseException:
            log.exception("link %s: I/O thread failed", self.name)
        finally:
            self._teardown()

    def _bind(self, ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
        if self.key is not None:
            self._zap = open_zap(ctx)
            self._poller.register(self._zap, zmq.POLLIN)
        router = ctx.socket(zmq.ROUTER)
        router.linger = 0
        router.router_mandatory = True
        router.sndhwm = 0
        # Frames from one peer queued here at most (ZeroMQ's default): past
        # it the peer's sends wait on tcp, so a fast sender grows no queue
        # in this process while its frames are handed on to a slower host.
        router.rcvhwm = 1000
        if self.key is not None:
            router.curve_server = True
            router.curve_secretkey = self.key.secret
            router.curve_publickey = self.key.public
            router.zap_domain = ZAP_DOMAIN
        self._router = router
        self._router_mon = router.get_monitor_socket(LISTEN_EVENTS)
        router.bind(self.listen)
        self.address = cast(bytes, router.last_endpoint).decode()
        self._port = parse_tcp(self.address)[1]
        self._poller.register(router, zmq.POLLIN)
        self._poller.register(self._router_mon, zmq.POLLIN)
        self._poller.register(self._wake_fd, zmq.POLLIN)

    def _teardown(self) -> None:
        for out in list(self._outs.values()):
            self._close_out(out, linger=100)
        router = getattr(self, "_router", None)
        if router is not None:
            router.disable_monitor()
            self._router_mon.close(linger=0)
            router.close(linger=0)
        if self._zap is not None:
            self._zap.close(linger=0)
        self._ctx.term()
        for name in list(self._peers):
            self._peers.pop(name, None)

    def _loop(self) -> None:
        # Heartbeats and handshake deadlines are planned only when one falls
        # due or something other than a data frame happened (``_dirty``): a
        # wake-up for a frame costs the frame, not a scan of every peer.
        due = 0.0
        timeout_ms: int | None = None
        router = self._router
        poll = self._poller.poll
        while True:
            now = self._clock.now()
            if self._dirty or now >= due:
                self._dirty = False
                self._expire_connects(now)
                plan = self._liveness.plan(now)
                for name in cast("list[str]", plan.down):  # the names this link gave it
                    self._peer_down(name, "net_tick_timeout")
                for name in cast("list[str]", plan.tick):
                    p = self._peers.get(name)
                    if p is not None and p.out is not None:
                        self._out_send(p, [TICK])
                        self._stats["ticks_out"] += 1
                deadlines = [o.deadline for o in self._outs.values() if not o.up]
                deadlines.extend(p.deadline for p in self._peers.values() if not p.up)
                if plan.next_at is not None and not plan.down:
                    deadlines.append(plan.next_at)
                due = min(deadlines) if deadlines else float("inf")
                if plan.down:
                    due = now  # plan again at once: the peers just lost are gone now
            timeout_ms = None if due == float("inf") else max(0, int((due - now) * 1000) + 1)
            for sock, _ev in poll(timeout_ms):
                if sock is router:
                    self._drain_router()
                    continue
                self._dirty = True
                if isinstance(sock, int):  # the eventfd: commands from other threads
                    if self._run_commands():
                        return
                elif sock is self._zap:
                    self._serve_zap()
                elif sock is self._router_mon:
                    self._listen_event()
                elif sock in self._outs:
                    self._drain_out(self._outs[sock])
                elif sock in self._mons:
                    self._out_event(self._mons[sock])

    def _run_commands(self) -> bool:
        try:
            os.eventfd_read(self._wake_fd)
        except BlockingIOError:
            pass
        with self._cmd_lock:
            self._wake_pending = False
            commands = list(self._commands)
            self._commands.clear()
        for cmd in commands:
            op = cmd[0]
            if op == "send":
                self._send_data(cmd[1], cmd[2], cmd[3], queued=True)
            elif op == "connect":
                self._start_connect(*cmd[1:])
            elif op == "after_drain":
                for _ in range(1000):  # bounded: a peer that never stops sending cannot stall it
                    if not cast(int, self._router.get(zmq.EVENTS)) & zmq.POLLIN:
                        break
                    self._drain_router()
                self._call(cmd[1])
            elif op == "disconnect":
                p = self._peers.get(cmd[1])
                if p is not None:
                    if p.out is not None:
                        self._out_send(p, [BYE])
                    self._peer_down(cmd[1], "disconnected", linger=BYE_LINGER_MS)
            elif op == "close":
                for p in list(self._peers.values()):
                    if p.out is not None:
                        self._out_send(p, [BYE])
                    for w in p.waiters:
                        w.fail(ConnectError(f"link {self.name} closed"))
                for out in list(self._outs.values()):
                    for w in out.waiters:
                        w.fail(ConnectError(f"link {self.name} closed"))
                for name in list(self._peers):
                    self._peer_down(name, "closed", notify=False, linger=BYE_LINGER_MS)
                return True
        return False

    def _serve_zap(self) -> None:
        assert self._zap is not None and self.key is not None
        serve_zap(
            self._zap, self.key.public_raw, self._count, lambda peer: self._refusals.failed(self._clock.now(), peer)
        )
