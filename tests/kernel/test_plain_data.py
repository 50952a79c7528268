"""`actors.plain.PlainData`: a list its sender vouches is plain data travels as JSON
unchecked; a string JSON cannot hold falls back to pickle instead of failing."""

from __future__ import annotations

from typing import Any

import pytest

from actors import GenServer
from actors._core.wire.codec import decode_frame, encode_frame
from actors.plain import PlainData

pytestmark = pytest.mark.timeout(60)


class Typed(GenServer):
    """Answers what it was called with and the type it arrived as."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        return [type(request).__name__, request]


def test_plain_data_is_encoded_as_json_and_decoded_as_a_list() -> None:
    body = PlainData(["$tag", ["n", "h1", "h1.2", 7, None], ["pread", 0, 4], {"k": 1.5}, True])
    frame = encode_frame(1, "h1.1", None, 3, "h2", body)
    assert frame[:1] == b"J"
    got = decode_frame(frame)[5]
    assert type(got) is list and got == list(body)


@pytest.mark.parametrize("body", ["\ud800", ["a", "\udfff"], {"k": "\ud83d"}, PlainData(["\ud800"])])
def test_a_string_json_cannot_hold_travels_pickled(body: Any) -> None:
    frame = encode_frame(1, "h1.1", None, 3, "h2", body)
    assert frame[:1] == b"P"
    assert decode_frame(frame)[5] == body


def test_plain_data_reaches_another_process_as_a_list_and_this_one_as_itself(node) -> None:
    far = node.spawn(Typed, host="h1")
    near = node.spawn(Typed)  # in this process: no encoding at all
    body = PlainData(["x", 1, [2.5, None]])
    assert far.call(body) == ["list", ["x", 1, [2.5, None]]]
    kind, got = near.call(body)
    assert kind == "PlainData" and got is body


def test_a_lone_surrogate_crosses_processes(node) -> None:
    far = node.spawn(Typed, host="h1")
    assert far.call(["a", "\ud800"]) == ["list", ["a", "\ud800"]]
    assert far.call("\udfff") == ["str", "\udfff"]
