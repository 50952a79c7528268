"""A process's own tcp endpoints: where other nodes' processes send to it straight.

In a distributed node every process that reads frames (a host's endpoint,
and the reply channel of each thread that calls across nodes) may also
listen on tcp, on the interface its node listens on, so a frame from
another node takes one hop (`actors._core.net.direct`).  The same ZeroMQ
socket keeps its ipc endpoint: a socket's security is chosen per bound
endpoint, so the ipc side stays free of encryption while the tcp side is a
CURVE server whose clients the process's ZAP handler
(`actors._core.net.zap`, served on the transport's I/O thread) admits only
with the cluster key, exactly as the node's own listener does.  Without a
cluster key the tcp side is plain, as the node's link is.
"""

from __future__ import annotations

from dataclasses import dataclass

import zmq

__all__ = ["TcpSettings", "bind_tcp"]


@dataclass(frozen=True)
class TcpSettings:
    """Where a node's processes listen, and the cluster key they admit (None: no CurveZMQ)."""

    host: str
    public: bytes | None = None
    secret: bytes | None = None

    @classmethod
    def from_listen(cls, listen: str, public: bytes | None, secret: bytes | None) -> "TcpSettings":
        """The settings of a node listening at ``listen`` (``tcp://HOST:PORT``)."""
        rest = listen.partition("://")[2] or listen
        host = rest.rpartition(":")[0] or rest
        return cls(host, public, secret)


def bind_tcp(sock: zmq.Socket[bytes], settings: TcpSettings) -> int:
    """Bind ``sock`` on a free tcp port of ``settings.host`` as well; the port.

    The CURVE options hold for this endpoint only: they are set for the bind
    and cleared after, so endpoints bound later (and those bound before)
    keep no security, as they must on ipc.  ZeroMQ asks the context's ZAP
    handler about every CURVE client, with or without a ZAP domain."""
    host = settings.host
    if host.startswith("["):
        sock.ipv6 = True
    keyed = settings.public is not None and settings.secret is not None
    if keyed:
        sock.curve_server = True
        sock.curve_publickey = settings.public
        sock.curve_secretkey = settings.secret
    try:
        return sock.bind_to_random_port(f"tcp://{host}")
    finally:
        if keyed:
            sock.curve_server = False
