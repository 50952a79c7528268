"""`frame_kind` reads a frame's kind from its first bytes, for any body."""

from __future__ import annotations

import pytest

from actors._core.wire.codec import decode_frame, encode_frame, frame_kind, requalify


@pytest.mark.parametrize("kind", [0, 2, 3, 11, 13, 99])
@pytest.mark.parametrize(
    "body", ["text", None, [1, {"a": 2}], (1, 2), {3: "not json"}, object.__name__, b"raw", bytes(70000)]
)
def test_the_kind_of_every_encoding(kind: int, body: object) -> None:
    assert frame_kind(encode_frame(kind, "h1.1", ["x", "h1~r1"], 7, "h1", body)) == kind


@pytest.mark.parametrize(
    "frame", [b"", b"J", b"P", b"Jgarbage", b"J[x,1]", b"J[123456,", b"R\x00\x01n", b"P\x00\x05[ab,]"]
)
def test_not_a_frame(frame: bytes) -> None:
    assert frame_kind(frame) is None


@pytest.mark.parametrize("body", [b"", b"raw bytes", bytes(1 << 20), bytearray(b"not bytes"), ("t", b"x")])
def test_bytes_travel_as_themselves_and_come_back_the_same(body: object) -> None:
    frame = encode_frame(3, "h1.1", ["x", "h1~r1"], 7, "h1", body)
    assert frame[:1] == (b"B" if type(body) is bytes else b"P")
    for seen in (frame, memoryview(frame)):
        got = decode_frame(seen)
        assert got[:5] == (3, "h1.1", ["x", "h1~r1"], 7, "h1")
        assert got[5] == body and type(got[5]) is type(body)
    again = decode_frame(requalify(frame, "a@1f"))
    assert again[4] == "a@1f|h1" and again[2] == ["x", "a@1f|h1~r1"] and again[5] == body
