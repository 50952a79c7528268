"""Frames held from a node not yet heard of (`actors._core.runtime.unheard`): pure policy."""

from __future__ import annotations

from actors._core.runtime.unheard import UnheardFrames


def test_frames_are_given_back_per_origin_in_arrival_order_once() -> None:
    held = UnheardFrames()
    for frame in (b"a1", b"b1", b"a2", b"a3"):
        assert held.hold(frame[:1].decode() + "@1", frame)
    assert len(held) == 4
    assert held.take("a@1") == [b"a1", b"a2", b"a3"]
    assert held.take("a@1") == []
    assert len(held) == 1
    assert held.take("b@1") == [b"b1"]
    assert len(held) == 0


def test_the_hold_is_bounded_in_frames_and_in_bytes_for_all_origins_together() -> None:
    by_count = UnheardFrames(max_frames=3, max_bytes=1000)
    assert [by_count.hold(f"n{i}@1", b"x") for i in range(4)] == [True, True, True, False]
    by_count.take("n0@1")
    assert by_count.hold("n9@1", b"x")  # room again once one origin was taken

    by_bytes = UnheardFrames(max_frames=100, max_bytes=10)
    assert by_bytes.hold("a@1", b"123456")
    assert not by_bytes.hold("b@1", b"12345")  # 11 bytes: over
    assert by_bytes.hold("b@1", b"1234")  # exactly 10
    assert by_bytes.take("a@1") == [b"123456"] and by_bytes.hold("c@1", b"123456")
