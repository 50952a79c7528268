"""Frame encoding: an orjson header and a body in orjson or cloudpickle.

Plain data (str, int, float, bool, None, and lists and string-keyed dicts of
those) travels as orjson, which is fast and safe.  Anything else, tuples
included since orjson would turn them into lists, travels as cloudpickle.
Frames only come from processes of our own node (the ipc sockets live in a
0700 directory), so unpickling them is as safe as the node itself.
"""

from __future__ import annotations

from typing import Any

import cloudpickle
import orjson

__all__ = ["ENC_JSON", "ENC_PICKLE", "decode_body", "encode_body", "encode_header", "decode_header"]

ENC_JSON = 0
ENC_PICKLE = 1

_SCALARS = (str, int, float, bool, type(None))
_dumps = orjson.dumps
_loads = orjson.loads
_pdumps = cloudpickle.dumps
_ploads = cloudpickle.loads


def _is_plain(value: Any, depth: int = 0) -> bool:
    t = type(value)
    if t in _SCALARS:
        return not (t is int and not -(2**63) <= value < 2**64)
    if depth > 8:
        return False
    if t is list:
        return all(_is_plain(v, depth + 1) for v in value)
    if t is dict:
        return all(type(k) is str and _is_plain(v, depth + 1) for k, v in value.items())
    return False


def encode_body(value: Any) -> tuple[int, bytes]:
    t = type(value)
    if t is str or t is bool or value is None or t is float or (t is int and -(2**63) <= value < 2**64):
        return ENC_JSON, _dumps(value)
    if (t is list or t is dict) and _is_plain(value):
        return ENC_JSON, _dumps(value)
    return ENC_PICKLE, _pdumps(value, protocol=5)


def decode_body(enc: int, data: bytes) -> Any:
    if enc == ENC_JSON:
        return _loads(data)
    if enc == ENC_PICKLE:
        return _ploads(data)
    raise ValueError(f"unknown body encoding {enc!r}")


def encode_header(header: list[Any]) -> bytes:
    return _dumps(header)


def decode_header(data: bytes) -> list[Any]:
    header = _loads(data)
    if type(header) is not list or len(header) != 6:
        raise ValueError("malformed frame header")
    return header
