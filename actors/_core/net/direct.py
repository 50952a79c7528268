"""A process's own connections to the processes of other nodes.

Without them, a frame a host sends to a process of another node goes to its
node process first (an ipc hop and a wake-up of the node's I/O thread),
over the node's `actors._core.net.net.NetLink`, and through the other
node's process again: three hops and two extra thread wake-ups each way.

With them a frame takes one hop.  Every process of a distributed node that
reads frames from other nodes listens on tcp itself (its endpoint, and the
reply channel of each thread that called across nodes: see
`actors._core.transport.tcp`), as a CURVE server admitting only the cluster
key, like the node's link.  A ref says where its process listens
(`ActorRef.port`, noted in `actors._core.wire.ref.remote_ports` when the ref
arrives here), and a call names its reply channel with its port
(``h1~r3:41234``), so a sender knows where to connect without asking
anyone.  A frame that leaves this way is wrapped (`wrap_remote`) behind the
id of the node and incarnation it comes from; the receiver drops it when
that incarnation was declared down there, and qualifies the names in it.

Where a process of another node does not listen itself (it was forked
before its node listened), a host sends on a connection to that node's
listener instead (``S <name>@<inc> <proc>`` before the frame), which its
node process relays; a process this one has not been told the node of at
all goes through its own node process.  The node process itself never
takes that middle path: its link is that connection.

Order: the path to a process is chosen on the first frame for it and never
changes, so everything one process sends to one other process takes one
path and arrives in the order sent.

There is no handshake beyond CURVE's, and liveness, up and down stay the
node link's business: `forget` closes what led to a node declared down,
`forget_proc` what led to a process that died.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import zmq

from actors._core.wire.codec import wrap_remote
from actors._core.wire.fragments import FRAGMENT_SIZE, SEND_BUFFER, FragmentWindow, split
from actors._core.wire.ref import remote_ports

__all__ = ["DirectLinks", "SNDHWM"]

_HOST_DATA = b"S"  # as actors._core.net.protocol's HOST_DATA
#: Frames queued at most on a connection (ZeroMQ's default high-water
#: mark): past it a sender that may wait waits for room, so a fast sender
#: to a slow node grows no queue here.
SNDHWM = 1000
_RELAY = object()  # a process this one reaches through its node process, for good


class _Path:
    """One connection: to a process's own tcp endpoint (``to_node`` False:
    frames go wrapped, one ZeroMQ frame each) or to its node's listener
    (``to_node`` True: the destination is named in a frame of its own)."""

    __slots__ = ("sock", "lock", "to_node", "window")

    def __init__(self, sock: zmq.Socket[bytes], to_node: bool) -> None:
        self.sock: zmq.Socket[bytes] | None = sock
        self.lock = threading.Lock()
        self.to_node = to_node
        self.window = FragmentWindow()


class DirectLinks:
    """The direct connections of one process, keyed by qualified destination (``name@inc|proc``)."""

    def __init__(
        self,
        ctx: "zmq.Context[zmq.Socket[bytes]]",
        node_id: str,
        proc: str,
        io_thread: threading.Thread | None = None,
        wait: float = 0.0,
        via_node: bool = True,
    ) -> None:
        self._ctx = ctx
        #: A full connection holds back any sender but ``io_thread`` (which
        #: must keep reading its process's endpoint) for up to ``wait`` seconds.
        self._io_thread = io_thread
        self._wait = wait
        #: Whether a process that does not listen itself is reached through
        #: its node's listener (a host) or not at all here (the node process,
        #: whose link is that connection).
        self._via_node = via_node
        self._origin = node_id.encode()  # name@incarnation, hex as node ids write it
        self.proc = proc
        self._known: dict[str, tuple[str, bytes | None, bytes | None]] = {}
        self._paths: dict[str, Any] = {}  # qualified destination -> _Path or _RELAY
        self._node_paths: dict[str, _Path] = {}  # node id -> connection to its listener
        self._lock = threading.Lock()
        self._closed = False
        self.dropped = 0

    def learn(self, node_id: str, address: str, public: bytes | None, secret: bytes | None) -> None:
        """Node ``node_id`` listens at ``address`` (key halves None: no CurveZMQ)."""
        with self._lock:
            self._known[node_id] = (address, public, secret)

    def knows(self, node_id: str) -> bool:
        """Whether this process was told node ``node_id`` is up (and not since that it is down)."""
        return node_id in self._known

    def send(self, node_id: str, proc: str, frame: bytes) -> bool:
        """Send ``frame`` to process ``proc`` of node ``node_id`` directly;
        False when it goes by the node-process relay.  A full connection is
        waited on (see the constructor) while the node is known, then the
        frame is dropped and counted."""
        dest = f"{node_id}|{proc}"
        path = self._paths.get(dest)
        if path is None:
            path = self._open(node_id, proc, dest)
        if path is _RELAY:
            return False
        if len(frame) > FRAGMENT_SIZE:
            self._send_fragments(node_id, proc, path, frame)
            return True
        with path.lock:
            sock = path.sock
            if sock is None:  # that node or process is gone: dropped, as a send to a dead process is
                return True
            try:
                if path.to_node:
                    parts = [_HOST_DATA, self._origin, proc.partition(":")[0].encode(), frame]
                    sock.send_multipart(parts, zmq.NOBLOCK)
                else:
                    parts = [wrap_remote(self._origin, frame)]
                    sock.send(parts[0], zmq.NOBLOCK)
            except zmq.Again:
                wait = 0.0 if threading.current_thread() is self._io_thread else self._wait
                if not self._send_when_room(node_id, sock, parts, wait):
                    self.dropped += 1
            except zmq.ZMQError:  # closing
                self.dropped += 1
        return True

    def _send_fragments(self, node_id: str, proc: str, path: _Path, frame: bytes) -> None:
        """``frame`` in fragments (`actors._core.wire.fragments`): a sender
        that may wait waits for each to leave, while the node is known, so
        that what others send on this connection goes between them; the I/O
        thread hands them all over at once, as it must keep reading."""
        may_wait = threading.current_thread() is not self._io_thread
        window = path.window
        for fragment in split(frame):
            if may_wait:
                while not window.wait(time.monotonic() + 0.5):
                    if self._closed or node_id not in self._known or path.sock is None:
                        self.dropped += 1
                        return
            if path.to_node:
                parts = [_HOST_DATA, self._origin, proc.partition(":")[0].encode(), fragment]
            else:
                parts = [wrap_remote(self._origin, fragment)]
            with path.lock:
                sock = path.sock
                if sock is None:
                    return
                try:
                    window.sent(sock.send_multipart(parts, zmq.NOBLOCK, copy=False, track=True))
                    continue
                except zmq.Again:
                    pass
                except zmq.ZMQError:  # closing
                    self.dropped += 1
                    return
                # Full (a thread that may not wait, or a queue of small frames):
                # the rest of the stream would be garbage without this fragment.
                if not self._send_when_room(node_id, sock, parts, self._wait if may_wait else 0.0):
                    self.dropped += 1
                    return

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

    def _open(self, node_id: str, proc: str, dest: str) -> Any:
        with self._lock:
            path = self._paths.get(dest)
            if path is not None:
                return path
            known = self._known.get(node_id)
            if known is None or self._closed:
                path = self._paths[dest] = _RELAY
                return path
            address, public, secret = known
            port = _port_of(proc, dest)
            if port:
                endpoint = f"{address.rpartition(':')[0]}:{port}"
                path = _Path(self._connect(zmq.PUSH, endpoint, public, secret), to_node=False)
            elif self._via_node:
                path = self._node_paths.get(node_id)
                if path is None:
                    path = self._node_paths[node_id] = _Path(
                        self._connect(zmq.DEALER, address, public, secret), to_node=True
                    )
            else:
                path = _RELAY
            self._paths[dest] = path
            return path

    def _connect(self, kind: int, address: str, public: bytes | None, secret: bytes | None) -> zmq.Socket[bytes]:
        sock = self._ctx.socket(kind)
        sock.linger = 0
        sock.sndhwm = SNDHWM
        sock.sndbuf = SEND_BUFFER
        sock.copy_threshold = 0  # a fragment sent without copy is tracked whatever its size (`FragmentWindow`)
        if kind == zmq.DEALER:
            sock.rcvhwm = 16  # the node's listener never sends on it
        if public is not None and secret is not None:
            sock.curve_serverkey = public
            sock.curve_publickey = public
            sock.curve_secretkey = secret
        sock.connect(address)
        return sock

    def forget(self, node_id: str) -> None:
        """Node ``node_id`` is down: close every connection to it; later sends are dropped."""
        prefix = f"{node_id}|"
        with self._lock:
            self._known.pop(node_id, None)
            paths = [p for d, p in self._paths.items() if d.startswith(prefix) and isinstance(p, _Path)]
            node_path = self._node_paths.pop(node_id, None)
            if node_path is not None:
                paths.append(node_path)
        for proc in [p for p in remote_ports if p.startswith(prefix)]:
            remote_ports.pop(proc, None)
        for path in paths:
            _shut(path)

    def forget_proc(self, qualified: str) -> None:
        """Process ``<node_id>|<proc>`` died: close the connections straight to it
        and to its reply channels; later sends to it are dropped."""
        remote_ports.pop(qualified, None)
        channels = f"{qualified}~"
        with self._lock:
            paths = [
                p
                for d, p in self._paths.items()
                if (d == qualified or d.startswith(channels)) and isinstance(p, _Path) and not p.to_node
            ]
        for path in paths:
            _shut(path)

    def close(self, linger: bool = False) -> None:
        """Close every connection (with ``linger``, after what they hold is sent)."""
        with self._lock:
            self._closed = True
            paths = {id(p): p for p in self._paths.values() if isinstance(p, _Path)}
            paths.update((id(p), p) for p in self._node_paths.values())
        for path in paths.values():
            _shut(path, 2000 if linger else 0)


def _port_of(proc: str, dest: str) -> int:
    """The tcp port a destination reads on itself: a reply channel names it
    (``h1~r3:41234``); a process is known by the refs into it that came
    here (`remote_ports`); 0 when neither says."""
    name, colon, port = proc.partition(":")
    if colon:
        return int(port) if port.isdigit() else 0
    if "~" in name:  # a reply channel that does not listen itself
        return 0
    return remote_ports.get(dest, 0)


def _shut(path: _Path, linger: int = 0) -> None:
    with path.lock:
        sock, path.sock = path.sock, None
    if sock is not None:
        sock.close(linger=linger)
