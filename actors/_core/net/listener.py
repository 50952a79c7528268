"""The listening side of a link: the ROUTER every peer connects to.

Frames from every peer arrive here: data (handed to ``on_frame`` as its
node's, or held until that node is up), a host's own frames (honoured only
while this link holds a session with its node in that incarnation), ticks,
and the handshake.  A HELLO is answered WELCOME (or REJECT), and if this node
has no DEALER to the peer yet it connects back to the address the HELLO came
from.  A BYE that arrives before our connect-back is welcomed is kept until
it is, so the peer still goes up and at once down.  Frames that do not parse,
or come from a connection that never said HELLO, are dropped and counted.

`Listener` owns the ROUTER and its socket monitor, and holds the link's
`actors._core.net.session.Sessions`, whose peers it moves through the
handshake, and its `actors._core.net.outgoing.Outgoing`, to connect back.
The poll loop (`actors._core.net.loop`) hands it what the ROUTER receives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import orjson
import zmq

from actors._core.net.outgoing import Outgoing
from actors._core.net.protocol import (
    BYE,
    DATA,
    HANDSHAKE_FAILED,
    HELLO,
    HOST_DATA,
    LISTEN_EVENTS,
    PROTOCOL_VERSION,
    RECV_BATCH,
    REJECT,
    TICK,
    WELCOME,
    decode,
    recv_event,
)
from actors._core.net.session import Peer, Sessions
from actors._core.net.zap import ZAP_DOMAIN, Refusals

__all__ = ["Listener"]

_EVENTS = int(zmq.EVENTS)  # plain ints: enum arithmetic costs more than the syscall it guards
_POLLIN = int(zmq.POLLIN)
FRAGMENT = b"F"  # the first byte of a fragment (`actors._core.wire.fragments`)


class Listener:
    """What peers send to this node's listener (see the module's docstring)."""

    router: zmq.Socket[bytes]  # set by `bind`, on the I/O thread
    router_mon: zmq.Socket[bytes]

    def __init__(self, sessions: Sessions, outgoing: Outgoing, handshake_timeout: float) -> None:
        self.sessions = sessions
        self.outgoing = outgoing
        self.handshake_timeout = handshake_timeout
        self.refusals = Refusals(f"link {sessions.name}")  # handshakes that failed (logged a line a minute)

    def bind(self, ctx: zmq.Context[zmq.Socket[bytes]], listen: str) -> str:
        """Open the ROUTER in ``ctx`` and bind it to ``listen``; returns the address bound."""
        key = self.sessions.key
        router = ctx.socket(zmq.ROUTER)
        router.linger = 0
        router.router_mandatory = True
        router.sndhwm = 0
        # Frames from one peer queued here at most (ZeroMQ's default): past
        # it the peer's sends wait on tcp, so a fast sender grows no queue
        # in this process while its frames are handed on to a slower host.
        router.rcvhwm = 1000
        if key is not None:
            router.curve_server = True
            router.curve_secretkey = key.secret
            router.curve_publickey = key.public
            router.zap_domain = ZAP_DOMAIN
        self.router = router
        self.router_mon = router.get_monitor_socket(LISTEN_EVENTS)
        router.bind(listen)
        return cast(bytes, router.last_endpoint).decode()

    def close(self) -> None:
        """Close the ROUTER and its monitor, if `bind` got as far as opening them."""
        router = getattr(self, "router", None)
        if router is not None:
            router.disable_monitor()
            self.router_mon.close(linger=0)
            router.close(linger=0)

    def drain_router(self) -> None:
        s = self.sessions
        router = self.router
        get = cast("Callable[[int], int]", router.getsockopt)  # of an int option, an int
        recv = router.recv_multipart
        rid_peer, liveness, now_of, stats, on_frame, call, count = (
            s.rid_peer,
            s.liveness,
            s.clock.now,
            s.stats,
            s.on_frame,
            s.call,
            s.count,
        )
        peers = s.peers
        for _ in range(RECV_BATCH):
            # Asking for EVENTS is cheaper than the zmq.Again a NOBLOCK recv raises when empty.
            if not get(_EVENTS) & _POLLIN:
                return
            msg = recv(copy=False)  # frames: a HELLO's carries the Peer-Address it came from
            if len(msg) < 2:
                count("garbage")
                continue
            rid, kind = msg[0].bytes, msg[1].bytes
            name = rid_peer.get(rid)
            if kind == DATA and name is not None:
                liveness.received(name, now_of())
                stats["frames_in"] += 1
                frames = [f.bytes for f in msg[2:]]
                if frames and frames[-1][:1] == FRAGMENT:
                    whole = self.reassemble(name, frames)
                    if whole is None:
                        continue
                    frames = whole
                peer = peers.get(name)
                if peer is not None and not peer.up:
                    peer.early.append(frames)
                    count("held_before_up")
                else:
                    call(on_frame, name, frames)
                continue
            if kind == HOST_DATA and len(msg) >= 3:
                # A host's own connection: every frame names its node and
                # incarnation, honoured only while we hold a session with it.
                origin = msg[2].bytes
                name, _, inc = origin.decode("ascii", "replace").rpartition("@")
                peer = peers.get(name)
                if peer is not None and not peer.bye and inc == f"{peer.incarnation:x}":
                    liveness.received(name, now_of())
                    stats["host_frames_in"] += 1
                    frames = [f.bytes for f in msg[3:]]
                    if frames[-1][:1] == FRAGMENT:
                        whole = self.reassemble(name, frames)
                        if whole is None:
                            continue
                        frames = whole
                    if peer.up:
                        call(on_frame, name, frames)
                    else:
                        peer.early.append(frames)
                        count("held_before_up")
                else:
                    count("host_frames_refused")
                continue
            s.dirty = True
            if kind == HELLO:
                self.hello(rid, msg)
                continue
            if name is None:
                # Authenticated, but no HELLO on this connection (or its peer was
                # declared down): drop, and tell it so it stops talking to us.
                count("unknown_session")
                self.router_send([rid, REJECT, orjson.dumps({"reason": "no session"})])
                continue
            if kind == TICK and len(msg) == 2:
                liveness.received(name, now_of())
                stats["ticks_in"] += 1
            elif kind == BYE and len(msg) == 2:
                self.bye(name)
            else:
                count("garbage")

    def reassemble(self, name: str, frames: list[bytes]) -> list[bytes] | None:
        """A fragment of a big frame from ``name``: the frames with the whole
        of it once its last fragment is in (`actors._core.wire.fragments`),
        else None; a stream that breaks is dropped and counted."""
        s = self.sessions
        try:
            whole = s.fragments.add(name, frames[-1])
        except ValueError:
            s.count("fragments_garbage")
            return None
        if whole is None:
            return None
        s.stats["fragmented_frames_in"] += 1
        return [*frames[:-1], whole]

    def hello(self, rid: bytes, msg: list[zmq.Frame]) -> None:
        s = self.sessions
        body = decode(msg[2].bytes) if len(msg) == 3 else None
        if (
            not isinstance(body, dict)
            or body.get("v") != PROTOCOL_VERSION
            or not isinstance(body.get("name"), str)
            or not body["name"]
            or len(body["name"]) > 255
            or not isinstance(body.get("inc"), int)
            or not isinstance(body.get("port"), int)
            or not 0 < body["port"] <= 65535
        ):
            s.count("garbage")
            self.router_send([rid, REJECT, orjson.dumps({"reason": "bad hello"})])
            return
        name, inc = body["name"], body["inc"]
        if name == s.name:
            self.router_send([rid, REJECT, orjson.dumps({"reason": f"{name} is this node's own name"})])
            return
        refusal = s.refusal(name, inc)
        if refusal is not None:
            s.count("refused")
            self.router_send([rid, REJECT, orjson.dumps(refusal)])
            return
        old = s.rid_peer.get(rid)
        if old is not None and old != name:  # one connection, one node: never a second name
            s.count("garbage")
            return
        peer = s.peers.get(name)
        if peer is not None and peer.incarnation != inc:
            s.peer_down(name, "new_incarnation")
            peer = None
        elif peer is not None and peer.bye:  # it said goodbye, and now starts a new session
            s.peer_down(name, "peer_closed")
            peer = None
        if peer is None:
            peer = s.peers[name] = Peer(name, inc, s.clock.now() + self.handshake_timeout)
        peer.rids.add(rid)
        s.rid_peer[rid] = name
        s.liveness.received(name, s.clock.now())
        if peer.out is None:
            out = next((o for o in s.outs.values() if o.expect == name or o.name == name), None)
            if out is None:
                host = cast(str, msg[2].get("Peer-Address"))
                if ":" in host:
                    host = f"[{host}]"
                out = self.outgoing.start_connect(
                    f"tcp://{host}:{body['port']}", None, self.handshake_timeout, expect=name
                )
            if out is not None:
                if out.expect is None and out.name is None:
                    out.expect = name  # a connect we started to the same address: it is this node
                peer.out = out  # frames queue behind our HELLO until the WELCOME comes
        # Welcome only now: once the peer has it, it may expect us to send to it.
        welcome = [rid, WELCOME, orjson.dumps({"v": PROTOCOL_VERSION, "name": s.name, "inc": s.incarnation})]
        # Only to a peer that said it reads a greeting: a node of an older version takes a
        # WELCOME of three frames for garbage.
        extra = s.greeting_for(name) if body.get("greets") is True else None
        self.router_send(welcome if extra is None else [*welcome, extra])
        s.maybe_up(peer)

    def bye(self, name: str) -> None:
        """A peer said goodbye.  If our DEALER to it is not welcomed yet, the
        peer already counts us up (it sent the WELCOME before its connect
        returned), so wait for that WELCOME, then report it up and down: the
        layer above always sees a disconnect, and sees it in up/down pairs."""
        s = self.sessions
        peer = s.peers[name]
        if peer.up or peer.out is None or peer.out.sock.closed:
            s.peer_down(name, "peer_closed")
            return
        s.count("bye_before_up")
        peer.bye = True
        for rid in peer.rids:  # nothing more may arrive from it on these connections
            s.rid_peer.pop(rid, None)

    def router_send(self, frames: list[bytes]) -> None:
        try:
            self.router.send_multipart(frames, zmq.NOBLOCK)
        except zmq.ZMQError:  # the connection went away meanwhile (EHOSTUNREACH)
            self.sessions.count("reply_unroutable")

    def listen_event(self) -> None:
        s = self.sessions
        while True:
            try:
                kind, endpoint = recv_event(self.router_mon)
            except zmq.Again:
                return
            if kind & HANDSHAKE_FAILED:
                s.count("handshake_failures")
                self.refusals.failed(s.clock.now(), str(endpoint, errors="replace"))
            elif kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                s.count("handshakes_in")
            elif kind == zmq.EVENT_ACCEPTED:
                s.count("accepted")
