"""Node-to-node links over ZeroMQ tcp, authenticated and encrypted with CurveZMQ.

This module moves opaque frames between named nodes and knows nothing of
actors: the layer above gives it frames to send and gets frames back
through a callback, with the peer's node name.

Shape of a link, per node:

- one ROUTER socket listening on ``tcp://HOST:PORT`` (port 0 picks a free
  port; `NetLink.address` is the bound one), a CURVE server when the link
  has a cluster key;
- one DEALER per peer, connected to the peer's listener, a CURVE client
  with the same cluster key.  Everything this node sends to a peer goes
  through that one DEALER, so frames to a peer arrive in the order sent;
- a ZAP handler (a REP socket on ``inproc://zeromq.zap.01`` of the link's
  own ZeroMQ context, served by the link's I/O thread, so no extra thread)
  that accepts only CURVE clients presenting the cluster public key.  A
  peer without the key fails the handshake; its bytes never reach
  `on_frame`, nor any decoder.

Handshake: the connecting side sends ``HELLO {name, incarnation, port}`` on
its DEALER; the listener answers ``WELCOME {name, incarnation}`` and, if it
has no DEALER to that node yet, connects back to the address the HELLO came
from.  A peer is *up* once this node's DEALER to it is welcomed.  The two
sides get there at different moments: a BYE may arrive before the WELCOME
on our connect-back (another connection), and is then kept until that
WELCOME, so the peer still goes up and at once down (``peer_closed``).  A HELLO
from a known name with another incarnation means the node restarted: the
old incarnation is declared down first.

Sending: `NetLink.send` may be called from any thread.  Once a peer's
DEALER is welcomed it leaves the I/O thread's poller and callers send on it
directly under a per-peer lock, so a send costs no thread hop; frames sent
before the welcome wait in the I/O thread behind the HELLO, and a direct
send never overtakes them.  Frames from one thread to one peer arrive in
the order sent.

Host frames: a host process of a connected node may send on a connection
of its own (`actors._core.net.direct`), with no handshake: every frame says
``S <name>@<incarnation>`` before its parts, and is honoured (handed to
``on_frame`` as that node's) only while this link holds a session with that
node in that incarnation; otherwise it is dropped and counted.  A
connection that drops and comes back needs no new handshake.  The CURVE
handshake and ZAP admit it on the same terms as a node's own connection.
`NetLink.after_drain` lets the layer above act on a peer's report that one
of its hosts died only after what that host sent has been delivered.

Liveness (`actors._core.net.tick`): the I/O thread sends a tick every
``net_ticktime / 4`` unless it sent something else meanwhile; a peer from
which nothing arrived for ``net_ticktime`` is down.  A dropped tcp connection (the peer process died) is noticed at
once through the DEALER's socket monitor.  Frames that do not parse, or
that come from a connection that never said HELLO, are dropped and counted.

Threads: one I/O thread per link; `close` joins it and terminates the
link's context, so nothing is left behind.
"""

from __future__ import annotations

import collections
import ipaddress
import logging
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import zmq
from zmq.utils.monitor import recv_monitor_message

from actors._core.net.keys import ClusterKey
from actors._core.net.tick import DEFAULT_NET_TICKTIME, Liveness
from actors._core.base.clock import Clock, MonotonicClock

__all__ = ["ConnectError", "NetError", "NetLink", "is_loopback", "parse_tcp"]

log = logging.getLogger("actors.net")

PROTOCOL_VERSION = 1
ZAP_ENDPOINT = "inproc://zeromq.zap.01"
ZAP_DOMAIN = b"otpy"

# DEALER -> ROUTER
_HELLO = b"H"
_TICK = b"T"
_DATA = b"D"
_BYE = b"B"
_HOST_DATA = b"S"  # data from a host process of a node, on its own connection
# ROUTER -> DEALER
_WELCOME = b"W"
_REJECT = b"R"

_RECV_BATCH = 512
_EVENTS = int(zmq.EVENTS)  # plain ints: enum arithmetic costs more than the syscall it guards
_POLLIN = int(zmq.POLLIN)
_BYE_LINGER_MS = 200  # how long a closing link lets its goodbyes flush
_OUT_EVENTS = (zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
               | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
_LISTEN_EVENTS = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                  | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                  | zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
_HANDSHAKE_FAILED = (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                     | zmq.EVENT_HANDSHAKE_FAILED_AUTH)

FrameCallback = Callable[[str, list[bytes]], None]
UpCallback = Callable[[str, int], None]
DownCallback = Callable[[str, int, str], None]
RefuseCallback = Callable[[str, int], "str | dict[str, Any] | None"]
RejectedCallback = Callable[[str | None, str, dict[str, Any]], None]


class NetError(Exception):
    """A link cannot do what was asked (bad address, no key, peer not connected)."""


class ConnectError(NetError):
    """`NetLink.connect` failed: timeout, handshake refused (wrong key), or rejected."""


def parse_tcp(address: str) -> tuple[str, int]:
    """``tcp://HOST:PORT`` -> (host, port); `NetError` naming the address otherwise."""
    if not isinstance(address, str) or not address.startswith("tcp://"):
        raise NetError(f"node address {address!r} is not tcp://HOST:PORT")
    host, sep, port_text = address[len("tcp://"):].rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise NetError(f"node address {address!r} is not tcp://HOST:PORT")
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    """True only for loopback literals and ``localhost``; names and wildcards are not."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Waiter:
    __slots__ = ("event", "name", "error")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.name: str | None = None
        self.error: Exception | None = None

    def ok(self, name: str) -> None:
        self.name = name
        self.event.set()

    def fail(self, error: Exception) -> None:
        self.error = error
        self.event.set()


@dataclass(eq=False)
class _Out:
    """One outgoing DEALER connection, pending until the peer welcomes it."""

    address: str
    sock: zmq.Socket
    mon: zmq.Socket
    deadline: float
    expect: str | None = None  # the node name a connect-back expects
    name: str | None = None
    up: bool = False
    waiters: list[_Waiter] = field(default_factory=list)
    # Once up, the DEALER leaves the I/O thread's poller and any thread may
    # send on it under ``lock``.  ``queued`` counts data frames still in the
    # command queue for it; a direct send waits its turn behind them.
    lock: threading.Lock = field(default_factory=threading.Lock)
    queued: int = 0


@dataclass(eq=False)
class _Peer:
    """A node met in a handshake.  It is *up* once both directions work: our
    DEALER to it was welcomed and it said HELLO on a connection of its own."""

    name: str
    incarnation: int
    deadline: float
    out: _Out | None = None  # the one DEALER frames to this node go through
    rids: set[bytes] = field(default_factory=set)
    up: bool = False
    waiters: list[_Waiter] = field(default_factory=list)
    # It said BYE before our side of the handshake finished (its WELCOME to our
    # connect-back travels on another connection and may come after): it goes
    # down as ``peer_closed`` the moment it is up, so the goodbye is never lost.
    bye: bool = False
    # Data it sent before our side is up: it counts us up as soon as our HELLO
    # came and its DEALER was welcomed, but our WELCOME to its HELLO travels on
    # the other connection.  Delivered right after ``on_up``, so the owner of
    # the link never sees a frame from a node it does not know yet (it would
    # answer into the void: the reply to a call made right after ``connect``).
    early: list[list[bytes]] = field(default_factory=list)


class NetLink:
    """A node's tcp endpoint: listener, outgoing links, handshake, heartbeats.

    Callbacks run on the link's I/O thread and must be quick; an exception
    in one is logged and never stops the link.  ``on_frame(peer, frames)``
    gets the frames a peer sent with `send`, in order.  ``on_up(peer,
    incarnation)`` fires when a peer becomes reachable, ``on_down(peer,
    incarnation, reason)`` exactly once when it is lost (``connection_closed``,
    ``net_tick_timeout``, ``peer_closed``, ``new_incarnation``, ``rejected``).
    ``refuse(peer, incarnation)`` may return a reason to turn a peer away in
    the handshake (both ways: its HELLO is answered REJECT, its WELCOME fails
    our connect), so it never goes up; the peer's connect fails with that reason.
    It may return a dict instead, with the reason under ``"reason"``: the
    whole dict goes back to the peer in its REJECT, for the layer above there
    to act on.  ``on_rejected(name, address, body)`` fires when a peer turns
    this node's connect away: ``name`` is the node expected there (None when
    unknown), ``body`` the peer's REJECT as a dict.
    """

    def __init__(
        self,
        name: str,
        listen: str,
        key: ClusterKey | None = None,
        *,
        on_frame: FrameCallback,
        on_up: UpCallback | None = None,
        on_down: DownCallback | None = None,
        refuse: RefuseCallback | None = None,
        on_rejected: RejectedCallback | None = None,
        net_ticktime: float = DEFAULT_NET_TICKTIME,
        incarnation: int | None = None,
        clock: Clock | None = None,
        handshake_timeout: float = 10.0,
    ) -> None:
        if not isinstance(name, str) or not name or len(name) > 255:
            raise NetError(f"node name {name!r} must be a non-empty string")
        host, _port = parse_tcp(listen)
        if key is None and not is_loopback(host):
            raise NetError(
                f"refusing to listen on {listen} without a cluster key: only loopback addresses may be "
                f"unauthenticated (create one with: python -m actors keygen PATH)"
            )
        self.name = name
        self.listen = listen
        self.key = key
        self.incarnation = secrets.randbits(63) if incarnation is None else int(incarnation)
        self._on_frame = on_frame
        self._on_up = on_up
        self._on_down = on_down
        self._refuse = refuse
        self._on_rejected = on_rejected
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._liveness = Liveness(net_ticktime)
        self._handshake_timeout = handshake_timeout
        self.address = ""
        self._stats: collections.Counter[str] = collections.Counter()
        self._stats_cond = threading.Condition()
        self._frames_out_lock = threading.Lock()
        self._peers: dict[str, _Peer] = {}
        self._rid_peer: dict[bytes, str] = {}
        self._outs: dict[zmq.Socket, _Out] = {}
        self._mons: dict[zmq.Socket, _Out] = {}
        self._commands: collections.deque[tuple[Any, ...]] = collections.deque()
        self._cmd_lock = threading.Lock()
        self._wake_pending = False
        self._wake_fd = -1
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._closed = False
        self._loop_ident: int | None = None
        self._dirty = True  # the I/O thread re-plans heartbeats and deadlines

    # -- public API (any thread) ---------------------------------------------

    def start(self, timeout: float = 10.0) -> str:
        """Bind the listener and start the I/O thread; returns the bound address."""
        if self._thread is not None:
            raise NetError("link already started")
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._thread = threading.Thread(target=self._run, name=f"otpy-net-{self.name}", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            raise NetError(f"link {self.name} did not start within {timeout} s")
        if self._start_error is not None:
            self._thread.join(timeout)
            self._thread = None
            with self._cmd_lock:
                os.close(self._wake_fd)
                self._wake_fd = -1
            raise self._start_error
        return self.address

    def __enter__(self) -> "NetLink":
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self, address: str, timeout: float = 10.0) -> str:
        """Connect to the node listening at ``address``; returns its name once welcomed."""
        host, _ = parse_tcp(address)
        if self.key is None and not is_loopback(host):
            raise NetError(f"refusing to connect to {address} without a cluster key")
        waiter = _Waiter()
        self._command("connect", address, waiter, timeout)
        if not waiter.event.wait(timeout + 5.0):
            raise ConnectError(f"connect to {address}: no answer from the link's I/O thread")
        if waiter.error is not None:
            raise waiter.error
        assert waiter.name is not None
        return waiter.name

    def connect_soon(self, address: str, expect: str, timeout: float = 10.0) -> None:
        """Start connecting to node ``expect`` at ``address`` and return at
        once; nobody waits for the outcome: success is an ``on_up``, and a
        failure (no answer, another node answering, a refusal) is only counted."""
        host, _ = parse_tcp(address)
        if self.key is None and not is_loopback(host):
            raise NetError(f"refusing to connect to {address} without a cluster key")
        self._count("connects_soon")
        self._command("connect", address, None, timeout, expect)

    def send(self, peer: str, frames: list[bytes]) -> None:
        """Queue ``frames`` for ``peer``; `NetError` if it is not connected now.

        A send that races with the peer going down is dropped and counted
        (``dropped``); the caller learns of the loss from ``on_down``.
        """
        p = self._peers.get(peer)
        if p is None or p.out is None:
            raise NetError(f"node {peer!r} is not connected")
        out = p.out
        if threading.get_ident() == self._loop_ident:
            # From a callback on the I/O thread (a reply, an echo): no hop, and
            # still in order, since every earlier command was run before it.
            self._send_data(peer, frames, out)
            return
        with out.lock:
            direct = out.up and out.queued == 0 and not out.sock.closed
            if direct:
                out.sock.send_multipart([_DATA, *frames])
            else:
                out.queued += 1
        if direct:
            with self._frames_out_lock:
                self._stats["frames_out"] += 1
        else:  # not welcomed yet: the I/O thread sends it behind the HELLO
            self._command("send", peer, frames, out)

    def after_drain(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the link's I/O thread once every frame that has arrived
        by now, on any connection, has been handed to ``on_frame``: what a
        peer's host sent on its own connection before the peer reported that
        host dead is delivered before the report is acted on."""
        self._command("after_drain", fn)

    def address_of(self, peer: str) -> str | None:
        """The address this node's connection to ``peer`` goes to (its listener)."""
        p = self._peers.get(peer)
        return None if p is None or p.out is None else p.out.address

    def disconnect(self, peer: str) -> None:
        """Drop the connection to ``peer`` (it sees ``peer_closed``)."""
        self._command("disconnect", peer)

    def peers(self) -> dict[str, int]:
        """Connected nodes and their incarnations."""
        return {name: p.incarnation for name, p in list(self._peers.items()) if p.up}

    def incarnation_of(self, peer: str) -> int | None:
        """The incarnation of ``peer`` as its HELLO or WELCOME said, up or not
        yet; from a callback it is the incarnation of the frames' sender."""
        p = self._peers.get(peer)
        return None if p is None else p.incarnation

    def stats(self) -> dict[str, int]:
        """Counters: frames in/out, garbage, handshake failures, ZAP verdicts, peers lost."""
        return dict(self._stats)

    def wait_stats(self, predicate: Callable[[dict[str, int]], bool], timeout: float) -> bool:
        """Block until ``predicate(stats())`` holds (re-checked when a rare counter moves).

        Frame and tick counters do not wake waiters; handshake, ZAP, garbage
        and peer up/down counters do.  Returns False after ``timeout``.
        """
        with self._stats_cond:
            return self._stats_cond.wait_for(lambda: predicate(dict(self._stats)), timeout)

    def _count(self, key: str) -> None:
        with self._stats_cond:
            self._stats[key] += 1
            self._stats_cond.notify_all()

    def close(self, timeout: float = 10.0) -> None:
        """Say goodbye to every peer, close every socket, join the I/O thread."""
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is None:
            return
        self._command("close")
        thread.join(timeout)
        if thread.is_alive():
            raise NetError(f"link {self.name}: I/O thread did not stop within {timeout} s")
        with self._cmd_lock:
            os.close(self._wake_fd)
            self._wake_fd = -1

    # -- the I/O thread --------------------------------------------------------

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
        ctx = zmq.Context()
        self._ctx = ctx
        self._poller = zmq.Poller()
        self._zap: zmq.Socket | None = None
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

    def _bind(self, ctx: zmq.Context) -> None:
        if self.key is not None:
            self._zap = ctx.socket(zmq.REP)
            self._zap.linger = 0
            self._zap.bind(ZAP_ENDPOINT)
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
        self._router_mon = router.get_monitor_socket(_LISTEN_EVENTS)
        router.bind(self.listen)
        self.address = router.last_endpoint.decode()
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
                for name in plan.down:
                    self._peer_down(name, "net_tick_timeout")
                for name in plan.tick:
                    p = self._peers.get(name)
                    if p is not None and p.out is not None:
                        self._out_send(p, [_TICK])
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

    def _send_data(self, peer: str, frames: list[bytes], out: _Out, queued: bool = False) -> None:
        p = self._peers.get(peer)
        with out.lock:
            if queued:
                out.queued -= 1
            sent = p is not None and p.out is out and not out.sock.closed
            if sent:
                out.sock.send_multipart([_DATA, *frames])
        if sent:
            with self._frames_out_lock:
                self._stats["frames_out"] += 1
        else:
            self._count("dropped")

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
                    if not self._router.get(zmq.EVENTS) & zmq.POLLIN:
                        break
                    self._drain_router()
                self._call(cmd[1])
            elif op == "disconnect":
                p = self._peers.get(cmd[1])
                if p is not None:
                    if p.out is not None:
                        self._out_send(p, [_BYE])
                    self._peer_down(cmd[1], "disconnected", linger=_BYE_LINGER_MS)
            elif op == "close":
                for p in list(self._peers.values()):
                    if p.out is not None:
                        self._out_send(p, [_BYE])
                    for w in p.waiters:
                        w.fail(ConnectError(f"link {self.name} closed"))
                for out in list(self._outs.values()):
                    for w in out.waiters:
                        w.fail(ConnectError(f"link {self.name} closed"))
                for name in list(self._peers):
                    self._peer_down(name, "closed", notify=False, linger=_BYE_LINGER_MS)
                return True
        return False

    # -- ZAP ---------------------------------------------------------------------

    def _serve_zap(self) -> None:
        assert self._zap is not None and self.key is not None
        while True:
            try:
                msg = self._zap.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            request_id = msg[1] if len(msg) > 1 else b""
            ok = (len(msg) >= 7 and msg[0] == b"1.0" and msg[5] == b"CURVE"
                  and secrets.compare_digest(msg[6], self.key.public_raw))
            self._count("zap_allowed" if ok else "zap_denied")
            if ok:
                self._zap.send_multipart([b"1.0", request_id, b"200", b"OK", b"cluster", b""])
            else:
                self._zap.send_multipart([b"1.0", request_id, b"400", b"not a cluster member", b"", b""])

    # -- listener side -------------------------------------------------------------

    def _listen_event(self) -> None:
        while True:
            try:
                event = recv_monitor_message(self._router_mon, zmq.NOBLOCK)
            except zmq.Again:
                return
            kind = event["event"]
            if kind & _HANDSHAKE_FAILED:
                self._count("handshake_failures")
            elif kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._count("handshakes_in")
            elif kind == zmq.EVENT_ACCEPTED:
                self._count("accepted")

    def _drain_router(self) -> None:
        router = self._router
        get, recv = router.getsockopt, router.recv_multipart
        rid_peer, liveness, now_of, stats, on_frame = (self._rid_peer, self._liveness, self._clock.now,
                                                        self._stats, self._on_frame)
        peers = self._peers
        for _ in range(_RECV_BATCH):
            # Asking for EVENTS is cheaper than the zmq.Again a NOBLOCK recv raises when empty.
            if not get(_EVENTS) & _POLLIN:
                return
            msg = recv(copy=False)  # frames: a HELLO's carries the Peer-Address it came from
            if len(msg) < 2:
                self._count("garbage")
                continue
            rid, kind = msg[0].bytes, msg[1].bytes
            name = rid_peer.get(rid)
            if kind == _DATA and name is not None:
                liveness.received(name, now_of())
                stats["frames_in"] += 1
                peer = peers.get(name)
                if peer is not None and not peer.up:
                    peer.early.append([f.bytes for f in msg[2:]])
                    self._count("held_before_up")
                else:
                    self._call(on_frame, name, [f.bytes for f in msg[2:]])
                continue
            if kind == _HOST_DATA and len(msg) >= 3:
                # A host's own connection: every frame names its node and
                # incarnation, honoured only while we hold a session with it.
                origin = msg[2].bytes
                name, _, inc = origin.decode("ascii", "replace").rpartition("@")
                peer = self._peers.get(name)
                if peer is not None and not peer.bye and inc == f"{peer.incarnation:x}":
                    liveness.received(name, now_of())
                    stats["host_frames_in"] += 1
                    if peer.up:
                        self._call(on_frame, name, [f.bytes for f in msg[3:]])
                    else:
                        peer.early.append([f.bytes for f in msg[3:]])
                        self._count("held_before_up")
                else:
                    self._count("host_frames_refused")
                continue
            self._dirty = True
            if kind == _HELLO:
                self._hello(rid, msg)
                continue
            if name is None:
                # Authenticated, but no HELLO on this connection (or its peer was
                # declared down): drop, and tell it so it stops talking to us.
                self._count("unknown_session")
                self._router_send([rid, _REJECT, orjson.dumps({"reason": "no session"})])
                continue
            if kind == _TICK and len(msg) == 2:
                liveness.received(name, now_of())
                stats["ticks_in"] += 1
            elif kind == _BYE and len(msg) == 2:
                self._bye(name)
            else:
                self._count("garbage")

    def _bye(self, name: str) -> None:
        """A peer said goodbye.  If our DEALER to it is not welcomed yet, the
        peer already counts us up (it sent the WELCOME before its connect
        returned), so wait for that WELCOME, then report it up and down: the
        layer above always sees a disconnect, and sees it in up/down pairs."""
        peer = self._peers[name]
        if peer.up or peer.out is None or peer.out.sock.closed:
            self._peer_down(name, "peer_closed")
            return
        self._count("bye_before_up")
        peer.bye = True
        for rid in peer.rids:  # nothing more may arrive from it on these connections
            self._rid_peer.pop(rid, None)

    def _hello(self, rid: bytes, msg: list[zmq.Frame]) -> None:
        body = _decode(msg[2].bytes) if len(msg) == 3 else None
        if (not isinstance(body, dict) or body.get("v") != PROTOCOL_VERSION
                or not isinstance(body.get("name"), str) or not body["name"] or len(body["name"]) > 255
                or not isinstance(body.get("inc"), int) or not isinstance(body.get("port"), int)
                or not 0 < body["port"] <= 65535):
            self._count("garbage")
            self._router_send([rid, _REJECT, orjson.dumps({"reason": "bad hello"})])
            return
        name, inc = body["name"], body["inc"]
        if name == self.name:
            self._router_send([rid, _REJECT, orjson.dumps({"reason": f"{name} is this node's own name"})])
            return
        refusal = self._refusal(name, inc)
        if refusal is not None:
            self._count("refused")
            self._router_send([rid, _REJECT, orjson.dumps(refusal)])
            return
        old = self._rid_peer.get(rid)
        if old is not None and old != name:  # one connection, one node: never a second name
            self._count("garbage")
            return
        peer = self._peers.get(name)
        if peer is not None and peer.incarnation != inc:
            self._peer_down(name, "new_incarnation")
            peer = None
        elif peer is not None and peer.bye:  # it said goodbye, and now starts a new session
            self._peer_down(name, "peer_closed")
            peer = None
        if peer is None:
            peer = self._peers[name] = _Peer(name, inc, self._clock.now() + self._handshake_timeout)
        peer.rids.add(rid)
        self._rid_peer[rid] = name
        self._liveness.received(name, self._clock.now())
        if peer.out is None:
            out = next((o for o in self._outs.values() if o.expect == name or o.name == name), None)
            if out is None:
                host = msg[2].get("Peer-Address")
                if ":" in host:
                    host = f"[{host}]"
                out = self._start_connect(f"tcp://{host}:{body['port']}", None, self._handshake_timeout, expect=name)
            if out is not None:
                if out.expect is None and out.name is None:
                    out.expect = name  # a connect we started to the same address: it is this node
                peer.out = out  # frames queue behind our HELLO until the WELCOME comes
        # Welcome only now: once the peer has it, it may expect us to send to it.
        self._router_send([rid, _WELCOME, orjson.dumps({"v": PROTOCOL_VERSION, "name": self.name,
                                                         "inc": self.incarnation})])
        self._maybe_up(peer)

    def _router_send(self, frames: list[bytes]) -> None:
        try:
            self._router.send_multipart(frames, zmq.NOBLOCK)
        except zmq.ZMQError:  # the connection went away meanwhile (EHOSTUNREACH)
            self._count("reply_unroutable")

    # -- outgoing side -------------------------------------------------------------

    def _start_connect(self, address: str, waiter: _Waiter | None, timeout: float,
                       expect: str | None = None) -> _Out | None:
        for out in self._outs.values():
            if out.address == address:  # already connected or connecting there
                if waiter is not None:
                    peer = self._peers.get(out.name) if out.name is not None else None
                    if peer is not None and peer.up:
                        waiter.ok(peer.name)
                    elif peer is not None:
                        peer.waiters.append(waiter)
                    else:
                        out.waiters.append(waiter)
                return out
        sock = self._ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.sndhwm = 0  # the link queues rather than drops; the caller sees loss only as on_down
        sock.rcvhwm = 1000  # only read until welcomed
        if self.key is not None:
            sock.curve_serverkey = self.key.public
            sock.curve_publickey = self.key.public
            sock.curve_secretkey = self.key.secret
        mon = sock.get_monitor_socket(_OUT_EVENTS)
        out = _Out(address, sock, mon, self._clock.now() + timeout, expect=expect)
        if waiter is not None:
            out.waiters.append(waiter)
        try:
            sock.connect(address)
        except zmq.ZMQError as exc:
            self._close_out(out)
            if waiter is not None:
                waiter.fail(ConnectError(f"connect to {address}: {exc}"))
            return None
        self._outs[sock] = out
        self._mons[mon] = out
        self._poller.register(sock, zmq.POLLIN)
        self._poller.register(mon, zmq.POLLIN)
        sock.send_multipart([_HELLO, orjson.dumps({"v": PROTOCOL_VERSION, "name": self.name,
                                                   "inc": self.incarnation, "port": self._port})])
        return out

    def _close_out(self, out: _Out, linger: int = 0) -> None:
        with out.lock:
            if out.sock.closed:
                return
            self._outs.pop(out.sock, None)
            self._mons.pop(out.mon, None)
            for sock in (out.sock, out.mon):
                try:
                    self._poller.unregister(sock)
                except KeyError:
                    pass
            out.sock.disable_monitor()
            out.mon.close(linger=0)
            out.sock.close(linger=linger)

    def _fail_out(self, out: _Out, error: ConnectError) -> None:
        for w in out.waiters:
            w.fail(error)
        out.waiters.clear()
        self._close_out(out)
        for peer in [p for p in self._peers.values() if p.out is out]:
            for w in peer.waiters:
                w.fail(error)
            peer.waiters.clear()
            self._peer_down(peer.name, "handshake_failed")

    def _expire_connects(self, now: float) -> None:
        for out in [o for o in self._outs.values() if not o.up and now >= o.deadline]:
            self._count("connect_timeouts")
            self._fail_out(out, ConnectError(f"connect to {out.address}: no handshake within the timeout"))
        for peer in [p for p in self._peers.values() if not p.up and now >= p.deadline]:
            self._count("connect_timeouts")
            self._peer_down(peer.name, "handshake_timeout")

    def _out_event(self, out: _Out) -> None:
        while out.mon in self._mons:
            try:
                event = recv_monitor_message(out.mon, zmq.NOBLOCK)
            except zmq.Again:
                return
            kind = event["event"]
            if kind & _HANDSHAKE_FAILED:
                self._count("handshake_failures_out")
                if not out.up:
                    self._fail_out(out, ConnectError(
                        f"connect to {out.address}: CurveZMQ handshake failed (does the peer hold the same "
                        f"cluster key?)"))
                    return
            elif kind == zmq.EVENT_DISCONNECTED and out.up and out.name is not None:
                self._peer_down(out.name, "connection_closed")
                return

    def _drain_out(self, out: _Out) -> None:
        for _ in range(_RECV_BATCH):
            if out.sock not in self._outs:
                return
            try:
                msg = out.sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            kind = msg[0] if msg else b""
            body = _decode(msg[1]) if len(msg) == 2 else None
            if kind == _WELCOME and isinstance(body, dict) and isinstance(body.get("name"), str) \
                    and isinstance(body.get("inc"), int) and not out.up:
                self._welcomed(out, body["name"], body["inc"])
            elif kind == _REJECT:
                reason = body.get("reason") if isinstance(body, dict) else None
                if isinstance(body, dict):
                    self._call(self._on_rejected, out.name or out.expect, out.address, body)
                if out.up and out.name is not None:
                    self._peer_down(out.name, "rejected")
                else:
                    self._fail_out(out, ConnectError(f"connect to {out.address}: rejected ({reason})"))
                return
            else:
                self._count("garbage")

    def _welcomed(self, out: _Out, name: str, inc: int) -> None:
        if name == self.name or (out.expect is not None and name != out.expect):
            self._fail_out(out, ConnectError(f"connect to {out.address}: answered by {name!r}"))
            return
        refusal = self._refusal(name, inc)
        if refusal is not None:
            # Say goodbye on the connection it just welcomed: a peer that still
            # counts us up (it was stopped, say) learns at once that it is not.
            self._count("refused")
            try:
                out.sock.send_multipart([_BYE], zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
            for w in out.waiters:
                w.fail(ConnectError(f"connect to {out.address}: {refusal['reason']}"))
            out.waiters.clear()
            self._close_out(out, linger=_BYE_LINGER_MS)
            return
        peer = self._peers.get(name)
        if peer is not None and peer.incarnation != inc:
            self._peer_down(name, "new_incarnation")
            peer = None
        if peer is None:
            peer = self._peers[name] = _Peer(name, inc, out.deadline)
        peer.waiters.extend(out.waiters)
        out.waiters.clear()
        if peer.out is not None and peer.out is not out:
            self._close_out(out)  # a second DEALER to a node we already have one to: keep the first
        else:
            with out.lock:  # from now on other threads send on it: stop polling it here
                self._poller.unregister(out.sock)
                out.up, out.name = True, name
            peer.out = out
        self._maybe_up(peer)

    def _maybe_up(self, peer: _Peer) -> None:
        if peer.up:
            # A second connect to a node already up (another spelling of its
            # address): it is connected, so the connect succeeds at once.
            for w in peer.waiters:
                w.ok(peer.name)
            peer.waiters.clear()
            return
        if peer.out is None or not peer.out.up or not peer.rids:
            return
        peer.up = True
        self._liveness.add(peer.name, self._clock.now())
        self._count("peers_up")
        self._call(self._on_up, peer.name, peer.incarnation)
        early, peer.early = peer.early, []
        for frames in early:
            self._call(self._on_frame, peer.name, frames)
        for w in peer.waiters:
            w.ok(peer.name)
        peer.waiters.clear()
        if peer.bye:
            self._peer_down(peer.name, "peer_closed")

    def _out_send(self, peer: _Peer, frames: list[bytes]) -> None:
        out = peer.out
        assert out is not None
        with out.lock:
            if out.sock.closed:
                return
            out.sock.send_multipart(frames)
        self._liveness.sent(peer.name, self._clock.now())

    # -- losing a peer ----------------------------------------------------------

    def _peer_down(self, name: str, reason: str, notify: bool = True, linger: int = 0) -> None:
        peer = self._peers.pop(name, None)
        if peer is None:
            return
        self._liveness.remove(name)
        for rid in peer.rids:
            self._rid_peer.pop(rid, None)
        was_up = peer.up
        for w in peer.waiters:
            w.fail(ConnectError(f"node {name} went down while connecting ({reason})"))
        if peer.out is not None:
            self._close_out(peer.out, linger)
        for out in [o for o in self._outs.values() if o.expect == name]:
            self._fail_out(out, ConnectError(f"node {name} went down while connecting ({reason})"))
        if was_up:
            self._count("peers_down")
            if notify:
                self._call(self._on_down, name, peer.incarnation, reason)

    def _refusal(self, name: str, inc: int) -> dict[str, Any] | None:
        """The REJECT body for node ``name`` in incarnation ``inc``, or None to let it in."""
        if self._refuse is None:
            return None
        try:
            refusal = self._refuse(name, inc)
        except Exception:  # a callback must never stop the link; refuse nothing then
            self._count("callback_errors")
            log.exception("link %s: refuse callback failed", self.name)
            return None
        if refusal is None:
            return None
        return dict(refusal) if isinstance(refusal, dict) else {"reason": str(refusal)}

    def _call(self, fn: Callable[..., None] | None, *args: Any) -> None:
        if fn is None:
            return
        try:
            fn(*args)
        except Exception:  # a callback must never stop the link
            self._count("callback_errors")
            log.exception("link %s: callback %r failed", self.name, fn)


def _decode(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
