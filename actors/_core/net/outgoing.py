"""The outgoing side of a link: this node's DEALER to each peer.

Everything this node sends to a peer goes through one DEALER, so frames to a
peer arrive in the order sent.  A connection starts with our HELLO and is
pending until the peer's WELCOME (or its REJECT, a failed CurveZMQ
handshake, a timeout); once welcomed it leaves the poll loop and any thread
sends on it (`actors._core.net.net.NetLink.send`).  A dropped tcp connection
is noticed at once through the DEALER's socket monitor.
"""

from __future__ import annotations

import threading

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


class Outgoing(Sessions):
    """Connecting to peers, and what their listeners answer (see the module's docstring)."""

    _ctx: zmq.Context[zmq.Socket[bytes]]
    _port: int  # the port this node listens on, told in its HELLO
    _on_rejected: RejectedCallback | None
    _frames_out_lock: threading.Lock

    def _start_connect(
        self, address: str, waiter: Waiter | None, timeout: float, expect: str | None = None
    ) -> Out | None:
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
        sock.sndbuf = SEND_BUFFER
        sock.copy_threshold = 0  # a fragment sent without copy is tracked whatever its size (`FragmentWindow`)
        sock.rcvhwm = 1000  # only read until welcomed
        if self.key is not None:
            sock.curve_serverkey = self.key.public
            sock.curve_publickey = self.key.public
            sock.curve_secretkey = self.key.secret
        mon = sock.get_monitor_socket(OUT_EVENTS)
        out = Out(address, sock, mon, self._clock.now() + timeout, expect=expect)
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
        sock.send_multipart(
            [
                HELLO,
                orjson.dumps(
                    {
                        "v": PROTOCOL_VERSION,
                        "name": self.name,
                        "inc": self.incarnation,
                        "port": self._port,
                        "greets": True,
                    }
                ),
            ]
        )
        return out

    def _send_data(self, peer: str, frames: list[bytes], out: Out, queued: bool = False) -> None:
        p = self._peers.get(peer)
        with out.lock:
            if queued:
                out.queued -= 1
            sent = p is not None and p.out is out and not out.sock.closed
            if sent:
                out.sock.send_multipart([DATA, *frames])
        if sent:
            with self._frames_out_lock:
                self._stats["frames_out"] += 1
        else:
            self._count("dropped")

    def _drain_out(self, out: Out) -> None:
        for _ in range(RECV_BATCH):
            if out.sock not in self._outs:
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
                self._welcomed(out, body["name"], body["inc"], msg[2] if len(msg) == 3 else None)
            elif kind == REJECT:
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

    def _welcomed(self, out: Out, name: str, inc: int, greeting: bytes | None = None) -> None:
        if name == self.name or (out.expect is not None and name != out.expect):
            self._fail_out(out, ConnectError(f"connect to {out.address}: answered by {name!r}"))
            return
        refusal = self._refusal(name, inc)
        if refusal is not None:
            # Say goodbye on the connection it just welcomed: a peer that still
            # counts us up (it was stopped, say) learns at once that it is not.
            self._count("refused")
            try:
                out.sock.send_multipart([BYE], zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
            for w in out.waiters:
                w.fail(ConnectError(f"connect to {out.address}: {refusal['reason']}"))
            out.waiters.clear()
            self._close_out(out, linger=BYE_LINGER_MS)
            return
        peer = self._peers.get(name)
        if peer is not None and peer.incarnation != inc:
            self._peer_down(name, "new_incarnation")
            peer = None
        if peer is None:
            peer = self._peers[name] = Peer(name, inc, out.deadline)
        if greeting is not None and not peer.up:
            peer.greeting = greeting
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

    def _out_event(self, out: Out) -> None:
        while out.mon in self._mons:
            try:
                kind, endpoint = recv_event(out.mon)
            except zmq.Again:
                return
            if kind & HANDSHAKE_FAILED:
                self._count("handshake_failures_out")
                if not out.up:
                    self._fail_out(
                        out,
                        ConnectError(
                            f"connect to {out.address}: CurveZMQ handshake failed (does the peer hold the same "
                            f"cluster key?)"
                        ),
                    )
                    return
            elif kind == zmq.EVENT_DISCONNECTED and out.up and out.name is not None:
                self._peer_down(out.name, "connection_closed")
                return
