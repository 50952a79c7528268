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

The ports are the kernel's pick unless ``[cluster] direct_ports`` names a
range (for a firewall that opens a range rather than every port): then each
socket takes a free port of the range, and one that finds none does not
listen (`NoFreePort`; its frames come through the node's own port).
"""

from __future__ import annotations

import errno
import random
from dataclasses import dataclass

import zmq

__all__ = ["NoFreePort", "TcpSettings", "bind_tcp"]


class NoFreePort(OSError):
    """Every port of ``[cluster] direct_ports`` is taken on this machine."""


@dataclass(frozen=True)
class TcpSettings:
    """Where a node's processes listen, and the cluster key they admit (None: no CurveZMQ)."""

    host: str
    public: bytes | None = None
    secret: bytes | None = None
    #: The first and last port the processes may listen on (None: any free port).
    ports: tuple[int, int] | None = None

    @classmethod
    def from_listen(
        cls, listen: str, public: bytes | None, secret: bytes | None, ports: tuple[int, int] | None = None
    ) -> "TcpSettings":
        """The settings of a node listening at ``listen`` (``tcp://HOST:PORT``)."""
        rest = listen.partition("://")[2] or listen
        host = rest.rpartition(":")[0] or rest
        return cls(host, public, secret, ports)


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
        if settings.ports is None:
            return sock.bind_to_random_port(f"tcp://{host}")
        return _bind_in_range(sock, host, *settings.ports)
    finally:
        if keyed:
            sock.curve_server = False


def _bind_in_range(sock: zmq.Socket[bytes], host: str, first: int, last: int) -> int:
    """Each port of the range once, from a random one on (processes starting
    together rarely try the same port twice); `NoFreePort` when all are taken."""
    count = last - first + 1
    start = random.randrange(count)
    for i in range(count):
        port = first + (start + i) % count
        try:
            sock.bind(f"tcp://{host}:{port}")
        except zmq.ZMQError as exc:
            if exc.errno == errno.EADDRINUSE:
                continue
            raise
        return port
    raise NoFreePort(errno.EADDRINUSE, f"every port of [cluster] direct_ports = {first}-{last} is taken on {host}")
