"""A host process's own connections to other nodes.

Without them, a frame a host sends to a process of another node goes to
its node process first (an ipc hop and a wake-up of the node's I/O thread),
which sends it over the node's `actors._core.net.net.NetLink`.  With them, the host
sends it itself, on a DEALER of its own connected to the other node's
listener: a CURVE client holding the cluster key like the node's link, so
the other node's ZAP handler admits it on the same terms and nothing
unauthenticated reaches a decoder.

There is no handshake beyond CURVE's: every frame says which node and
incarnation it comes from (``S <name>@<inc>``), and the other node honours
it only while it holds a session with this node in that incarnation; so a
connection that drops and comes back needs nothing re-said, and frames of a
session that ended are dropped there.  Liveness, up and down stay the node
link's business.

Order: the path to a node is chosen on the host's first frame for it and
never changes.  A node the host has been told of (`DirectLinks.learn`,
from its node process when the link comes up) gets a direct connection;
one it has not, the node-process relay, for good.  So everything one host
sends to one other node takes one path, and arrives in the order sent.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import zmq

__all__ = ["DirectLinks"]

_HOST_DATA = b"S"  # as actors._core.net.protocol's HOST_DATA
#: Frames queued at most on a connection (ZeroMQ's default high-water
#: mark): past it a sender that may wait waits for room, so a fast sender
#: to a slow node grows no queue here.
_SNDHWM = 1000
_RELAY = object()  # a node this host reaches through its node process, for good


class _Direct:
    __slots__ = ("sock", "lock")

    def __init__(self, sock: zmq.Socket[bytes]) -> None:
        self.sock: zmq.Socket[bytes] | None = sock
        self.lock = threading.Lock()


class DirectLinks:
    """The direct connections of one host process, keyed by node id (``name@inc``)."""

    def __init__(
        self,
        ctx: "zmq.Context[zmq.Socket[bytes]]",
        node_id: str,
        proc: str,
        io_thread: threading.Thread | None = None,
        wait: float = 0.0,
    ) -> None:
        self._ctx = ctx
        #: A full connection holds back any sender but ``io_thread`` (which
        #: must keep reading its process's endpoint) for up to ``wait`` seconds.
        self._io_thread = io_thread
        self._wait = wait
        self._origin = node_id.encode()  # name@incarnation, hex as node ids write it
        self.proc = proc
        self._known: dict[str, tuple[str, bytes | None, bytes | None]] = {}
        self._paths: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.dropped = 0

    def learn(self, node_id: str, address: str, public: bytes | None, secret: bytes | None) -> None:
        """Node ``node_id`` listens at ``address`` (key halves None: no CurveZMQ)."""
        with self._lock:
            self._known[node_id] = (address, public, secret)

    def send(self, node_id: str, proc: str, frame: bytes) -> bool:
        """Send ``frame`` to process ``proc`` of node ``node_id`` directly;
        False when that node goes by the node-process relay.  A full
        connection is waited on (see the constructor) while the node is
        known, then the frame is dropped and counted."""
        path = self._paths.get(node_id)
        if path is None:
            path = self._open(node_id)
        if path is _RELAY:
            return False
        with path.lock:
            sock = path.sock
            if sock is None:  # that node is gone: dropped, as a send to a dead process is
                return True
            parts = [_HOST_DATA, self._origin, proc.encode(), frame]
            try:
                sock.send_multipart(parts, zmq.NOBLOCK)
            except zmq.Again:
                wait = 0.0 if threading.current_thread() is self._io_thread else self._wait
                if not self._send_when_room(node_id, sock, parts, wait):
                    self.dropped += 1
            except zmq.ZMQError:  # closing
                self.dropped += 1
        return True

    def _send_when_room(self, node_id: str, sock: zmq.Socket[bytes], parts: list[bytes], wait: float) -> bool:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not self._closed and node_id in self._known:
            if sock.poll(50, zmq.POLLOUT):
                try:
                    sock.send_multipart(parts, zmq.NOBLOCK)
                    return True
                except zmq.Again:
                    continue
        return False

    def _open(self, node_id: str) -> Any:
        with self._lock:
            path = self._paths.get(node_id)
            if path is not None:
                return path
            known = self._known.get(node_id)
            if known is None or self._closed:
                path = self._paths[node_id] = _RELAY
                return path
            address, public, secret = known
            sock = self._ctx.socket(zmq.DEALER)
            sock.linger = 0
            sock.sndhwm = _SNDHWM
            sock.rcvhwm = 16  # the other node never sends on it
            if public is not None and secret is not None:
                sock.curve_serverkey = public
                sock.curve_publickey = public
                sock.curve_secretkey = secret
            sock.connect(address)
            path = self._paths[node_id] = _Direct(sock)
            return path

    def forget(self, node_id: str) -> None:
        """Node ``node_id`` is down: close its connection; later sends are dropped."""
        with self._lock:
            self._known.pop(node_id, None)
            path = self._paths.get(node_id)
            if path is None:
                self._paths[node_id] = _RELAY  # never open one to a node known down
                return
        if isinstance(path, _Direct):
            with path.lock:
                sock, path.sock = path.sock, None
            if sock is not None:
                sock.close(linger=0)

    def close(self, linger: bool = False) -> None:
        """Close every connection (with ``linger``, after what they hold is sent)."""
        with self._lock:
            self._closed = True
            paths = [p for p in self._paths.values() if isinstance(p, _Direct)]
        for path in paths:
            with path.lock:
                sock, path.sock = path.sock, None
            if sock is not None:
                sock.close(linger=2000 if linger else 0)
