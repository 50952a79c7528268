"""The sockets a process sends through: one PUSH socket per peer, shared.

Any thread sends directly, with no thread hop, through the process's one
PUSH socket per peer (shared under a lock, so one pipe per pair of processes
keeps their order).  A full pipe holds the sender back (backpressure), and a
peer known gone is dropped from, never waited on.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from actors._core.base.stats import Stats

__all__ = ["RCVHWM", "SEND_WAIT", "SNDHWM", "Peers", "owner_of"]

#: Frames queued at most towards one peer (ZeroMQ's high-water marks, its
#: default), on the sending side and again on the receiving side of each
#: pipe.  A frame is one signal or a batch of at most 64 casts, so a pipe
#: holds a few thousand frames at most, and memory stays bounded however
#: fast a sender is: a full pipe holds the sender back (`Peers.send_frame`).
SNDHWM = 1000
RCVHWM = 1000
#: Seconds a sender waits, at most, for room in a full pipe before the frame
#: is dropped and counted: the receiving process reads its endpoint on a
#: thread that never waits, so a pipe stays full only while that process
#: is stopped or wedged.
SEND_WAIT = 30.0


def owner_of(peer: str) -> str:
    """The process a peer name belongs to: a reply channel ``h1~r3`` is h1's."""
    return peer.partition("~")[0]


class _Peer:
    """The one PUSH socket this process sends to a peer through, shared by
    all its threads under ``lock``: one pipe per pair of processes keeps
    their order, and a connection made once (ahead of time, for a spare
    host) serves every thread."""

    __slots__ = ("sock", "lock", "stalled")

    def __init__(self, sock: Any) -> None:
        self.sock: Any = sock
        self.lock = threading.Lock()
        #: A wait for room ran out: until a send gets through again, the
        #: next frames do not wait (a stuck reader costs one wait, not one each).
        self.stalled = False


class _Relay:
    """Stands in for the socket to a process of another node (``<node_id>|<proc>``):
    what is sent to it goes to the transport's ``send_remote``.  Local peers
    never see it, so the fast path pays nothing for distribution."""

    __slots__ = ("send_remote", "dest", "closed")

    def __init__(self, send_remote: Callable[[str, bytes], None], dest: str) -> None:
        self.send_remote = send_remote
        self.dest = dest
        self.closed = False

    def send(self, frame: bytes, flags: int = 0) -> None:
        self.send_remote(self.dest, frame)

    def close(self, linger: int = 0) -> None:
        self.closed = True


class Peers:
    """One process's outgoing sockets, and the peers it knows are gone."""

    def __init__(
        self,
        ctx: "zmq.Context[zmq.Socket[bytes]]",
        proc: str,
        rundir: str,
        endpoint_of: Callable[[str], str],
        io_thread: threading.Thread,
        stats: Stats,
        send_remote: Callable[[str, bytes], None],
    ) -> None:
        self._ctx = ctx
        self._proc = proc
        self._rundir = rundir
        self._endpoint_of = endpoint_of
        #: This process's I/O thread: it must keep reading, so it never waits for room.
        self._io_thread = io_thread
        self._stats = stats
        self._send_remote = send_remote
        self._peers: dict[str, _Peer] = {}
        self._lock = threading.Lock()
        #: Set when the transport shuts down: nobody waits for room any more.
        self.stopping = False
        #: Peers known to be gone (name -> why, opaque here); sends to them are dropped.
        self.dead_procs: dict[str, Any] = {}

    def send_frame(self, proc: str, frame: bytes, wait: float = SEND_WAIT) -> None:
        """Queue ``frame`` for ``proc``'s endpoint (or a reply channel's);
        never raises for a peer that is gone.  When the pipe to ``proc`` is
        full the sending thread waits for room (backpressure: nothing is
        lost and nothing grows), at most ``wait`` seconds, except this
        process's I/O thread, which must keep reading, and drops and counts
        instead."""
        if proc in self.dead_procs or ("~" in proc and owner_of(proc) in self.dead_procs):
            return
        peer = self._peers.get(proc) or self.connect_peer(proc)
        sock = peer.sock
        if type(sock) is _Relay:
            # To another node: that path keeps each connection's order itself,
            # and a big frame waits there for the link to take it (fragments):
            # holding this lock meanwhile would make every other thread's small
            # frame to the same process wait for the whole of it.
            sock.send(frame)
            return
        with peer.lock:
            sock = peer.sock
            if sock is None:
                return
            try:
                sock.send(frame, zmq.NOBLOCK)
                if peer.stalled:
                    peer.stalled = False
            except zmq.Again:
                if peer.stalled or not self._send_when_room(proc, sock, frame, wait):
                    peer.stalled = wait > 0 and threading.current_thread() is not self._io_thread
                    self._stats.increment("actors.transport.send_dropped")
            except zmq.ZMQError:
                if not self.stopping:
                    raise

    def _send_when_room(self, proc: str, sock: zmq.Socket[bytes], frame: bytes, wait: float) -> bool:
        """Wait (at most ``wait`` seconds) for the full pipe to ``proc`` to
        take ``frame``; False when this thread may not wait, or ``proc`` went."""
        if wait <= 0 or threading.current_thread() is self._io_thread:
            return False
        self._stats.increment("actors.transport.send_waits")
        owner = owner_of(proc)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.stopping or owner in self.dead_procs:
                return False
            if sock.poll(50, zmq.POLLOUT):
                try:
                    sock.send(frame, zmq.NOBLOCK)
                    return True
                except zmq.Again:
                    continue
        return False

    def is_connected(self, proc: str) -> bool:
        """Whether this process already has a socket to ``proc``."""
        return proc in self._peers

    def owners(self) -> set[str]:
        """The processes this process has a socket to (or to one of their reply channels)."""
        with self._lock:
            return {owner_of(p) for p in self._peers}

    def connect_peer(self, proc: str) -> _Peer:
        """The socket to ``proc``, connected now if it was not yet (the node
        connects to a spare host as soon as it is up, off any call's path).
        A reply channel of this very process is reached over inproc."""
        with self._lock:
            peer = self._peers.get(proc)
            if peer is None and "|" in proc:
                peer = self._peers[proc] = _Peer(_Relay(self._send_remote, proc))
            elif peer is None:
                sock = self._ctx.socket(zmq.PUSH)
                sock.setsockopt(zmq.SNDHWM, SNDHWM)
                sock.setsockopt(zmq.LINGER, 2000)
                if owner_of(proc) == self._proc and "~" in proc:
                    sock.connect(f"inproc://{proc}")
                else:
                    sock.connect(self._endpoint_of(proc))
                peer = self._peers[proc] = _Peer(sock)
        return peer

    def forget_peer(self, proc: str, why: Any) -> bool:
        """Mark ``proc`` gone: later sends to it are dropped and every thread
        closes its socket to it.  False when it was already gone."""
        if not self.mark_gone(proc, why):
            return False
        self.close_peer(proc)
        return True

    def mark_gone(self, proc: str, why: Any) -> bool:
        """The first half of `forget_peer`: later sends to ``proc`` are dropped.
        False when it was already gone."""
        if proc == self._proc or proc in self.dead_procs:
            return False
        self.dead_procs[proc] = why
        return True

    def close_peer(self, proc: str) -> None:
        """The second half of `forget_peer`: close the sockets to ``proc`` (and
        its reply channels) and remove its socket files."""
        prefix = f"{proc}~"
        with self._lock:
            gone = [n for n in self._peers if n == proc or n.startswith(prefix)]
            peers = [self._peers.pop(n) for n in gone]
        for peer in peers:
            with peer.lock:
                sock, peer.sock = peer.sock, None
            if sock is not None:
                sock.close(linger=0)
        try:
            names = [n for n in os.listdir(self._rundir) if n.startswith(prefix)]
        except OSError:
            names = []
        for name in [f"{proc}.sock", *names]:
            try:
                os.unlink(os.path.join(self._rundir, name))
            except OSError:
                pass

    def close(self, linger: bool) -> None:
        """Close every socket; with ``linger`` they first deliver what they hold."""
        with self._lock:
            peers = list(self._peers.values())
            self._peers.clear()
        for peer in peers:
            with peer.lock:
                sock, peer.sock = peer.sock, None
            if sock is not None:
                sock.close(linger=2000 if linger else 0)
