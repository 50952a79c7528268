"""Frame encoding: one ZeroMQ frame per signal.

Plain data (str, int, float, bool, None, and lists and string-keyed dicts of
those) travels as orjson, which is fast and safe: the whole frame is then a
single orjson array ``[kind, to, from, ref, source, body]`` behind a ``J``
byte.  Anything else — tuples included, since orjson would turn them into
lists — travels as cloudpickle: ``P``, a two-byte header length, the orjson
header ``[kind, to, from, ref, source]``, then the pickled body.  A body that
is exactly ``bytes`` travels as itself behind the same header, tagged ``B``:
neither pickled nor unpickled, so a 100-byte or a 1 MB payload costs one
copy in and one out.

Who may send a frame that is unpickled: the processes of this node (the ipc
sockets live in a 0700 directory), and the processes of the other nodes of
the cluster, which send to this node's processes straight over tcp
(`actors._core.net.direct`) or through its node process.  Only holders of
the cluster key connect (CurveZMQ, and ZAP on every tcp endpoint), so the
cluster key is the trust boundary: unpickling runs whatever code a pickle
names, and a holder of the key can run code on every node, as a holder of
Erlang's cookie can (docs/distribution.md, *Security model*).  A node with
``[cluster] trust_peers = false`` decodes frames from other nodes with
``loads=`` `actors._core.wire.plain.loads_plain`, which builds plain data
and refuses the rest.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable
from typing import Any

import cloudpickle
import orjson

__all__ = [
    "FrameError",
    "PlainData",
    "decode_frame",
    "encode_frame",
    "frame_kind",
    "is_scalar",
    "requalify",
    "unwrap_relay",
    "unwrap_remote",
    "wrap_relay",
    "wrap_remote",
]

_SCALARS = (str, int, float, bool, type(None))
_dumps = orjson.dumps
_loads = orjson.loads
_ploads = pickle.loads
_fast_dumps = pickle.dumps
_cloud_dumps = cloudpickle.dumps


def _pdumps(value: Any, protocol: int = 5) -> bytes:
    """The C pickler first (about 15x faster than cloudpickle); cloudpickle
    for what it cannot do by reference: lambdas, local classes, and anything
    defined in ``__main__``, which another process may not be able to import."""
    if type(value) is bytes:  # nothing in it refers to a module: no scan of a 1 MB body
        return _fast_dumps(value, protocol=protocol)
    try:
        data = _fast_dumps(value, protocol=protocol)
    except Exception:
        return _cloud_dumps(value, protocol=protocol)
    if b"__main__" in data:
        return _cloud_dumps(value, protocol=protocol)
    return data


_J = 74  # ord("J")
_P = 80  # ord("P")
_B = 66  # ord("B")


class FrameError(ValueError):
    """A frame that is not one of ours."""


class PlainData(list[Any]):
    """A list its sender vouches holds plain data only: str, bool, None,
    int in the 64-bit range, finite float, and lists and str-keyed dicts of
    those.  It travels as JSON without the check `encode_frame` would
    otherwise walk it with, which costs more than the encoding itself on a
    hot path that knows its message's shape.  The receiver of another
    process gets a plain ``list``; one in this process gets the object
    itself.  A tuple inside would arrive as a list, and a non-finite float
    as None: checking is the sender's side of the bargain."""

    __slots__ = ()


def is_scalar(value: Any) -> bool:
    """A value orjson carries unchanged on its own (the cheap test for casts)."""
    t = type(value)
    return t is str or value is None or t is bool or t is float or (t is int and -(2**63) <= value < 2**64)


_INT_MIN, _INT_END = -(2**63), 2**64


def _is_plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is plain data JSON carries unchanged.  Scalars
    inside a list or dict are checked in a loop, not by a call each: a
    small dict is checked in a third of the time a recursive walk took."""
    t = type(value)
    if t is dict:
        if depth > 8:
            return False
        for k in value:
            if type(k) is not str:
                return False
        return _plain_values(value.values(), depth)
    if t is list:
        return depth <= 8 and _plain_values(value, depth)
    if t is int:
        return _INT_MIN <= value < _INT_END
    return t in _SCALARS


def _plain_values(values: Iterable[Any], depth: int) -> bool:
    for v in values:
        tv = type(v)
        if tv is str or tv is float or tv is bool or v is None:
            continue
        if tv is int:
            if not _INT_MIN <= v < _INT_END:
                return False
        elif not _is_plain(v, depth + 1):
            return False
    return True


def encode_frame(kind: int, to: Any, frm: Any, ref: Any, src: str, body: Any, plain: bool = False) -> bytes:
    """One frame; ``plain=True`` says the caller already knows ``body`` is
    plain data (a batch of casts whose payloads it checked one by one)."""
    t = type(body)
    if (
        plain
        or t is PlainData
        or t is str
        or body is None
        or t is bool
        or t is float
        or (t is int and -(2**63) <= body < 2**64)
        or ((t is list or t is dict) and _is_plain(body))
    ):
        try:
            return b"J" + _dumps([kind, to, frm, ref, src, body])
        except orjson.JSONEncodeError:  # a str JSON cannot hold (a lone surrogate): pickle keeps it
            pass
    header = _dumps([kind, to, frm, ref, src])
    if t is bytes:
        return b"B" + len(header).to_bytes(2, "big") + header + body
    return b"P" + len(header).to_bytes(2, "big") + header + _pdumps(body, protocol=5)


def decode_frame(
    frame: bytes | memoryview, loads: Callable[[Any], Any] = _ploads
) -> tuple[int, Any, Any, Any, str, Any]:
    """``(kind, to, from, ref, source, body)``; raises `FrameError` on garbage.
    ``loads`` unpickles a pickled body (another for frames from untrusted nodes)."""
    try:
        tag = frame[0]
        if tag == _J:
            kind, to, frm, ref, src, body = _loads(frame[1:])
            return kind, to, frm, ref, src, body
        if tag == _P:
            size = int.from_bytes(frame[1:3], "big")
            kind, to, frm, ref, src = _loads(frame[3 : 3 + size])
            # A big body read in place, not from a sliced copy of the frame.
            body = memoryview(frame)[3 + size :] if len(frame) > _VIEW_FROM else frame[3 + size :]
            return kind, to, frm, ref, src, loads(body)
        if tag == _B:
            size = int.from_bytes(frame[1:3], "big")
            kind, to, frm, ref, src = _loads(frame[3 : 3 + size])
            return kind, to, frm, ref, src, bytes(frame[3 + size :])
    except Exception as exc:
        raise FrameError(f"undecodable frame: {exc!r}") from None
    raise FrameError("unknown frame tag")


def frame_kind(frame: bytes) -> int | None:
    """The kind of a frame, read from its first bytes without decoding the
    rest (orjson writes ``[kind,`` with no space); None when it is not one."""
    tag = frame[:1]
    start = 2 if tag == b"J" else 4 if tag == b"P" or tag == b"B" else 0
    if not start or frame[start - 1 : start] != b"[":
        return None
    end = frame.find(b",", start, start + 4)
    digits = frame[start:end] if end > start else b""
    return int(digits) if digits.isdigit() else None


_R = 82  # ord("R"): a frame for another node, handed by a host to its node process


def wrap_relay(dest: str, frame: bytes) -> bytes:
    """``frame`` for ``dest`` (a qualified ``<node_id>|<proc>``), as a host
    hands it to its node process, which alone talks to other nodes."""
    name = dest.encode()
    return b"R" + len(name).to_bytes(2, "big") + name + frame


def _unwrap_named(data: bytes, tag: int) -> tuple[bytes, bytes]:
    """``(name, frame)`` behind a one-byte ``tag`` and a two-byte length."""
    if not data or data[0] != tag:
        raise ValueError(f"not a frame tagged {chr(tag)!r}")
    size = int.from_bytes(data[1:3], "big")
    name = data[3 : 3 + size]
    if len(name) != size:
        raise ValueError("truncated name")
    return name, data[3 + size :]


def unwrap_relay(data: bytes) -> tuple[str, bytes]:
    """``(dest, frame)`` from `wrap_relay`; raises `FrameError` on anything else."""
    try:
        name, frame = _unwrap_named(data, _R)
        return name.decode(), frame
    except Exception as exc:
        raise FrameError(f"undecodable relay frame: {exc!r}") from None


_S = 83  # ord("S"): a frame another node's process sent straight to this one


def wrap_remote(origin: bytes, frame: bytes) -> bytes:
    """``frame`` as a process sends it straight to a process of another node
    (`actors._core.net.direct`): behind the node id and incarnation it comes
    from, ``origin`` (``b"name@inc"``), which the receiver fences on and
    qualifies the frame's names with."""
    return b"S" + len(origin).to_bytes(2, "big") + origin + frame


#: Origins seen, raw -> str: a few per cluster, decoded once each.
_origins: dict[bytes, str] = {}
#: A body bigger than this is read as a view of its frame; a smaller one is
#: sliced (a view costs more than copying a few hundred bytes).
_VIEW_FROM = 4096


def unwrap_remote(data: bytes) -> tuple[str, bytes | memoryview]:
    """``(origin, frame)`` from `wrap_remote`; raises `FrameError` on anything else.

    A big frame is a view into ``data``, not a copy (a 1 MB message would
    otherwise be copied once more here); `decode_frame` reads it as it is."""
    try:
        end = 3 + ((data[1] << 8) | data[2])
        raw = data[3:end]
        origin = _origins.get(raw)
        if origin is None:
            if data[0] != _S or len(raw) != end - 3 or b"@" not in raw:
                raise ValueError("not a frame from another node")
            origin = raw.decode()
            if len(_origins) < 1024:
                _origins[raw] = origin
        elif data[0] != _S:
            raise ValueError("not a frame from another node")
        return origin, (memoryview(data)[end:] if len(data) > _VIEW_FROM else data[end:])
    except Exception as exc:
        raise FrameError(f"undecodable frame from another node: {exc!r}") from None


def requalify(frame: bytes, node_id: str) -> bytes:
    """A frame that came from node ``node_id``: its source process (and the
    reply channel a call names) become the names they go by on this node,
    ``<node_id>|<proc>``, so answers find their way back.  The body is left
    as it is (refs in it qualify themselves when decoded)."""
    try:
        tag = frame[0]
        if tag == _J:
            items = _loads(frame[1:])
            _fix_header(items, node_id)
            return b"J" + _dumps(items)
        if tag == _P or tag == _B:
            size = int.from_bytes(frame[1:3], "big")
            header = _loads(frame[3 : 3 + size])
            _fix_header(header, node_id)
            data = _dumps(header)
            return frame[:1] + len(data).to_bytes(2, "big") + data + frame[3 + size :]
    except Exception as exc:
        raise FrameError(f"undecodable frame: {exc!r}") from None
    raise FrameError("unknown frame tag")


def _fix_header(items: list[Any], node_id: str) -> None:
    if type(items) is not list or len(items) < 5 or type(items[4]) is not str:
        raise ValueError("bad header")
    items[4] = f"{node_id}|{items[4]}"
    frm = items[2]
    if type(frm) is list and len(frm) >= 2 and type(frm[1]) is str:  # a call's [caller, reply channel, chain]
        frm[1] = f"{node_id}|{frm[1]}"
