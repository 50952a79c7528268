"""The outgoing side of a link: this node's DEALER to each peer.

Everything this node sends to a peer goes through one DEALER, so frames to a
peer arrive in the order sent.  A connection starts with our HELLO and is
pending until the peer's WELCOME (or its REJECT, a failed CurveZMQ
handshake, a timeout); once welcomed it leaves the poll loop and any thread
sends on it (`actors._core.net.net.NetLink.send`).  A dropped tcp connection
is noticed at once through the DEALER's socket monitor.

`Outgoing` holds the link's `actors._core.net.session.Sessions` and moves its
connections through these states there; the listener
(`actors._core.net.listener`) holds it to connect back to a peer that said
HELLO, and the poll loop (`actors._core.net.loop`) hands it what its DEALERs
and their monitors receive.
"""

from __future__ import annotations

import orjson
import zmq

from actors._core.net.protocol import (
    BYE,
    BYE_LINGER_MS,
    DATA,
    HANDSHAKE_FAILED,
    HELLO,
    OUT_EVENTS,
    PROTOCOL_VERSION,
    RECV_BATCH,
    REJECT,
    WELCOME,
    ConnectError,
    RejectedCallback,
    decode,
    recv_event,
)
from actors._core.net.session import Out, Peer, Sessions, Waiter
from actors._core.wire.fragments import SEND_BUFFER

__all__ = ["Outgoing"]


class Outgoing:
    """Connecting to peers, and what their listeners answer (see the module's docstring).

    It holds the link's `Sessions`, whose peers and connections it moves
    through the handshake; the I/O thread gives it the ZeroMQ context and
    the port it listens on once it has bound (`attach`).
    """

    ctx: zmq.Context[zmq.Socket[bytes]]
    port: int  # the port this node listens on, told in its HELLO

    def __init__(self, sessions: Sessions, on_rejected: RejectedCallback | None) -> None:
        self.sessions = sessions
        self.on_rejected = on_rejected

    def attach(self, ctx: zmq.Context[zmq.Socket[bytes]], port: int) -> None:
        """Connect from now on with ``ctx``, saying this node listens on ``port``."""
        self.ctx = ctx
        self.port = port

    def start_connect(
        self, address: str, waiter: Waiter | None, timeout: float, expect: str | None = None
    ) -> Out | None:
        s = self.sessions
        for out in s.outs.values():
            if out.address == address:  # already connected or connecting there
                if waiter is not None:
                    peer = s.peers.get(out.name) if out.name is not None else None
                    if peer is not None and peer.up:
                        waiter.ok(peer.name)
                    elif peer is not None:
                        peer.waiters.append(waiter)
                    else:
                        out.waiters.append(waiter)
                return out
        sock = self.ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.sndhwm = 0  # the link queues rather than drops; the caller sees loss only as on_down
        sock.sndbuf = SEND_BUFFER
        sock.copy_threshold = 0  # a fragment sent without copy is tracked whatever its size (`FragmentWindow`)
        sock.rcvhwm = 1000  # only read until welcomed
        if s.key is not None:
            sock.curve_serverkey = s.key.public
            sock.curve_publickey = s.key.public
            sock.curve_secretkey = s.key.secret
        mon = sock.get_monitor_socket(OUT_EVENTS)
        out = Out(address, sock, mon, s.clock.now() + timeout, expect=expect)
        if waiter is not None:
            out.waiters.append(waiter)
        try:
            sock.connect(address)
        except zmq.ZMQError as exc:
            s.close_out(out)
            if waiter is not None:
                waiter.fail(ConnectError(f"connect to {address}: {exc}"))
            return None
        s.outs[sock] = out
        s.mons[mon] = out
        s.poller.register(sock, zmq.POLLIN)
        s.poller.register(mon, zmq.POLLIN)
        sock.send_multipart(
            [
                HELLO,
                orjson.dumps(
                    {
                        "v": PROTOCOL_VERSION,
                        "name": s.name,
                        "inc": s.incarnation,
                        "port": self.port,
                        "greets": True,
                    }
                ),
            ]
        )
        return out

    def send_data(self, peer: str, frames: list[bytes], out: Out, queued: bool = False) -> None:
        s = self.sessions
        p = s.peers.get(peer)
        with out.lock:
            if queued:
                out.queued -= 1
            sent = p is not None and p.out is out and not out.sock.closed
            if sent:
                out.sock.send_multipart([DATA, *frames])
        if sent:
            with s.frames_out_lock:
                s.stats["frames_out"] += 1
        else:
            s.count("dropped")

    def drain_out(self, out: Out) -> None:
        s = self.sessions
        for _ in range(RECV_BATCH):
            if out.sock not in s.outs:
                return
            try:
                msg = out.sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            kind = msg[0] if msg else b""
            body = decode(msg[1]) if len(msg) in (2, 3) else None
            if (
                kind == WELCOME
                and isinstance(body, dict)
                and isinstance(body.get("name"), str)
                and isinstance(body.get("inc"), int)
                and not out.up
            ):
                self.welcomed(out, body["name"], body["inc"], msg[2] if len(msg) == 3 else None)
            elif kind == REJECT:
                reason = body.get("reason") if isinstance(body, dict) else None
                if isinstance(body, dict):
                    s.call(self.on_rejected, out.name or out.expect, out.address, body)
                if out.up and out.name is not None:
                    s.peer_down(out.name, "rejected")
                else:
                    s.fail_out(out, ConnectError(f"connect to {out.address}: rejected ({reason})"))
                return
            else:
                s.count("garbage")

    def welcomed(self, out: Out, name: str, inc: int, greeting: bytes | None = None) -> None:
        s = self.sessions
        if name == s.name or (out.expect is not None and name != out.expect):
            s.fail_out(out, ConnectError(f"connect to {out.address}: answered by {name!r}"))
            return
        refusal = s.refusal(name, inc)
        if refusal is not None:
            # Say goodbye on the connection it just welcomed: a peer that still
            # counts us up (it was stopped, say) learns at once that it is not.
            s.count("refused")
            try:
                out.sock.send_multipart([BYE], zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
            for w in out.waiters:
                w.fail(ConnectError(f"connect to {out.address}: {refusal['reason']}"))
            out.waiters.clear()
            s.close_out(out, linger=BYE_LINGER_MS)
            return
        peer = s.peers.get(name)
        if peer is not None and peer.incarnation != inc:
            s.peer_down(name, "new_incarnation")
            peer = None
        if peer is None:
            peer = s.peers[name] = Peer(name, inc, out.deadline)
        if greeting is not None and not peer.up:
            peer.greeting = greeting
        peer.waiters.extend(out.waiters)
        out.waiters.clear()
        if peer.out is not None and peer.out is not out:
            s.close_out(out)  # a second DEALER to a node we already have one to: keep the first
        else:
            with out.lock:  # from now on other threads send on it: stop polling it here
                s.poller.unregister(out.sock)
                out.up, out.name = True, name
            peer.out = out
        s.maybe_up(peer)

    def out_event(self, out: Out) -> None:
        s = self.sessions
        while out.mon in s.mons:
            try:
                kind, endpoint = recv_event(out.mon)
            except zmq.Again:
                return
            if kind & HANDSHAKE_FAILED:
                s.count("handshake_failures_out")
                if not out.up:
                    s.fail_out(
                        out,
                        ConnectError(
                            f"connect to {out.address}: CurveZMQ handshake failed (does the peer hold the same "
                            f"cluster key?)"
                        ),
                    )
                    return
            elif kind == zmq.EVENT_DISCONNECTED and out.up and out.name is not None:
                s.peer_down(out.name, "connection_closed")
                return
