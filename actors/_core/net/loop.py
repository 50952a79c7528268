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

`IOLoop` holds the link's `actors._core.net.session.Sessions` and the two
sides it drives, `actors._core.net.outgoing.Outgoing` and
`actors._core.net.listener.Listener`; the thread it runs on is started and
joined by `actors._core.net.net.NetLink`.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from typing import Any, cast

import zmq

from actors._core.net.listener import Listener
from actors._core.net.outgoing import Outgoing
from actors._core.net.protocol import BYE, BYE_LINGER_MS, TICK, ConnectError, NetError, parse_tcp
from actors._core.net.session import Sessions
from actors._core.net.zap import open_zap, serve_zap

__all__ = ["IOLoop"]

log = logging.getLogger("actors.net")


class IOLoop:
    """The I/O thread of a link (see the module's docstring)."""

    ctx: zmq.Context[zmq.Socket[bytes]]  # the link's, made and terminated by `run`

    def __init__(self, sessions: Sessions, outgoing: Outgoing, listener: Listener, listen: str) -> None:
        self.sessions = sessions
        self.outgoing = outgoing
        self.listener = listener
        self.listen = listen  # the address asked for
        self.address = ""  # the address bound
        self.commands: collections.deque[tuple[Any, ...]] = collections.deque()
        self.cmd_lock = threading.Lock()
        self.wake_pending = False
        self.wake_fd = -1
        self.started = threading.Event()
        self.start_error: BaseException | None = None
        self.closed = False
        self.zap: zmq.Socket[bytes] | None = None

    def open(self) -> None:
        """Make the eventfd other threads wake the loop through (before `run`)."""
        self.wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def shut(self) -> None:
        """Close the eventfd once the loop is done: commands are refused from now on."""
        with self.cmd_lock:
            os.close(self.wake_fd)
            self.wake_fd = -1

    def command(self, *cmd: Any) -> None:
        with self.cmd_lock:
            if self.wake_fd < 0 or (self.closed and cmd[0] != "close"):
                raise NetError(f"link {self.sessions.name} is {'closed' if self.closed else 'not started'}")
            self.commands.append(cmd)
            if not self.wake_pending:
                self.wake_pending = True
                os.eventfd_write(self.wake_fd, 1)

    def run(self) -> None:
        """The I/O thread's body: bind, say `started`, loop until closed, tear down."""
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.ctx = ctx
        self.sessions.poller = zmq.Poller()
        self.zap = None
        try:
            self._bind(ctx)
        except BaseException as exc:  # reported to start(), never raised on this thread
            self.start_error = exc if isinstance(exc, NetError) else NetError(f"cannot listen on {self.listen}: {exc}")
            self._teardown()
            self.started.set()
            return
        self.started.set()
        try:
            self._loop()
        except BaseException:
            log.exception("link %s: I/O thread failed", self.sessions.name)
        finally:
            self._teardown()

    def _bind(self, ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
        poller = self.sessions.poller
        if self.sessions.key is not None:
            self.zap = open_zap(ctx)
            poller.register(self.zap, zmq.POLLIN)
        self.address = self.listener.bind(ctx, self.listen)
        self.outgoing.attach(ctx, parse_tcp(self.address)[1])
        poller.register(self.listener.router, zmq.POLLIN)
        poller.register(self.listener.router_mon, zmq.POLLIN)
        poller.register(self.wake_fd, zmq.POLLIN)

    def _teardown(self) -> None:
        s = self.sessions
        for out in list(s.outs.values()):
            s.close_out(out, linger=100)
        self.listener.close()
        if self.zap is not None:
            self.zap.close(linger=0)
        self.ctx.term()
        for name in list(s.peers):
            s.peers.pop(name, None)

    def _loop(self) -> None:
        # Heartbeats and handshake deadlines are planned only when one falls
        # due or something other than a data frame happened (``dirty``): a
        # wake-up for a frame costs the frame, not a scan of every peer.
        s, outgoing, listener = self.sessions, self.outgoing, self.listener
        due = 0.0
        timeout_ms: int | None = None
        router = listener.router
        drain_router = listener.drain_router
        poll = s.poller.poll
        while True:
            now = s.clock.now()
            if s.dirty or now >= due:
                s.dirty = False
                s.expire_connects(now)
                plan = s.liveness.plan(now)
                for name in cast("list[str]", plan.down):  # the names this link gave it
                    s.peer_down(name, "net_tick_timeout")
                for name in cast("list[str]", plan.tick):
                    p = s.peers.get(name)
                    if p is not None and p.out is not None:
                        s.out_send(p, [TICK])
                        s.stats["ticks_out"] += 1
                deadlines = [o.deadline for o in s.outs.values() if not o.up]
                deadlines.extend(p.deadline for p in s.peers.values() if not p.up)
                if plan.next_at is not None and not plan.down:
                    deadlines.append(plan.next_at)
                due = min(deadlines) if deadlines else float("inf")
                if plan.down:
                    due = now  # plan again at once: the peers just lost are gone now
            timeout_ms = None if due == float("inf") else max(0, int((due - now) * 1000) + 1)
            for sock, _ev in poll(timeout_ms):
                if sock is router:
                    drain_router()
                    continue
                s.dirty = True
                if isinstance(sock, int):  # the eventfd: commands from other threads
                    if self._run_commands():
                        return
                elif sock is self.zap:
                    self._serve_zap()
                elif sock is listener.router_mon:
                    listener.listen_event()
                elif sock in s.outs:
                    outgoing.drain_out(s.outs[sock])
                elif sock in s.mons:
                    outgoing.out_event(s.mons[sock])

    def _run_commands(self) -> bool:
        s = self.sessions
        try:
            os.eventfd_read(self.wake_fd)
        except BlockingIOError:
            pass
        with self.cmd_lock:
            self.wake_pending = False
            commands = list(self.commands)
            self.commands.clear()
        for cmd in commands:
            op = cmd[0]
            if op == "send":
                self.outgoing.send_data(cmd[1], cmd[2], cmd[3], queued=True)
            elif op == "connect":
                self.outgoing.start_connect(*cmd[1:])
            elif op == "after_drain":
                for _ in range(1000):  # bounded: a peer that never stops sending cannot stall it
                    if not cast(int, self.listener.router.get(zmq.EVENTS)) & zmq.POLLIN:
                        break
                    self.listener.drain_router()
                s.call(cmd[1])
            elif op == "disconnect":
                p = s.peers.get(cmd[1])
                if p is not None:
                    if p.out is not None:
                        s.out_send(p, [BYE])
                    s.peer_down(cmd[1], "disconnected", linger=BYE_LINGER_MS)
            elif op == "close":
                for p in list(s.peers.values()):
                    if p.out is not None:
                        s.out_send(p, [BYE])
                    for w in p.waiters:
                        w.fail(ConnectError(f"link {s.name} closed"))
                for out in list(s.outs.values()):
                    for w in out.waiters:
                        w.fail(ConnectError(f"link {s.name} closed"))
                for name in list(s.peers):
                    s.peer_down(name, "closed", notify=False, linger=BYE_LINGER_MS)
                return True
        return False

    def _serve_zap(self) -> None:
        s = self.sessions
        assert self.zap is not None and s.key is not None
        serve_zap(self.zap, s.key.public_raw, s.count, lambda peer: self.listener.refusals.failed(s.clock.now(), peer))
