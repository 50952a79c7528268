"""The ZAP handler: which CurveZMQ clients a link's listener lets in.

ZeroMQ asks a ZAP handler (RFC 27) about every CURVE client that connects to
a socket with a ZAP domain, on ``inproc://zeromq.zap.01`` of the socket's own
context.  A link serves those requests on its own I/O thread, so no extra
thread: it accepts only clients presenting the cluster's public key, so a
peer without the key fails the handshake and its bytes never reach the
link, nor any decoder.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

import zmq

__all__ = ["ZAP_DOMAIN", "ZAP_ENDPOINT", "Refusals", "open_zap", "serve_zap"]

log = logging.getLogger("actors.net")

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
ZAP_DOMAIN = b"otpy"


def open_zap(ctx: zmq.Context[zmq.Socket[bytes]]) -> zmq.Socket[bytes]:
    """Bind the ZAP handler's socket in ``ctx`` (one per context: ZeroMQ asks there)."""
    sock = ctx.socket(zmq.REP)
    sock.linger = 0
    sock.bind(ZAP_ENDPOINT)
    return sock


class Refusals:
    """Clients a listener refused: their CurveZMQ handshake failed (the peer holds another
    cluster's key, so ZeroMQ never asks the ZAP handler, or it speaks no CurveZMQ) or the
    ZAP handler turned their key away.  Logged a line a minute at most, with how many since
    the line before, so an operator learns of them without a line per retry."""

    def __init__(self, where: str, period: float = 60.0) -> None:
        self.where = where
        self.period = period
        self._since = 0
        self._logged: float | None = None

    def failed(self, now: float, where: str) -> None:
        """One more refused; ``where``: the listening endpoint, or the peer's address."""
        self._since += 1
        if self._logged is not None and now - self._logged < self.period:
            return
        count, self._since, self._logged = self._since, 0, now
        log.warning(
            "%s refused %d connection%s (the last: %s): the CurveZMQ handshake failed (a peer without this cluster's key?)",
            self.where,
            count,
            "" if count == 1 else "s",
            where,
            extra={"event": "handshake_failed", "count": count, "reason": "not_cluster_key"},
        )


def serve_zap(
    sock: zmq.Socket[bytes],
    public_raw: bytes,
    count: Callable[[str], None],
    denied: Callable[[str], None] | None = None,
) -> None:
    """Answer every ZAP request waiting on ``sock``: 200 for a CURVE client
    presenting ``public_raw`` (the cluster's public key), 400 for anyone else;
    ``count`` hears ``zap_allowed`` or ``zap_denied`` for each, ``denied`` the address of a refused one."""
    while True:
        try:
            msg = sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        request_id = msg[1] if len(msg) > 1 else b""
        ok = len(msg) >= 7 and msg[0] == b"1.0" and msg[5] == b"CURVE" and secrets.compare_digest(msg[6], public_raw)
        count("zap_allowed" if ok else "zap_denied")
        if not ok and denied is not None:
            denied(msg[3].decode(errors="replace") if len(msg) > 3 else "?")
        if ok:
            sock.send_multipart([b"1.0", request_id, b"200", b"OK", b"cluster", b""])
        else:
            sock.send_multipart([b"1.0", request_id, b"400", b"not a cluster member", b"", b""])
