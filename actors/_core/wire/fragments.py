"""Big frames cut into fragments between nodes, and put back together.

A ZeroMQ message is seen by its receiver only once the whole of it has
arrived.  On a connection to another node a 1 MB frame takes four seconds
at 2 Mbit/s: for all that time the receiver sees nothing from that peer and
would declare it dead, and every small frame sent after it on the same
connection waits for it.  So a frame bigger than `FRAGMENT_SIZE` crosses to
another node as fragments, each a message of its own (each one a sign of
life as it arrives), and a sender hands ZeroMQ at most a few fragments
ahead of what the kernel has taken (`FragmentWindow`), so that a small
frame sent meanwhile by another actor is queued behind a few tens of
kilobytes, not behind megabytes.  This is what Erlang's distribution has
done since OTP 22.

A fragment is ``b"F"``, a fixed header (`_HEADER`: the stream's id, the
fragment's index, the number of fragments, the whole frame's length) and a
slice of the frame.  The stream id is unique per sending process (a random
32-bit prefix and a counter), so a receiver tells apart the streams of
every process of a node on one connection or several.  A connection keeps
order, and everything one sender sends to one receiver takes one
connection, so fragments arrive in order and a stream's frame is complete
when its last fragment arrives; the frames of one sender stay in the order
sent, since it sends one stream whole before its next frame.

`Reassembly` holds what arrived of incomplete streams, bounded in bytes per
peer: a stream that would not fit, or that stops arriving for longer than
`STALE_AFTER`, is dropped, counted and logged, so a peer that sends
fragments and never completes them costs bounded memory.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

__all__ = [
    "FRAGMENT_SIZE",
    "MAX_REASSEMBLY_BYTES",
    "SEND_BUFFER",
    "STALE_AFTER",
    "FragmentWindow",
    "Reassembly",
    "is_fragment",
    "split",
]

log = logging.getLogger("actors.net.fragments")

#: Frames above this many bytes cross to another node in fragments of it.
#: 64 KB: at 2 Mbit/s a fragment takes a quarter of a second, far below any
#: tick interval; at 100 Mbit/s 5 ms, the longest a small frame waits behind
#: one; and per-fragment costs (a message, a tracker) are a few microseconds,
#: under 1% of copying 64 KB across a network.
FRAGMENT_SIZE = 32 * 1024
#: The kernel's send buffer on a connection to another node (SO_SNDBUF;
#: Linux doubles it).  Left to itself the kernel grows it to megabytes on
#: a busy connection, and a small frame waits behind all of them: 128 KB
#: is 10 ms at 100 Mbit/s, and still 600 MB/s on a LAN's 0.2 ms round trip.
SEND_BUFFER = 32 * 1024
#: What a receiver holds of one peer's incomplete streams, by default.
MAX_REASSEMBLY_BYTES = 256 * 1024 * 1024
#: Seconds without a fragment after which an incomplete stream is dropped.
STALE_AFTER = 60.0

_TAG = b"F"
_HEADER = struct.Struct(">QIIQ")  # stream id, index, count, whole length
_HEAD = 1 + _HEADER.size
_pack = _HEADER.pack_into
_unpack = _HEADER.unpack_from

_prefix = int.from_bytes(os.urandom(4), "big") << 32
_serial = itertools.count(1)


def _reset_after_fork() -> None:
    """A forked process gets a prefix of its own, or its streams' ids would
    be its parent's."""
    global _prefix, _serial
    _prefix = int.from_bytes(os.urandom(4), "big") << 32
    _serial = itertools.count(1)


os.register_at_fork(after_in_child=_reset_after_fork)


def is_fragment(data: bytes | memoryview) -> bool:
    """Whether ``data`` is a fragment (codec frames start with another byte)."""
    return data[:1] == _TAG


def split(frame: bytes | memoryview, size: int = FRAGMENT_SIZE) -> list[bytes]:
    """``frame`` as fragments of at most ``size`` bytes of it each, in order.

    Each fragment is one buffer, header and slice together (one copy of
    the slice), so it goes to ZeroMQ as one message part without another."""
    view = memoryview(frame)
    total = len(view)
    count = max(1, -(-total // size))
    sid = _prefix | (next(_serial) & 0xFFFFFFFF)
    head = bytearray(_HEAD)
    head[0] = 70  # ord("F")
    join = b"".join
    out = []
    for index in range(count):
        _pack(head, 1, sid, index, count, total)
        out.append(join((head, view[index * size : (index + 1) * size])))
    return out


class _Stream:
    __slots__ = ("parts", "count", "total", "held", "touched")

    def __init__(self, count: int, total: int, now: float) -> None:
        self.parts: list[bytes] = []
        self.count = count
        self.total = total
        self.held = 0
        self.touched = now


class Reassembly:
    """Incomplete streams by peer, bounded in bytes per peer.

    Not thread-safe: each receiving thread (a link's I/O thread, an
    endpoint's reader, a reply channel's caller) has its own."""

    def __init__(
        self,
        limit: int = MAX_REASSEMBLY_BYTES,
        stale_after: float = STALE_AFTER,
        clock: Callable[[], float] = time.monotonic,
        on_drop: Callable[[Hashable, str], None] | None = None,
    ) -> None:
        self.limit = limit
        self.stale_after = stale_after
        self._clock = clock
        self._on_drop = on_drop
        self._streams: dict[tuple[Hashable, int], _Stream] = {}
        self._held: collections.Counter[Hashable] = collections.Counter()
        self.dropped = 0  # streams dropped, never completed
        self.completed = 0
        self._next_sweep = 0.0

    def add(self, peer: Hashable, data: bytes | memoryview) -> bytes | None:
        """Take fragment ``data`` from ``peer``; the whole frame once its
        last fragment is in, else None.  Raises ValueError on a fragment
        that does not parse or does not follow the one before it (the
        stream is dropped)."""
        if len(data) < _HEAD or data[:1] != _TAG:
            raise ValueError("not a fragment")
        sid, index, count, total = _unpack(data, 1)
        chunk = bytes(data[_HEAD:])
        now = self._clock()
        if now >= self._next_sweep:
            self._sweep(now)
        key = (peer, sid)
        stream = self._streams.get(key)
        if stream is None:
            if index != 0 or count == 0:
                raise ValueError(f"fragment {index} of a stream whose start never came")
            if count == 1:
                self.completed += 1
                return chunk
            if total > self.limit:
                self._drop_new(peer, f"a frame of {total} bytes is over the limit of {self.limit} per peer")
                return None
            while self._held[peer] + total > self.limit and self._evict_oldest(peer):
                pass
            stream = self._streams[key] = _Stream(count, total, now)
            self._held[peer] += total
        elif index != len(stream.parts) or count != stream.count:
            self._drop(key, "fragments out of order")
            raise ValueError("fragments out of order")
        stream.parts.append(chunk)
        stream.held += len(chunk)
        stream.touched = now
        if len(stream.parts) < stream.count:
            if stream.held > stream.total:
                self._drop(key, "more bytes than the stream announced")
                raise ValueError("fragment stream longer than announced")
            return None
        del self._streams[key]
        self._release(peer, stream.total)
        if stream.held != stream.total:
            self.dropped += 1
            raise ValueError("fragment stream shorter than announced")
        self.completed += 1
        return b"".join(stream.parts)

    def held(self, peer: Hashable | None = None) -> int:
        """Bytes set aside for incomplete streams (of ``peer``, or of all):
        each stream's whole announced length from its first fragment on, so
        that streams started side by side cannot together pass the limit."""
        return sum(self._held.values()) if peer is None else self._held.get(peer, 0)

    def forget(self, peer: Hashable) -> None:
        """Drop ``peer``'s incomplete streams (it is gone: they never complete)."""
        for key in [k for k in self._streams if k[0] == peer]:
            self._drop(key, "its sender is gone", quiet=True)

    def _release(self, peer: Hashable, size: int) -> None:
        left = self._held[peer] - size
        if left > 0:
            self._held[peer] = left
        else:
            del self._held[peer]

    def _evict_oldest(self, peer: Hashable) -> bool:
        keys = [k for k in self._streams if k[0] == peer]
        if not keys:
            return False
        oldest = min(keys, key=lambda k: self._streams[k].touched)
        self._drop(oldest, f"over the limit of {self.limit} bytes held for incomplete frames")
        return True

    def _sweep(self, now: float) -> None:
        self._next_sweep = now + min(self.stale_after, 5.0)
        for key in [k for k, s in self._streams.items() if now - s.touched >= self.stale_after]:
            self._drop(key, f"no fragment for {self.stale_after:g} s")

    def _drop(self, key: tuple[Hashable, int], why: str, quiet: bool = False) -> None:
        stream = self._streams.pop(key)
        self._release(key[0], stream.total)
        self.dropped += 1
        if not quiet:
            log.warning(
                "dropped an incomplete frame from %s (%d of %d bytes): %s", key[0], stream.held, stream.total, why
            )
        if self._on_drop is not None:
            self._on_drop(key[0], why)

    def _drop_new(self, peer: Hashable, why: str) -> None:
        self.dropped += 1
        log.warning("dropped a frame from %s: %s", peer, why)
        if self._on_drop is not None:
            self._on_drop(peer, why)


class FragmentWindow:
    """How many fragments one connection may have handed to ZeroMQ that
    the kernel has not taken yet.

    ZeroMQ queues whole messages and counts them, not bytes: a sender that
    handed it fragments as fast as it made them would queue megabytes ahead
    of every small frame sent after them.  A sender of fragments (and only
    of fragments: small frames go straight in) waits for a slot, which the
    oldest fragment frees once ZeroMQ has written it to the socket (its
    tracker).  The waiting is the back-pressure a slow link puts on the
    actor filling it, as a busy distribution port suspends a sender in
    Erlang."""

    def __init__(self, depth: int = 1) -> None:
        self.depth = depth
        self._lock = threading.Lock()
        self._inflight: collections.deque[Any] = collections.deque()

    def wait(self, deadline: float) -> bool:
        """Wait, at most until ``deadline`` (monotonic), for room for one
        more fragment; False when there is still none."""
        with self._lock:
            inflight = self._inflight
            while inflight:
                if inflight[0].done:
                    inflight.popleft()
                    continue
                if len(inflight) < self.depth:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                try:
                    inflight[0].wait(min(left, 0.5))
                except Exception:  # the tracker's wait timed out (NotDone): look again
                    pass
            return True

    def sent(self, tracker: Any) -> None:
        """A fragment was handed to ZeroMQ; ``tracker`` says when it left."""
        with self._lock:
            self._inflight.append(tracker)
