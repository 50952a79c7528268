"""Reply channels: the socket a calling thread reads its own replies from.

A thread that calls across processes binds one PULL socket of its own (its
reply channel), so a reply wakes that thread and no other.  Channels are
pooled: when a thread ends, its channel goes to the next thread that calls,
and nothing is bound twice.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import zmq

from actors._core.wire.fragments import Reassembly

__all__ = ["ChannelPool", "ReplyChannel"]


class ReplyChannel:
    """A PULL socket that one calling thread binds and reads itself.

    Replies to that thread's calls are sent straight to it, so no other
    thread wakes on the way: the round trip costs what a raw DEALER/ROUTER
    one does.  A channel belongs to one thread at a time and goes back to
    the transport's pool when the thread ends.
    """

    __slots__ = ("name", "sock", "timeout_ms", "remote_name", "fragments")

    def __init__(self, name: str, sock: zmq.Socket[bytes]) -> None:
        self.name = name
        self.sock = sock
        self.timeout_ms = -1
        #: Its name with the tcp port it listens on for answers from other
        #: nodes (`Transport.remote_reply_name`); None until it first does.
        self.remote_name: str | None = None
        #: A big answer from another node arriving in fragments
        #: (`actors._core.wire.fragments`); made on the first one.
        self.fragments: Reassembly | None = None


class _ChannelLease:
    """Held in a thread's locals: when the thread ends (and its locals go),
    the channel returns to the pool for the next thread."""

    __slots__ = ("channel", "pool", "lock")

    def __init__(self, channel: ReplyChannel, pool: list[ReplyChannel], lock: threading.Lock) -> None:
        self.channel = channel
        self.pool = pool
        self.lock = lock

    def __del__(self) -> None:
        try:
            with self.lock:
                self.pool.append(self.channel)
        except Exception:  # interpreter teardown: nothing left to pool for
            pass


class ChannelPool:
    """Every reply channel of one process: bound on a thread's first call
    across processes, lent to that thread until it ends, then pooled."""

    def __init__(self, ctx: "zmq.Context[zmq.Socket[bytes]]", proc: str, endpoint_of: Callable[[str], str]) -> None:
        self._ctx = ctx
        self._proc = proc
        self._endpoint_of = endpoint_of
        self._lock = threading.Lock()
        self._tls = threading.local()
        self._channels: list[ReplyChannel] = []
        self._pool: list[ReplyChannel] = []
        self._counter = 0

    def for_thread(self) -> ReplyChannel:
        """This thread's reply channel, bound on first use (or from the pool)."""
        lease = getattr(self._tls, "chan", None)
        if lease is not None:
            return lease.channel
        with self._lock:
            channel = self._pool.pop() if self._pool else None
            if channel is None:
                self._counter += 1
                name = f"{self._proc}~r{self._counter}"
        if channel is None:
            sock = self._ctx.socket(zmq.PULL)
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.bind(self._endpoint_of(name))
            sock.bind(f"inproc://{name}")  # this process's own threads answer here
            channel = ReplyChannel(name, sock)
            with self._lock:
                self._channels.append(channel)
        self._tls.chan = _ChannelLease(channel, self._pool, self._lock)
        return channel

    def release_thread(self) -> None:
        """Give this thread's reply channel to the pool; called when an actor thread ends."""
        self._tls.chan = None  # the lease hands the reply channel back

    def names(self) -> list[str]:
        """The names of every channel bound so far (lent or pooled)."""
        with self._lock:
            return [c.name for c in self._channels]

    def close(self) -> None:
        """Close every channel and remove its socket file."""
        with self._lock:
            channels = list(self._channels)
        for channel in channels:
            channel.sock.close(linger=0)
            try:
                os.unlink(self._endpoint_of(channel.name)[len("ipc://") :])
            except OSError:
                pass
