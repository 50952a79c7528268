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

Greeting: the WELCOME to a HELLO that says ``greets`` may carry a third
frame, opaque bytes the layer above offers (``greeting(peer)``, asked on
the I/O thread when the WELCOME is sent, so it is what this node holds at
that moment).  The peer hands it to its ``on_greeting(peer, incarnation,
data)`` just before its ``on_up``: a table the two nodes replicate is
merged before either side reports the other up, so nothing above sees the
peer connected with the table unmerged.

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

The link is a few objects, a module each, bottom-up:
`actors._core.net.protocol` (frame kinds, addresses, errors),
`actors._core.net.zap` (the ZAP handler), `actors._core.net.session` (the
state the parts share, and the handshake's transitions over it),
`actors._core.net.outgoing` (our DEALERs), `actors._core.net.listener` (our
ROUTER), `actors._core.net.loop` (the I/O thread) and here `NetLink`, what
the layer above calls.  `NetLink` builds one `Sessions` and hands it to an
`Outgoing`, a `Listener` (which also holds the `Outgoing`, to connect back)
and an `IOLoop` that drives both; each part is given only what it uses.
`NetLink` keeps its own references to the peers and the counters, so a
direct send goes through no part.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable

from actors._core.base.clock import Clock, MonotonicClock
from actors._core.net.keys import ClusterKey
from actors._core.net.listener import Listener
from actors._core.net.loop import IOLoop
from actors._core.net.outgoing import Outgoing
from actors._core.net.protocol import (
    DATA,
    ConnectError,
    DownCallback,
    FrameCallback,
    GreetedCallback,
    GreetingCallback,
    NetError,
    RefuseCallback,
    RejectedCallback,
    UpCallback,
    is_loopback,
    parse_tcp,
)
from actors._core.net.session import Out, Peer, Sessions, Waiter
from actors._core.net.tick import DEFAULT_NET_TICKTIME
from actors._core.wire.fragments import FRAGMENT_SIZE, split

__all__ = ["ConnectError", "NetError", "NetLink", "is_loopback", "parse_tcp"]


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
        greeting: GreetingCallback | None = None,
        on_greeting: GreetedCallback | None = None,
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
        sessions = Sessions(
            name,
            key,
            self.incarnation,
            on_frame=on_frame,
            on_up=on_up,
            on_down=on_down,
            refuse=refuse,
            greeting=greeting,
            on_greeting=on_greeting,
            clock=clock if clock is not None else MonotonicClock(),
            net_ticktime=net_ticktime,
        )
        outgoing = Outgoing(sessions, on_rejected)
        self._sessions = sessions
        self._outgoing = outgoing
        self._io = IOLoop(sessions, outgoing, Listener(sessions, outgoing, handshake_timeout), listen)
        # What `send` reads on every call, held here so that it reads them
        # in one step (the objects are the sessions', never replaced).
        self._peers = sessions.peers
        self._stats = sessions.stats
        self._frames_out_lock = sessions.frames_out_lock
        self._thread: threading.Thread | None = None
        self._loop_ident: int | None = None  # the I/O thread's

    @property
    def address(self) -> str:
        """The address the listener is bound to ("" until `start`)."""
        return self._io.address

    # -- public API (any thread) ---------------------------------------------

    def start(self, timeout: float = 10.0) -> str:
        """Bind the listener and start the I/O thread; returns the bound address."""
        if self._thread is not None:
            raise NetError("link already started")
        io = self._io
        io.open()
        self._thread = threading.Thread(target=self._run, name=f"otpy-net-{self.name}", daemon=True)
        self._thread.start()
        if not io.started.wait(timeout):
            raise NetError(f"link {self.name} did not start within {timeout} s")
        if io.start_error is not None:
            self._thread.join(timeout)
            self._thread = None
            io.shut()
            raise io.start_error
        return self.address

    def _run(self) -> None:
        self._loop_ident = threading.get_ident()
        self._io.run()

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
        waiter = Waiter()
        self._io.command("connect", address, waiter, timeout)
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
        self._sessions.count("connects_soon")
        self._io.command("connect", address, None, timeout, expect)

    def send(self, peer: str, frames: list[bytes], may_wait: bool = True) -> None:
        """Queue ``frames`` for ``peer``; `NetError` if it is not connected now.

        A send that races with the peer going down is dropped and counted
        (``dropped``); the caller learns of the loss from ``on_down``.

        A last part bigger than `FRAGMENT_SIZE` goes in fragments, the same
        leading parts before each (`actors._core.wire.fragments`); with
        ``may_wait`` the caller waits, while the peer is up, for the link to
        take each, so that small frames of others go between them.  A thread
        that must not wait (one that reads an endpoint) hands them all over
        at once: still a sign of life each as they arrive.
        """
        p = self._peers.get(peer)
        if p is None or p.out is None:
            raise NetError(f"node {peer!r} is not connected")
        out = p.out
        if len(frames[-1]) > FRAGMENT_SIZE:
            self._send_fragments(p, out, frames, may_wait)
            return
        if threading.get_ident() == self._loop_ident:
            # From a callback on the I/O thread (a reply, an echo): no hop, and
            # still in order, since every earlier command was run before it.
            self._outgoing.send_data(peer, frames, out)
            return
        with out.lock:
            direct = out.up and out.queued == 0 and not out.sock.closed
            if direct:
                out.sock.send_multipart([DATA, *frames])
            else:
                out.queued += 1
        if direct:
            with self._frames_out_lock:
                self._stats["frames_out"] += 1
        else:  # not welcomed yet: the I/O thread sends it behind the HELLO
            self._io.command("send", peer, frames, out)

    def _send_fragments(self, p: Peer, out: Out, frames: list[bytes], may_wait: bool) -> None:
        head = [DATA, *frames[:-1]]
        on_loop = threading.get_ident() == self._loop_ident
        wait = may_wait and not on_loop
        window = out.window
        for fragment in split(frames[-1]):
            if wait:
                while not window.wait(time.monotonic() + 0.5):
                    if self._peers.get(p.name) is not p or out.sock.closed:
                        self._sessions.count("dropped")
                        return
            if on_loop:
                self._outgoing.send_data(p.name, [*head[1:], fragment], out)
                continue
            with out.lock:
                direct = out.up and out.queued == 0 and not out.sock.closed
                if direct:
                    window.sent(out.sock.send_multipart([*head, fragment], copy=False, track=True))
                else:
                    out.queued += 1
            if direct:
                with self._frames_out_lock:
                    self._stats["fragments_out"] += 1
            else:
                self._io.command("send", p.name, [*head[1:], bytes(fragment)], out)

    def after_drain(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the link's I/O thread once every frame that has arrived
        by now, on any connection, has been handed to ``on_frame``: what a
        peer's host sent on its own connection before the peer reported that
        host dead is delivered before the report is acted on."""
        self._io.command("after_drain", fn)

    def address_of(self, peer: str) -> str | None:
        """The address this node's connection to ``peer`` goes to (its listener)."""
        p = self._peers.get(peer)
        return None if p is None or p.out is None else p.out.address

    def disconnect(self, peer: str) -> None:
        """Drop the connection to ``peer`` (it sees ``peer_closed``)."""
        self._io.command("disconnect", peer)

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
        cond = self._sessions.stats_cond
        with cond:
            return cond.wait_for(lambda: predicate(dict(self._stats)), timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Say goodbye to every peer, close every socket, join the I/O thread."""
        io = self._io
        if io.closed:
            return
        io.closed = True
        thread = self._thread
        if thread is None:
            return
        io.command("close")
        thread.join(timeout)
        if thread.is_alive():
            raise NetError(f"link {self.name}: I/O thread did not stop within {timeout} s")
        io.shut()
