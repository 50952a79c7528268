"""`frame_kind` reads a frame's kind from its first bytes, for any body."""

from __future__ import annotations

import pytest

from actors._core.wire.codec import encode_frame, frame_kind


@pytest.mark.parametrize("kind", [0, 2, 3, 11, 13, 99])
@pytest.mark.parametrize("body", ["text", None, [1, {"a": 2}], (1, 2), {3: "not json"}, object.__name__])
def test_the_kind_of_every_encoding(kind: int, body: object) -> None:
    assert frame_kind(encode_frame(kind, "h1.1", ["x", "h1~r1"], 7, "h1", body)) == kind


@pytest.mark.parametrize(
    "frame", [b"", b"J", b"P", b"Jgarbage", b"J[x,1]", b"J[123456,", b"R\x00\x01n", b"P\x00\x05[ab,]"]
)
def test_not_a_frame(frame: bytes) -> None:
    assert frame_kind(frame) is None
