"""The IO target actor (the seed's `couch_file` role): one actor per open file.

A `FileServer` owns one `FileTarget` and executes IO messages against it
(``("pread_iolist", pos)``, ``("pread", pos, len)``, ``("append_bin", data,
fsync)``, ...).  It answers them two ways:

* as a **call** -- ``ref.call(msg)`` -- which is how a bypassed request, or
  any code that does not go through IOQ, reaches the file;
* as an **IO message** -- ``("$io", tag, reply_to, msg)`` sent to its
  ``handle_info`` -- answered by sending ``("$io_reply", tag, result)`` back
  to ``reply_to`` (an `ActorRef` or its wire form ``ref.to_wire()``; the
  wire form keeps the message cheap to encode).  This is how an IOQ server submits: it never blocks on the
  file, so while one file is busy the server keeps queueing, prioritising and
  submitting to others (the seed sends ``{'$gen_call', {self(), Ref}, Msg}``
  for the same reason).

A request that fails (bad message, read past the end, an OS error) is
answered with an `IoFailure`, never by crashing: one bad request must not
take the file away from every other caller.  `unwrap` turns a reply back
into a value or the exception.

A third way, for the IOQ servers only: `FileServer.try_read` lets a queue
server living in the same OS process do a *read* on its own thread while the
file actor is idle (see `actors.ioq._queue_server`).  A lock taken around
every IO keeps the file's IO serial whichever thread does it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from actors import ActorRef, Exit, GenServer

from .file_target import FileTarget, FileTargetError
from .request import IoTargetDown

__all__ = ["BUSY", "IO_MSG", "IO_REPLY", "FileServer", "IoFailure", "file_call", "unwrap"]

#: Tag of an asynchronous IO request: ``(IO_MSG, tag, reply_to, msg)``.
IO_MSG = "$io"
#: Tag of its answer: ``(IO_REPLY, tag, result)``.
IO_REPLY = "$io_reply"

#: `FileServer.try_read`'s answer when it did nothing (busy, closed, or not a read).
BUSY = object()
_INLINE_READS = frozenset({"pread_iolist", "pread"})

_IO_ERRORS = (FileTargetError, EOFError, OSError, ValueError, TypeError)


class IoFailure:
    """A failed IO request, as a reply value that survives a trip between processes.

    ``kind`` is ``"error"`` (``value`` is the exception the target raised) or
    ``"down"`` (``value`` is the exit reason of a target that died, raised as
    `IoTargetDown`).  Exceptions are re-created at the caller, not pickled
    by their ``args``, so ``IoTargetDown.reason`` arrives intact.
    """

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: Any) -> None:
        self.kind = kind
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (IoFailure, (self.kind, self.value))

    def __repr__(self) -> str:
        return f"IoFailure({self.kind!r}, {self.value!r})"

    def exception(self) -> BaseException:
        if self.kind == "down":
            return IoTargetDown(self.value)
        value = self.value
        return value if isinstance(value, BaseException) else RuntimeError(repr(value))


def unwrap(reply: Any) -> Any:
    """The value of an IO reply; raises the failure it carries instead."""
    if type(reply) is IoFailure:
        raise reply.exception()
    return reply


def file_call(ref: Any, msg: Any, timeout: float | None = 60.0) -> Any:
    """Do ``msg`` on the file actor ``ref`` directly (the bypass path).

    Raises the IO error the file reported, or `IoTargetDown` with the exit
    reason when the file actor is dead or dies before answering.
    """
    try:
        reply = ref.call(msg, timeout)
    except Exit as exc:
        raise IoTargetDown(exc.reason) from exc
    if type(reply) is IoFailure:
        raise reply.exception()
    return reply


class FileServer(GenServer):
    """One open file; serial IO in its own thread, like a `couch_file` process."""

    def init(self, path: str | os.PathLike[str], create: bool = True) -> None:
        self.target = FileTarget(path, create=create)
        self._handle = self.target.handle
        self._reply_to: dict[str, ActorRef] = {}
        self._io_lock = threading.Lock()
        self._closed = False

    def _do(self, msg: Any) -> Any:
        with self._io_lock:
            try:
                return self._handle(msg)
            except _IO_ERRORS as exc:
                return IoFailure("error", exc)

    def try_read(self, msg: Any) -> Any:
        """Do the read ``msg`` on the *calling* thread if this file is idle; `BUSY` otherwise.

        Only a queue server in this OS process calls it, instead of sending
        ``("$io", ...)`` and waiting for the answer: that round trip is two
        thread hand-offs, as long as a cached read itself.  Reads only (they
        take microseconds when cached; an fsync'd append would hold the
        caller's thread), never while the file's own thread does IO, and
        never once the file is closing.  An exception other than an IO error
        propagates: the caller then kills this actor with it, as it would
        have crashed running the same read itself.
        """
        if (type(msg) is not tuple and type(msg) is not list) or not msg or msg[0] not in _INLINE_READS:
            return BUSY
        lock = self._io_lock
        if not lock.acquire(blocking=False):
            return BUSY
        try:
            if self._closed:
                return BUSY
            try:
                return self._handle(msg)
            except _IO_ERRORS as exc:
                return IoFailure("error", exc)
        finally:
            lock.release()

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "path":
            return self.target.path
        return self._do(request)

    def handle_info(self, message: Any) -> None:
        if type(message) is tuple and len(message) == 4 and message[0] == IO_MSG:
            _tag, tag, reply_to, msg = message
            if type(reply_to) is list:
                wire = reply_to
                reply_to = self._reply_to.get(wire[2])
                if reply_to is None:
                    if len(self._reply_to) >= 1000:
                        self._reply_to.clear()
                    reply_to = self._reply_to[wire[2]] = ActorRef.from_wire(wire)
            reply_to.send((IO_REPLY, tag, self._do(msg)))
            return None
        return super().handle_info(message)

    def terminate(self, reason: Any) -> None:
        with self._io_lock:
            self._closed = True
            self.target.close()
