"""The listening side of a link: the ROUTER every peer connects to.

Frames from every peer arrive here: data (handed to ``on_frame`` as its
node's, or held until that node is up), a host's own frames (honoured only
while this link holds a session with its node in that incarnation), ticks,
and the handshake.  A HELLO is answered WELCOME (or REJECT), and if this node
has no DEALER to the peer yet it connects back to the address the HELLO came
from.  A BYE that arrives before our connect-back is welcomed is kept until
it is, so the peer still goes up and at once down.  Frames that do not parse,
or come from a connection that never said HELLO, are dropped and counted.
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
    PROTOCOL_VERSION,
    RECV_BATCH,
    REJECT,
    TICK,
    WELCOME,
    decode,
    recv_event,
)
from actors._core.net.session import Peer
from actors._core.net.zap import Refusals
from actors._core.wire.fragments import Reassembly

__all__ = ["Listener"]

_EVENTS = int(zmq.EVENTS)  # plain ints: enum arithmetic costs more than the syscall it guards
_POLLIN = int(zmq.POLLIN)
FRAGMENT = b"F"  # the first byte of a fragment (`actors._core.wire.fragments`)


class Listener(Outgoing):
    """What peers send to this node's listener (see the module's docstring)."""

    _router: zmq.Socket[bytes]
    _router_mon: zmq.Socket[bytes]
    _handshake_timeout: float
    _refusals: Refusals  # handshakes that failed (logged a line a minute)
    _dirty: bool  # something other than a data frame happened: the loop re-plans
    _fragments: Reassembly  # big frames arriving in fragments, by node

    def _drain_router(self) -> None:
        router = self._router
        get = cast("Callable[[int], int]", router.getsockopt)  # of an int option, an int
        recv = router.recv_multipart
        rid_peer, liveness, now_of, stats, on_frame = (
            self._rid_peer,
            self._liveness,
            self._clock.now,
            self._stats,
            self._on_frame,
        )
        peers = self._peers
        for _ in range(RECV_BATCH):
            # Asking for EVENTS is cheaper than the zmq.Again a NOBLOCK recv raises when empty.
            if not get(_EVENTS) & _POLLIN:
                return
            msg = recv(copy=False)  # frames: a HELLO's carries the Peer-Address it came from
            if len(msg) < 2:
                self._count("garbage")
                continue
            rid, kind = msg[0].bytes, msg[1].bytes
            name = rid_peer.get(rid)
            if kind == DATA and name is not None:
                liveness.received(name, now_of())
                stats["frames_in"] += 1
                frames = [f.bytes for f in msg[2:]]
                if frames and frames[-1][:1] == FRAGMENT:
                    whole = self._reassemble(name, frames)
                    if whole is None:
                        continue
                    frames = whole
                peer = peers.get(name)
                if peer is not None and not peer.up:
                    peer.early.append(frames)
                    self._count("held_before_up")
                else:
                    self._call(on_frame, name, frames)
                continue
            if kind == HOST_DATA and len(msg) >= 3:
                # A host's own connection: every frame names its node and
                # incarnation, honoured only while we hold a session with it.
                origin = msg[2].bytes
                name, _, inc = origin.decode("ascii", "replace").rpartition("@")
                peer = self._peers.get(name)
                if peer is not None and not peer.bye and inc == f"{peer.incarnation:x}":
                    liveness.received(name, now_of())
                    stats["host_frames_in"] += 1
                    frames = [f.bytes for f in msg[3:]]
                    if frames[-1][:1] == FRAGMENT:
                        whole = self._reassemble(name, frames)
                        if whole is None:
                            continue
                        frames = whole
                    if peer.up:
                        self._call(on_frame, name, frames)
                    else:
                        peer.early.append(frames)
                        self._count("held_before_up")
                else:
                    self._count("host_frames_refused")
                continue
            self._dirty = True
            if kind == HELLO:
                self._hello(rid, msg)
                continue
            if name is None:
                # Authenticated, but no HELLO on this connection (or its peer was
                # declared down): drop, and tell it so it stops talking to us.
                self._count("unknown_session")
                self._router_send([rid, REJECT, orjson.dumps({"reason": "no session"})])
                continue
            if kind == TICK and len(msg) == 2:
                liveness.received(name, now_of())
                stats["ticks_in"] += 1
            elif kind == BYE and len(msg) == 2:
                self._bye(name)
            else:
                self._count("garbage")

    def _reassemble(self, name: str, frames: list[bytes]) -> list[bytes] | None:
        """A fragment of a big frame from ``name``: the frames with the whole
        of it once its last fragment is in (`actors._core.wire.fragments`),
        else None; a stream that breaks is dropped and counted."""
        try:
            whole = self._fragments.add(name, frames[-1])
        except ValueError:
            self._count("fragments_garbage")
            return None
        if whole is None:
            return None
        self._stats["fragmented_frames_in"] += 1
        return [*frames[:-1], whole]

    def _hello(self, rid: bytes, msg: list[zmq.Frame]) -> None:
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
            self._count("garbage")
            self._router_send([rid, REJECT, orjson.dumps({"reason": "bad hello"})])
            return
        name, inc = body["name"], body["inc"]
        if name == self.name:
            self._router_send([rid, REJECT, orjson.dumps({"reason": f"{name} is this node's own name"})])
            return
        refusal = self._refusal(name, inc)
        if refusal is not None:
            self._count("refused")
            self._router_send([rid, REJECT, orjson.dumps(refusal)])
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
            peer = self._peers[name] = Peer(name, inc, self._clock.now() + self._handshake_timeout)
        peer.rids.add(rid)
        self._rid_peer[rid] = name
        self._liveness.received(name, self._clock.now())
        if peer.out is None:
            out = next((o for o in self._outs.values() if o.expect == name or o.name == name), None)
            if out is None:
                host = cast(str, msg[2].get("Peer-Address"))
                if ":" in host:
                    host = f"[{host}]"
                out = self._start_connect(f"tcp://{host}:{body['port']}", None, self._handshake_timeout, expect=name)
            if out is not None:
                if out.expect is None and out.name is None:
                    out.expect = name  # a connect we started to the same address: it is this node
                peer.out = out  # frames queue behind our HELLO until the WELCOME comes
        # Welcome only now: once the peer has it, it may expect us to send to it.
        welcome = [rid, WELCOME, orjson.dumps({"v": PROTOCOL_VERSION, "name": self.name, "inc": self.incarnation})]
        # Only to a peer that said it reads a greeting: a node of an older version takes a
        # WELCOME of three frames for garbage.
        extra = self._greeting_for(name) if body.get("greets") is True else None
        self._router_send(welcome if extra is None else [*welcome, extra])
        self._maybe_up(peer)

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

    def _router_send(self, frames: list[bytes]) -> None:
        try:
            self._router.send_multipart(frames, zmq.NOBLOCK)
        except zmq.ZMQError:  # the connection went away meanwhile (EHOSTUNREACH)
            self._count("reply_unroutable")

    def _listen_event(self) -> None:
        while True:
            try:
                kind, endpoint = recv_event(self._router_mon)
            except zmq.Again:
                return
            if kind & HANDSHAKE_FAILED:
                self._count("handshake_failures")
                self._refusals.failed(self._clock.now(), str(endpoint, errors="replace"))
            elif kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._count("handshakes_in")
            elif kind == zmq.EVENT_ACCEPTED:
                self._count("accepted")
