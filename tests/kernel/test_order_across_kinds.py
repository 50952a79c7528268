"""Order per pair across kinds, from an actor thread: casts an actor makes
and then an exit signal, a link, a monitor or a reply it sends to the same
process arrive at that process in the order they were sent.

An actor thread batches its casts per destination process; every other kind
of signal it sends to that process must first flush the batch, or it
overtakes the casts (a trapping receiver would see the EXIT before them).

The sender lives in a host process of its own, the receiver in this (the
node's) process, so every frame crosses a socket.  What arrives is read at
the receiving runtime as the I/O thread decodes it: links, monitors and
replies leave no trace in the receiver's callbacks, so arrival is the only
place their order shows."""

from __future__ import annotations

import asyncio
import queue
from typing import Any

import pytest

from actors import Node
from actors._core.runtime.outbox import BIG_ITEM
from actors._core.runtime.runtime import K_BATCH, K_CAST, K_EXIT, K_INFO, K_LINK, K_MONITOR, K_REPLY
from actors._core.wire.codec import FrameError, decode_frame
from tests.kernel.order_actors import Burst, Receiver

pytestmark = pytest.mark.timeout(60)

N = 5  # several casts, well under one batch's size: they leave as one frame
SIGNAL = {"exit": K_EXIT, "link": K_LINK, "monitor": K_MONITOR, "reply": K_REPLY}
WATCHED = {K_CAST, K_INFO, K_BATCH, *SIGNAL.values()}


def _spy_arrivals(node: Node, monkeypatch: pytest.MonkeyPatch, src_proc: str) -> list[int]:
    """The kinds of the frames from ``src_proc`` this process's runtime
    decodes, in arrival order (casts, sends, batches and the four signals)."""
    rt = node._rt
    real = rt._on_frame
    arrived: list[int] = []

    def on_frame(frame: bytes, batch: Any) -> None:
        try:
            kind, _to, _frm, _ref, src, _body = decode_frame(frame)
        except FrameError:
            pass
        else:
            if src == src_proc and kind in WATCHED:
                arrived.append(kind)
        real(frame, batch)

    monkeypatch.setattr(rt, "_on_frame", on_frame)
    return arrived


@pytest.mark.parametrize("what", ["exit", "link", "monitor", "reply"])
def test_casts_then_another_kind_arrive_in_the_order_sent(
    node: Node, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    q: "queue.Queue[Any]" = queue.Queue()
    receiver = node.spawn(Receiver, q)
    sender = node.spawn(Burst, host="own")
    arrived = _spy_arrivals(node, monkeypatch, sender.proc)
    request = (what, receiver, N)
    if what == "reply":
        # acall's answer comes back through this process's endpoint (a plain
        # call's goes to the calling thread's own channel), behind the casts.
        assert asyncio.run(sender.acall(request, timeout=10.0)) == "after_casts"
    else:
        assert sender.call(request, timeout=10.0) == "sent"
    # Every cast reached the receiver's callbacks (the batch has arrived)...
    got = [q.get(timeout=10.0) for _ in range(N)]
    if what == "exit":
        got.append(q.get(timeout=10.0))
        # ...in order, and a trapping receiver sees the EXIT only after them.
        assert got == [("cast", ("c", i)) for i in range(N)] + [("EXIT", sender, "after_casts")]
    else:
        assert got == [("cast", ("c", i)) for i in range(N)]
    # The casts left as one batch, and the signal came after it, not before.
    assert arrived == [K_BATCH, SIGNAL[what]], f"arrival order {arrived}"


def test_big_casts_leave_alone_and_keep_their_place_among_small_ones(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``bytes`` or ``str`` body of `BIG_ITEM` or more is never batched (a
    batch of them would be pickled only to be found too big): it leaves in a
    frame of its own, after the small casts batched before it."""
    q: "queue.Queue[Any]" = queue.Queue()
    receiver = node.spawn(Receiver, q)
    sender = node.spawn(Burst, host="own")
    arrived = _spy_arrivals(node, monkeypatch, sender.proc)
    big_bytes, big_str = b"b" * BIG_ITEM, "s" * BIG_ITEM
    sent = [("c", 0), ("c", 1), big_bytes, ("c", 2), big_str, big_bytes, ("c", 3)]
    assert sender.call(("mixed", receiver, sent), timeout=10.0) == "sent"
    got = [q.get(timeout=10.0) for _ in sent]
    assert got == [("cast", body) for body in sent]
    assert arrived == [K_BATCH, K_CAST, K_CAST, K_CAST, K_CAST, K_CAST], f"arrival order {arrived}"
