"""What two nodes' links say to each other, and what a link's user gets wrong.

The frame kinds of the link protocol (the first part of every frame), the
socket events a link watches, node addresses (``tcp://HOST:PORT``) and the
errors a link raises.  Pure data and checks: no sockets, no threads; the
link itself is `actors._core.net.net.NetLink`.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable
from typing import Any

import orjson
import zmq

__all__ = [
    "recv_event",
    "BYE",
    "BYE_LINGER_MS",
    "DATA",
    "HANDSHAKE_FAILED",
    "HELLO",
    "HOST_DATA",
    "LISTEN_EVENTS",
    "OUT_EVENTS",
    "PROTOCOL_VERSION",
    "RECV_BATCH",
    "REJECT",
    "TICK",
    "WELCOME",
    "ConnectError",
    "DownCallback",
    "FrameCallback",
    "GreetedCallback",
    "GreetingCallback",
    "NetError",
    "RefuseCallback",
    "RejectedCallback",
    "UpCallback",
    "decode",
    "is_loopback",
    "parse_tcp",
]

PROTOCOL_VERSION = 1

# DEALER -> ROUTER
HELLO = b"H"
TICK = b"T"
DATA = b"D"
BYE = b"B"
HOST_DATA = b"S"  # data from a host process of a node, on its own connection
# ROUTER -> DEALER
WELCOME = b"W"
REJECT = b"R"

RECV_BATCH = 512
BYE_LINGER_MS = 200  # how long a closing link lets its goodbyes flush
OUT_EVENTS = (
    zmq.EVENT_DISCONNECTED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)
LISTEN_EVENTS = (
    zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_ACCEPTED
    | zmq.EVENT_DISCONNECTED
)
HANDSHAKE_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)

FrameCallback = Callable[[str, list[bytes]], None]
UpCallback = Callable[[str, int], None]
DownCallback = Callable[[str, int, str], None]
RefuseCallback = Callable[[str, int], "str | dict[str, Any] | None"]
RejectedCallback = Callable[[str | None, str, dict[str, Any]], None]
GreetingCallback = Callable[[str], "bytes | None"]
GreetedCallback = Callable[[str, int, bytes], None]


class NetError(Exception):
    """A link cannot do what was asked (bad address, no key, peer not connected)."""


class ConnectError(NetError):
    """`NetLink.connect` failed: timeout, handshake refused (wrong key), or rejected."""


def parse_tcp(address: str) -> tuple[str, int]:
    """``tcp://HOST:PORT`` -> (host, port); `NetError` naming the address otherwise."""
    if not isinstance(address, str) or not address.startswith("tcp://"):
        raise NetError(f"node address {address!r} is not tcp://HOST:PORT")
    host, sep, port_text = address[len("tcp://") :].rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise NetError(f"node address {address!r} is not tcp://HOST:PORT")
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    """True only for loopback literals and ``localhost``; names and wildcards are not."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def decode(raw: bytes) -> Any:
    """A handshake frame's JSON body, or None when it does not parse."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


_EVENT = struct.Struct("=HI")  # what libzmq's socket monitor sends first: event id, value


def recv_event(mon: zmq.Socket[bytes]) -> tuple[int, bytes]:
    """The next event on a socket monitor, without waiting: ``(event, endpoint)``;
    raises `zmq.Again` when there is none.  Read here rather than with
    ``zmq.utils.monitor``, which imports ``zmq.asyncio`` (and with it asyncio
    and ssl) into every process that links to another node."""
    head, *rest = mon.recv_multipart(zmq.NOBLOCK)
    event, _value = _EVENT.unpack(head)
    return event, rest[0] if rest else b""
