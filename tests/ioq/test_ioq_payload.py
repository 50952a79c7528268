"""What an IOQ2 caller sends: flat requests (every read) go as `actors.plain.PlainData`,
JSON on the wire, and the server makes their message and dimensions tuples
again, so the file and the queue see exactly what the caller gave; anything
JSON could change travels pickled as before."""

from __future__ import annotations

import time
from typing import Any

import pytest

from actors._core.wire.codec import decode_frame, encode_frame
from actors.ioq import api
from actors.ioq.server2 import IOQ2_FLAT, IOQ2_REQUEST, wire_payload
from actors.ioq.sup import start_ioq
from actors.plain import PlainData
from tests.ioq.test_ioq_colocated import GatedFile
from tests.polling import poll_until

pytestmark = pytest.mark.timeout(60)

SHARD = "shards/00000000-1fffffff/foo/bar.1503945430"
WIRE = ["node", "h1", "h1.7", 1234, None]


@pytest.mark.parametrize(
    "msg, dimensions",
    [
        (("pread_iolist", 4096), ("interactive", SHARD)),
        (("pread", 0, 100), ("db_compact", SHARD, "_design/foo")),
        (("pread", 0, 100), None),
        (("custom", 1.5, True, None, -(2**63), 2**64 - 1), ("interactive", SHARD)),
    ],
)
def test_a_flat_request_travels_as_json_and_comes_back_as_tuples(msg: Any, dimensions: Any) -> None:
    payload = wire_payload(WIRE, msg, dimensions, time.monotonic())
    assert type(payload) is PlainData and payload[0] == IOQ2_FLAT
    frame = encode_frame(1, "h1.1", None, 3, "h2", payload)
    assert frame[:1] == b"J"
    _tag, wire, got_msg, got_dimensions, _t0 = decode_frame(frame)[5]
    assert wire == WIRE and tuple(got_msg) == msg
    assert (got_dimensions is None) == (dimensions is None)
    assert dimensions is None or tuple(got_dimensions) == dimensions


@pytest.mark.parametrize(
    "msg, dimensions, t0",
    [
        (("append", b"bytes"), ("interactive", SHARD), 1.0),  # bytes: not JSON
        (("pread", (1, 2)), ("interactive", SHARD), 1.0),  # a nested tuple would come back a list
        (("pread", float("nan")), ("interactive", SHARD), 1.0),  # JSON has no NaN
        (("pread", float("inf")), ("interactive", SHARD), 1.0),
        (("pread", 2**64), ("interactive", SHARD), 1.0),  # past JSON's 64-bit integers
        (["pread_iolist", 0], ("interactive", SHARD), 1.0),  # a list must stay a list
        (("pread_iolist", 0), ("interactive", ["a"]), 1.0),  # an unhashable part
        (("pread_iolist", 0), ["interactive", SHARD], 1.0),
        (("pread_iolist", 0), ("interactive", SHARD), None),  # no t0
    ],
)
def test_anything_json_could_change_travels_as_before(msg: Any, dimensions: Any, t0: Any) -> None:
    payload = wire_payload(WIRE, msg, dimensions, t0)
    assert type(payload) is tuple and payload == (IOQ2_REQUEST, WIRE, msg, dimensions, t0)


@pytest.fixture
def server(node):
    node.config.set("ioq2", "enabled", "true")
    node.config.set("ioq2", "servers", "1")
    start_ioq(node)
    poll_until(lambda: api.get_concurrency() >= 1, "the IOQ2 server")
    return node


def test_the_file_and_the_queue_see_the_callers_tuples(server, tmp_path):
    # A file in a host of its own: the server sends it ("$io", ...) with the message it rebuilt.
    f = server.spawn(GatedFile, str(tmp_path / "a.couch"), host="files")
    pos = f.call(("append_bin", b"block"))
    assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == b"block"
    assert api.call(f, ("pread", pos, 4), ("db_compact", SHARD, "_design/x")) == b"\x00\x00\x00\x05"
    assert api.call(f, ["pread_iolist", pos], ("interactive", SHARD)) == b"block"
    reads = [(type(msg).__name__, msg) for msg, _inline in f.call("log") if msg[0] != "append_bin"]
    assert reads == [("tuple", ("pread_iolist", pos)), ("tuple", ("pread", pos, 4)), ("list", ["pread_iolist", pos])]
    counters = server.stats()["counters"]
    assert counters["couchdb.io_queue2.interactive.count"] == 2
    assert counters["couchdb.io_queue2.db_compact.count"] == 1
