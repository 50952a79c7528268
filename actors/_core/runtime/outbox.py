"""An actor thread's cast outbox: its casts and sends, batched per process.

Consecutive casts from one actor thread to one process go out as one frame
(`K_BATCH`), when the batch is full, when the callback returns or blocks in
the kernel, or `CAST_FLUSH_AFTER` after the first of them.  Every other frame
the thread sends to that process goes out after the batch, so nothing the
thread sends overtakes its own casts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from actors._core.runtime.kinds import K_BATCH
from actors._core.wire.codec import encode_frame

__all__ = ["BIG_BATCH", "BIG_ITEM", "CAST_BATCH", "CAST_FLUSH_AFTER", "Outbox", "is_big"]

#: A thread's casts to one process go out as one frame after this many...
CAST_BATCH = 64
#: ... or this long after the first of them, when its callback is still running.
CAST_FLUSH_AFTER = 0.002
#: A batch frame bigger than this goes out as one frame per cast instead, and
#: the thread stops batching for that process until a single cast is small
#: again: one huge frame would hold every other frame on its way (the same
#: connection, the same ZeroMQ I/O thread) until the whole of it has passed.
BIG_BATCH = 512 * 1024
#: A ``bytes`` or ``str`` body this big is never batched: it goes out in a
#: frame of its own at once (after the batch before it), so a stream of big
#: casts does not first pickle a batch of them only to find it too big.
BIG_ITEM = BIG_BATCH // CAST_BATCH

_BLOBS = (bytes, str, bytearray, memoryview)


def is_big(body: Any) -> bool:
    """Whether a cast's body is big enough to go out on its own at once:
    ``bytes`` or ``str`` of `BIG_ITEM` or more, alone or among the first
    few items of a tuple, list or dict (``(tag, payload)``, ``[i, data]``,
    ``{"data": ...}``: how big payloads travel).  Sent by the actor's own
    thread, such a cast never waits in a batch for the I/O thread to
    flush it: a big frame to another node goes out in fragments that its
    sender waits on, which the I/O thread must never do."""
    t = type(body)
    if t is bytes or t is str:
        return len(body) >= BIG_ITEM
    if t is tuple or t is list:
        items = body if len(body) <= 8 else body[:8]
    elif t is dict:
        if len(body) > 8:
            return False
        items = body.values()
    else:
        return False
    for item in items:
        if type(item) in _BLOBS and len(item) >= BIG_ITEM:
            return True
    return False


class _Batch:
    """Casts and sends waiting to go to one process as one frame."""

    __slots__ = ("items", "plain")

    def __init__(self) -> None:
        self.items: list[list[Any]] = []
        self.plain = True


class Outbox:
    """An actor thread's batches, one per destination process.

    Every send of an actor thread goes out under ``lock`` after the batch for
    the same process, so nothing the thread sends overtakes its own casts.
    The I/O thread takes the same lock to flush a batch that has waited
    `CAST_FLUSH_AFTER` (a callback that runs on without returning or
    blocking in the kernel), so the order on the wire holds.
    """

    __slots__ = ("lock", "batches", "armed", "closed", "unbatched")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: dict[str, _Batch] = {}
        self.armed = False
        self.closed = False
        #: Processes this thread sends big casts to: not batched (`BIG_BATCH`).
        self.unbatched: set[str] = set()

    def new_batch(self, proc: str) -> _Batch:
        """An empty batch for ``proc`` (under ``lock``)."""
        batch = self.batches[proc] = _Batch()
        return batch

    def flush_locked(self, proc: str, src: str, send_frame: Callable[[str, bytes], None]) -> None:
        """Send the batch for ``proc`` (under ``lock``), from process ``src``."""
        batch = self.batches.pop(proc)
        items = batch.items
        if len(items) == 1:
            kind, to, body = items[0]
            frame = encode_frame(kind, to, None, None, src, body)
            if self.unbatched and len(frame) * CAST_BATCH < BIG_BATCH:
                self.unbatched.discard(proc)  # small casts again: batch them
        else:
            frame = encode_frame(K_BATCH, None, None, None, src, items, plain=batch.plain)
            if len(frame) > BIG_BATCH:
                self.unbatched.add(proc)
                for kind, to, body in items:
                    send_frame(proc, encode_frame(kind, to, None, None, src, body))
                return
        send_frame(proc, frame)

    def flush_all_locked(self, src: str, send_frame: Callable[[str, bytes], None]) -> None:
        """Send every batch (under ``lock``)."""
        while self.batches:
            self.flush_locked(next(iter(self.batches)), src, send_frame)
