"""Log records from host processes, re-emitted in the node's process.

The library configures no logging of its own: every module logs under the
``actors.*`` and ``supervision`` loggers and adds no handler, so an
embedding program decides where records go, as with any Python library.

Host processes are the catch: a record logged in a host would reach only
that process's handlers, which the embedding program never sees.  So each
host replaces whatever handlers it inherited by one `HostLogForwarder`,
which sends every record over a Unix stream socket in the node's runtime
directory (mode 0700: only the node's own processes can connect) to the
`LogListener` thread in the node's process.  The listener rebuilds each
record and hands it to the logger of the same name there, so the embedding
program's handlers, filters and levels apply to host records exactly as to
its own.  A record keeps the host's ``process`` and ``processName`` and
gains ``host`` (the host process's label, e.g. ``h3``).

The wire format is plain data, never pickle: the host formats the message
(``%`` arguments applied) and any exception text before sending, and extra
attributes (the supervisor's ``child_id``, ``reason``...) travel as JSON, or
as their ``repr`` when they are not plain data.  A frame that does not
decode is dropped and counted, never fatal.  When the node cannot be
reached, a host writes the record to its stderr instead of losing it.

This mechanism is independent of the actor transport on purpose: logging
must work while the transport is starting, failing or stopping, and a
record logged by the transport itself must not travel through it.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import struct
import sys
import threading
from typing import Any

import orjson

__all__ = ["SOCKET_NAME", "HostLogForwarder", "LogListener", "decode_record", "encode_record", "forward_host_logs"]

#: The listener's socket, in the node's runtime directory.
SOCKET_NAME = "log.sock"

#: Frames above this size are refused (a runaway message, or garbage).
MAX_FRAME = 1 << 20

_HEADER = struct.Struct("!I")

# LogRecord attributes rebuilt from the fields sent; everything else in a
# record's __dict__ is an ``extra`` attribute.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_SENT = (
    "name",
    "levelno",
    "levelname",
    "pathname",
    "filename",
    "module",
    "lineno",
    "funcName",
    "created",
    "msecs",
    "relativeCreated",
    "thread",
    "threadName",
    "process",
    "processName",
    "stack_info",
)


def _plain(value: Any) -> Any:
    """``value`` if orjson can encode it, else its ``repr`` (truncated)."""
    try:
        orjson.dumps(value)
        return value
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
        return text if len(text) <= 1000 else text[:1000] + "..."


def encode_record(record: logging.LogRecord, host: str | None = None) -> bytes:
    """One length-prefixed frame holding ``record`` as plain data."""
    fields: dict[str, Any] = {key: getattr(record, key, None) for key in _SENT}
    fields["msg"] = record.getMessage()
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    fields["exc_text"] = record.exc_text
    fields["host"] = host
    fields["extra"] = {
        key: _plain(value) for key, value in record.__dict__.items() if key not in _STANDARD and key != "host"
    }
    body = orjson.dumps(fields, default=repr)
    return _HEADER.pack(len(body)) + body


def decode_record(body: bytes) -> logging.LogRecord:
    """The record a frame's body holds; raises ValueError on garbage."""
    try:
        fields = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"log frame is not JSON: {exc}") from None
    if (
        not isinstance(fields, dict)
        or not isinstance(fields.get("name"), str)
        or not isinstance(fields.get("levelno"), int)
        or not isinstance(fields.get("msg"), str)
    ):
        raise ValueError("log frame lacks name, levelno or msg")
    extra = fields.pop("extra", None)
    attrs = {key: value for key, value in (extra if isinstance(extra, dict) else {}).items() if key not in _STANDARD}
    attrs.update({key: fields.get(key) for key in (*_SENT, "msg", "exc_text", "host")})
    attrs["args"] = None
    attrs["exc_info"] = None
    return logging.makeLogRecord(attrs)


class HostLogForwarder(logging.Handler):
    """The one handler of a host process: sends each record to the node.

    Connects on first use; a record that cannot be sent (the node is gone,
    or its listener stalled past ``timeout``) is written to stderr instead.
    """

    def __init__(self, path: str, host: str | None = None, timeout: float = 2.0) -> None:
        super().__init__()
        self.path = path
        self.host = host
        self.timeout = timeout
        self._sock: socket.socket | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            frame = encode_record(record, self.host)
        except Exception:
            self.handleError(record)
            return
        try:
            if self._sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(self.timeout)
                try:
                    sock.connect(self.path)
                except OSError:
                    sock.close()
                    raise
                self._sock = sock
            self._sock.sendall(frame)
        except OSError:
            self._drop_socket()
            self._to_stderr(record)

    def _to_stderr(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(logging.Formatter(logging.BASIC_FORMAT).format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            pass

    def _drop_socket(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None

    def close(self) -> None:
        self.acquire()  # logging.Handler's own lock, as emit() holds it
        try:
            self._drop_socket()
        finally:
            self.release()
        super().close()


def forward_host_logs(rundir: str, level: int | None = None, host: str | None = None) -> HostLogForwarder:
    """In a host process: drop inherited handlers, forward every record to the node.

    A host forked from the node's zygote may carry copies of the embedding
    program's handlers; left in place they would write a second copy of each
    record (to the same files, from another process).  ``level`` is the
    node's effective root level, so hosts do not send records nobody wants.
    """
    root = logging.getLogger()
    for logger in [
        root,
        *(obj for obj in logging.Logger.manager.loggerDict.values() if isinstance(obj, logging.Logger)),
    ]:
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
    forwarder = HostLogForwarder(os.path.join(rundir, SOCKET_NAME), host)
    root.addHandler(forwarder)
    if level is not None:
        root.setLevel(level)
    return forwarder


class LogListener:
    """In the node's process: a daemon thread that re-emits host records.

    Created before any host exists, closed when the node closes (the thread
    is joined, the socket file removed).
    """

    def __init__(self, rundir: str) -> None:
        self.path = os.path.join(rundir, SOCKET_NAME)
        self.dropped = 0  # garbage or oversized frames
        self.failed = 0  # records a handler raised on
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(64)
        self._server.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._server, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._buffers: dict[socket.socket, bytearray] = {}
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="actors-log-listener", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closing:
            for key, _ in self._selector.select():
                sock = key.fileobj
                if sock is self._wake_r:
                    self._closing = True
                elif sock is self._server:
                    self._accept()
                else:
                    assert isinstance(sock, socket.socket)
                    self._read(sock)
        # Drain what hosts sent before the node asked to close.
        for sock in list(self._buffers):
            self._read(sock, final=True)

    def _accept(self) -> None:
        try:
            conn, _ = self._server.accept()
        except (BlockingIOError, OSError):
            return
        conn.setblocking(False)
        self._buffers[conn] = bytearray()
        self._selector.register(conn, selectors.EVENT_READ, None)

    def _read(self, sock: socket.socket, final: bool = False) -> None:
        buf = self._buffers[sock]
        closed = False
        while True:
            try:
                chunk = sock.recv(65536)
            except BlockingIOError:
                break
            except OSError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            buf.extend(chunk)
        while len(buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buf)
            if size > MAX_FRAME:
                self.dropped += 1
                closed = True  # the stream cannot be resynchronised
                break
            if len(buf) < _HEADER.size + size:
                break
            body = bytes(buf[_HEADER.size : _HEADER.size + size])
            del buf[: _HEADER.size + size]
            self._emit(body)
        if closed or final:
            self._selector.unregister(sock)
            del self._buffers[sock]
            sock.close()

    def _emit(self, body: bytes) -> None:
        try:
            record = decode_record(body)
        except ValueError:
            self.dropped += 1
            return
        logger = logging.getLogger(record.name)
        if logger.isEnabledFor(record.levelno):
            try:
                logger.handle(record)
            except Exception:  # a handler of the embedding program failed: keep listening
                self.failed += 1

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread (after it re-emits what has arrived) and remove the socket."""
        if self._thread.is_alive():
            try:
                self._wake_w.send(b"x")
            except OSError:
                pass
            self._thread.join(timeout)
        for sock in (self._server, self._wake_r, self._wake_w):
            try:
                sock.close()
            except OSError:
                pass
        self._selector.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass
