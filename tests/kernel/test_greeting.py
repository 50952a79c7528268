"""`actors._core.node.greeting`: what a node tells a peer in the handshake (pure, no processes)."""

from __future__ import annotations

from typing import Any

from actors._core.node import greeting


def test_a_greeting_goes_to_the_service_of_the_same_key_and_node_and_returns_its_follow_up() -> None:
    got: list[tuple[str, Any]] = []
    followed: list[str] = []

    def accept(peer: str, value: Any) -> Any:
        got.append((peer, value))
        return lambda: followed.append(peer)

    greeting.add("a@1", "names", lambda peer: {"to": peer}, accept)
    greeting.add("b@2", "names", lambda peer: {"from": "b"}, lambda peer, value: None)
    try:
        data = greeting.offer("b@2", "a")
        assert data is not None
        then = greeting.accept("a@1", "b", data)
        assert got == [("b", {"from": "b"})]
        assert followed == []  # waits until the node runs it, once the peer is up
        greeting.run_after_up(then, "b")
        assert followed == ["b"]
        assert greeting.offer("c@3", "a") is None  # nothing greets from a node with no service
        assert greeting.accept("c@3", "b", data) == []
    finally:
        greeting.remove("a@1", "names")
        greeting.remove("b@2", "names")
    assert greeting.offer("b@2", "a") is None


def test_a_failing_service_leaves_the_others_greetings_and_garbage_is_ignored() -> None:
    def broken_offer(peer: str) -> Any:
        raise RuntimeError("broken")

    def broken_accept(peer: str, value: Any) -> Any:
        raise RuntimeError("broken")

    got: list[Any] = []
    greeting.add("a@1", "broken", broken_offer, broken_accept)
    greeting.add("a@1", "good", lambda peer: 42, lambda peer, value: got.append(value))
    try:
        data = greeting.offer("a@1", "b")
        assert data is not None
        assert greeting.accept("a@1", "b", data) == []
        assert got == [42]
        assert greeting.accept("a@1", "b", b"not a pickle") == []
        # a restarted service replaces its entry; removing with an older offer leaves the new one
        old_offer = broken_offer
        greeting.add("a@1", "broken", lambda peer: "new", lambda peer, value: None)
        greeting.remove("a@1", "broken", old_offer)
        assert b"new" in (greeting.offer("a@1", "b") or b"")
    finally:
        greeting.remove("a@1", "broken")
        greeting.remove("a@1", "good")
