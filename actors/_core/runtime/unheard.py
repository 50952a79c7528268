"""Frames from a node this process has not been told is up: held, not acted on.

A process of another node may send here straight (`actors._core.net.direct`)
as soon as *its* side of the link is up, which can be a few milliseconds
before this node's side is, and before this node process has told this
process of the new peer.  Acting on such a frame at once breaks causality:
anything the actor does in answer that goes through this node process (a
reply on the relay, a monitor, a link) meets a node process that does not
know the sender's node yet, which reports the sender's process gone with
``noconnection`` for good.  So a frame from an origin not yet heard of waits
here until the node process says that node is up (then it is handled before
anything later from it) or down (then it is dropped, as any frame from a
fenced incarnation is).  The link itself holds a peer's frames the same way
until it is up (``held_before_up`` in `actors._core.net.listener`).

The hold is bounded, per process, in frames and bytes: past either bound a
frame is dropped and counted (``actors.net.unheard_dropped``), the tail of
what that node sent, as a link that breaks loses its tail.  An origin whose
node never comes up here keeps at most that much.
"""

from __future__ import annotations

__all__ = ["MAX_BYTES", "MAX_FRAMES", "UnheardFrames"]

#: Frames held at most in one process, from all origins together.
MAX_FRAMES = 10_000
#: Bytes held at most in one process, from all origins together.
MAX_BYTES = 64 * 1024 * 1024


class UnheardFrames:
    """Frames held per origin (``name@incarnation``), in arrival order."""

    __slots__ = ("_held", "_frames", "_bytes", "max_frames", "max_bytes")

    def __init__(self, max_frames: int = MAX_FRAMES, max_bytes: int = MAX_BYTES) -> None:
        self._held: dict[str, list[bytes]] = {}
        self._frames = 0
        self._bytes = 0
        self.max_frames = max_frames
        self.max_bytes = max_bytes

    def __len__(self) -> int:
        return self._frames

    def hold(self, origin: str, frame: bytes) -> bool:
        """Keep ``frame`` until ``origin`` is heard of; False when it is over the bound (drop it)."""
        if self._frames >= self.max_frames or self._bytes + len(frame) > self.max_bytes:
            return False
        self._held.setdefault(origin, []).append(frame)
        self._frames += 1
        self._bytes += len(frame)
        return True

    def take(self, origin: str) -> list[bytes]:
        """What ``origin`` sent before it was heard of, oldest first; nothing is held for it after."""
        frames = self._held.pop(origin, [])
        self._frames -= len(frames)
        self._bytes -= sum(len(f) for f in frames)
        return frames
