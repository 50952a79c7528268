"""A real IO target: an append-only file with positional reads (the part of `couch_file` IOQ drives).

IOQ only decides *when* a request reaches its target; the target does the IO.
CouchDB's target is `couch_file`: appends return the position written at, and
reads are positional.  `FileTarget` does the same over one OS file with
`os.pread`/`os.pwrite`, so reads never move a shared offset and may run from
many threads at once; appends take a lock only to claim their range.

Two framings are offered: raw bytes (`pread`/`append`) and length-prefixed
blocks (`append_bin`/`pread_iolist`, couch_file's shape, where the position
alone names a block -- which is what IOQ's read dedupe keys on).  `handle`
executes an IO message tuple (see `actors.ioq.request`) so a file actor's
``handle_call`` is one line.
"""

from __future__ import annotations

import os
import struct
import threading
import weakref
from typing import Any

__all__ = ["FileTarget", "FileTargetError"]

_HEADER = struct.Struct(">I")
_MAX_BLOCK = (1 << 31) - 1


class FileTargetError(ValueError):
    """A malformed IO request for a file (bad message, position or length)."""


def _check_offset(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FileTargetError(f"{what} must be an integer >= 0, got {value!r}")
    return value


def _check_data(data: Any) -> bytes | bytearray | memoryview:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise FileTargetError(f"data to append must be bytes, got {type(data).__name__}")
    return data


class FileTarget:
    """Positional reads and locked appends on one file; safe to share between threads.

    The file closes with `close`, or else when the target is garbage: an
    actor that owns one and is killed runs no ``terminate``, and the host it
    lived in may run for weeks (as an Erlang port closes when its owner dies).
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, mode: int = 0o644) -> None:
        flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
        if create:
            flags |= os.O_CREAT
        self._path = os.fspath(path)
        self._fd = os.open(self._path, flags, mode)
        self._release = weakref.finalize(self, os.close, self._fd)
        self._eof = os.fstat(self._fd).st_size
        self._lock = threading.Lock()
        self._closed = False

    # -- properties ----------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def closed(self) -> bool:
        return self._closed

    def size(self) -> int:
        """Bytes written so far (the position the next append gets)."""
        with self._lock:
            return self._eof

    # -- raw IO --------------------------------------------------------------

    def pread(self, pos: int, length: int) -> bytes:
        """``length`` bytes at ``pos``; `EOFError` if the file ends before that."""
        _check_offset(pos, "pos")
        _check_offset(length, "length")
        if length == 0:
            return b""
        chunk = os.pread(self._fd, length, pos)
        if len(chunk) == length:
            return chunk
        parts = [chunk]
        got = len(chunk)
        while got < length and chunk:
            chunk = os.pread(self._fd, length - got, pos + got)
            parts.append(chunk)
            got += len(chunk)
        if got < length:
            raise EOFError(f"{self._path}: wanted {length} bytes at {pos}, file ends after {got}")
        return b"".join(parts)

    def append(self, data: bytes, fsync: bool = False) -> int:
        """Write ``data`` at the end; returns its position (durable on return if ``fsync``)."""
        view = memoryview(_check_data(data)).cast("B")
        with self._lock:
            pos = self._eof
            self._write_all(view, pos)
            self._eof = pos + len(view)
        if fsync:
            os.fsync(self._fd)
        return pos

    def _write_all(self, view: memoryview, pos: int) -> None:
        written = 0
        total = len(view)
        while written < total:
            n = os.pwrite(self._fd, view[written:], pos + written)
            if n <= 0:
                raise OSError(f"{self._path}: pwrite wrote nothing at {pos + written}")
            written += n

    # -- framed blocks (couch_file style) ------------------------------------

    def append_bin(self, data: bytes, fsync: bool = False) -> int:
        """Append ``data`` as one length-prefixed block; returns the block's position."""
        _check_data(data)
        if len(data) > _MAX_BLOCK:
            raise FileTargetError(f"block of {len(data)} bytes exceeds {_MAX_BLOCK}")
        return self.append(_HEADER.pack(len(data)) + bytes(data), fsync)

    def pread_iolist(self, pos: int) -> bytes:
        """The block `append_bin` wrote at ``pos``."""
        (length,) = _HEADER.unpack(self.pread(pos, _HEADER.size))
        return self.pread(pos + _HEADER.size, length)

    # -- messages ------------------------------------------------------------

    def handle(self, msg: Any) -> Any:
        """Execute one IO message (``("pread", pos, len)``, ``("append_bin", data, fsync)``...)."""
        if type(msg) not in (tuple, list) or not msg:
            raise FileTargetError(f"IO message must be a non-empty tuple, got {msg!r}")
        op = msg[0]
        n = len(msg)
        if op == "pread_iolist" and n == 2:
            return self.pread_iolist(msg[1])
        if op == "pread" and n == 3:
            return self.pread(msg[1], msg[2])
        if op == "append_bin" and n in (2, 3):
            return self.append_bin(msg[1], bool(msg[2]) if n == 3 else False)
        if op == "append" and n in (2, 3):
            return self.append(msg[1], bool(msg[2]) if n == 3 else False)
        if op == "sync" and n == 1:
            self.sync()
            return None
        if op == "size" and n == 1:
            return self.size()
        raise FileTargetError(f"unknown IO message {msg!r}")

    # -- lifecycle -----------------------------------------------------------

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._release()  # os.close, once

    def __enter__(self) -> "FileTarget":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileTarget({self._path!r}, size={self._eof})"
