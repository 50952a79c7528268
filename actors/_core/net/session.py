"""The state a link's parts share, and the handshake's moves from one state
to the next.

`Sessions` holds what the parts of a link (`actors._core.net.net`) all read
and write: the nodes the link has met and its connections to them, the
liveness and fragment bookkeeping, the counters, the callbacks of the layer
above, the clock and the I/O thread's poller.  A node goes *up* once both
directions work (our DEALER to it is welcomed and it said HELLO on a
connection of its own) and *down* exactly once after that; `Sessions`
holds these transitions, which both sides of the handshake
(`actors._core.net.outgoing`, `actors._core.net.listener`) and the poll loop
(`actors._core.net.loop`) make on the one `Sessions` they are given.
Everything here runs on the link's I/O thread, but for the counters.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import zmq

from actors._core.base.clock import Clock
from actors._core.net.keys import ClusterKey
from actors._core.net.protocol import (
    ConnectError,
    DownCallback,
    FrameCallback,
    GreetedCallback,
    GreetingCallback,
    RefuseCallback,
    UpCallback,
)
from actors._core.net.tick import Liveness
from actors._core.wire.fragments import FragmentWindow, Reassembly

__all__ = ["Out", "Peer", "Sessions", "Waiter"]

log = logging.getLogger("actors.net")


class Waiter:
    """Someone waiting in `NetLink.connect` for a handshake to end, either way."""

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
class Out:
    """One outgoing DEALER connection, pending until the peer welcomes it."""

    address: str
    sock: zmq.Socket[bytes]
    mon: zmq.Socket[bytes]
    deadline: float
    expect: str | None = None  # the node name a connect-back expects
    name: str | None = None
    up: bool = False
    waiters: list[Waiter] = field(default_factory=list)
    # Once up, the DEALER leaves the I/O thread's poller and any thread may
    # send on it under ``lock``.  ``queued`` counts data frames still in the
    # command queue for it; a direct send waits its turn behind them.
    lock: threading.Lock = field(default_factory=threading.Lock)
    queued: int = 0
    # Fragments of big frames handed to ZeroMQ and not yet to the kernel
    # (`actors._core.wire.fragments`): a small frame waits behind only these.
    window: FragmentWindow = field(default_factory=FragmentWindow)


@dataclass(eq=False)
class Peer:
    """A node met in a handshake.  It is *up* once both directions work: our
    DEALER to it was welcomed and it said HELLO on a connection of its own."""

    name: str
    incarnation: int
    deadline: float
    out: Out | None = None  # the one DEALER frames to this node go through
    rids: set[bytes] = field(default_factory=set)
    up: bool = False
    waiters: list[Waiter] = field(default_factory=list)
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
    # What its WELCOME carried (`actors._core.net.net`'s docstring), handed up just before ``on_up``.
    greeting: bytes | None = None


class Sessions:
    """A link's peers and connections, what the link's parts share, and the
    transitions between the peers' states (see the module's docstring).

    Built once per link by `actors._core.net.net.NetLink`, which hands it to
    each part; the poller is set by the I/O thread when it starts.
    """

    poller: zmq.Poller  # the I/O thread's, set when it starts

    def __init__(
        self,
        name: str,
        key: ClusterKey | None,
        incarnation: int,
        *,
        on_frame: FrameCallback,
        on_up: UpCallback | None,
        on_down: DownCallback | None,
        refuse: RefuseCallback | None,
        greeting: GreetingCallback | None,
        on_greeting: GreetedCallback | None,
        clock: Clock,
        net_ticktime: float,
    ) -> None:
        self.name = name
        self.key = key
        self.incarnation = incarnation
        self.on_frame = on_frame
        self.on_up = on_up
        self.on_down = on_down
        self.refuse = refuse
        self.greeting = greeting
        self.on_greeting = on_greeting
        self.clock = clock
        self.liveness = Liveness(net_ticktime)
        self.fragments = Reassembly(on_drop=lambda peer, why: self.count("fragments_dropped"))
        self.stats: collections.Counter[str] = collections.Counter()
        self.stats_cond = threading.Condition()
        # Taken for the frame counters only: they are bumped by any sending
        # thread and wake no `NetLink.wait_stats` waiter.
        self.frames_out_lock = threading.Lock()
        self.peers: dict[str, Peer] = {}  # by node name, up or handshaking
        self.rid_peer: dict[bytes, str] = {}  # the listener's connections (routing ids) -> node name
        self.outs: dict[zmq.Socket[bytes], Out] = {}  # our DEALERs
        self.mons: dict[zmq.Socket[bytes], Out] = {}  # their socket monitors
        self.dirty = True  # something other than a data frame happened: the loop re-plans

    def count(self, key: str) -> None:
        with self.stats_cond:
            self.stats[key] += 1
            self.stats_cond.notify_all()

    def call(self, fn: Callable[..., None] | None, *args: Any) -> None:
        if fn is None:
            return
        try:
            fn(*args)
        except Exception:  # a callback must never stop the link
            self.count("callback_errors")
            log.exception("link %s: callback %r failed", self.name, fn)

    def greeting_for(self, name: str) -> bytes | None:
        """What this node's WELCOME to ``name`` carries (None: nothing, or the callback failed)."""
        if self.greeting is None:
            return None
        try:
            return self.greeting(name)
        except Exception:  # a callback must never stop the link; greet with nothing then
            self.count("callback_errors")
            log.exception("link %s: greeting callback failed", self.name)
            return None

    def refusal(self, name: str, inc: int) -> dict[str, Any] | None:
        """The REJECT body for node ``name`` in incarnation ``inc``, or None to let it in."""
        if self.refuse is None:
            return None
        try:
            refusal = self.refuse(name, inc)
        except Exception:  # a callback must never stop the link; refuse nothing then
            self.count("callback_errors")
            log.exception("link %s: refuse callback failed", self.name)
            return None
        if refusal is None:
            return None
        return dict(refusal) if isinstance(refusal, dict) else {"reason": str(refusal)}

    def maybe_up(self, peer: Peer) -> None:
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
        self.liveness.add(peer.name, self.clock.now())
        self.count("peers_up")
        greeting, peer.greeting = peer.greeting, None
        if greeting is not None:
            self.call(self.on_greeting, peer.name, peer.incarnation, greeting)
        self.call(self.on_up, peer.name, peer.incarnation)
        early, peer.early = peer.early, []
        for frames in early:
            self.call(self.on_frame, peer.name, frames)
        for w in peer.waiters:
            w.ok(peer.name)
        peer.waiters.clear()
        if peer.bye:
            self.peer_down(peer.name, "peer_closed")

    def out_send(self, peer: Peer, frames: list[bytes]) -> None:
        out = peer.out
        assert out is not None
        with out.lock:
            if out.sock.closed:
                return
            out.sock.send_multipart(frames)
        self.liveness.sent(peer.name, self.clock.now())

    def close_out(self, out: Out, linger: int = 0) -> None:
        with out.lock:
            if out.sock.closed:
                return
            self.outs.pop(out.sock, None)
            self.mons.pop(out.mon, None)
            for sock in (out.sock, out.mon):
                try:
                    self.poller.unregister(sock)
                except KeyError:
                    pass
            out.sock.disable_monitor()
            out.mon.close(linger=0)
            out.sock.close(linger=linger)

    def fail_out(self, out: Out, error: ConnectError) -> None:
        for w in out.waiters:
            w.fail(error)
        out.waiters.clear()
        self.close_out(out)
        for peer in [p for p in self.peers.values() if p.out is out]:
            for w in peer.waiters:
                w.fail(error)
            peer.waiters.clear()
            self.peer_down(peer.name, "handshake_failed")

    def expire_connects(self, now: float) -> None:
        for out in [o for o in self.outs.values() if not o.up and now >= o.deadline]:
            self.count("connect_timeouts")
            self.fail_out(out, ConnectError(f"connect to {out.address}: no handshake within the timeout"))
        for peer in [p for p in self.peers.values() if not p.up and now >= p.deadline]:
            self.count("connect_timeouts")
            self.peer_down(peer.name, "handshake_timeout")

    def peer_down(self, name: str, reason: str, notify: bool = True, linger: int = 0) -> None:
        peer = self.peers.pop(name, None)
        if peer is None:
            return
        self.liveness.remove(name)
        self.fragments.forget(name)
        for rid in peer.rids:
            self.rid_peer.pop(rid, None)
        was_up = peer.up
        for w in peer.waiters:
            w.fail(ConnectError(f"node {name} went down while connecting ({reason})"))
        if peer.out is not None:
            self.close_out(peer.out, linger)
        for out in [o for o in self.outs.values() if o.expect == name]:
            self.fail_out(out, ConnectError(f"node {name} went down while connecting ({reason})"))
        if was_up:
            self.count("peers_down")
            if notify:
                self.call(self.on_down, name, peer.incarnation, reason)
