"""Actors of the big-message tests, importable by name on every node: one
streams large messages, one takes them, one times small calls meanwhile."""

from __future__ import annotations

import time
from typing import Any

from actors import GenServer


class Streamer(GenServer):
    """``("stream", target, n, size)``: casts ``n`` messages of ``size``
    bytes to ``target`` as fast as it can; answers when all are sent,
    with the time (CLOCK_MONOTONIC) it began."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        _, target, n, size = request
        payload = bytes(size)
        began = time.monotonic()
        for i in range(n):
            target.cast([i, payload])
        return began


class Taker(GenServer):
    """Keeps the count, total size and first/last arrival (CLOCK_MONOTONIC,
    shared by the processes of one machine) of what it is cast."""

    def init(self) -> None:
        self.count = 0
        self.total = 0
        self.first: float | None = None
        self.last: float | None = None
        self.order_ok = True

    def handle_cast(self, request: Any) -> None:
        now = time.monotonic()
        i, payload = request
        if i != self.count:
            self.order_ok = False
        self.count += 1
        self.total += len(payload)
        if self.first is None:
            self.first = now
        self.last = now

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "ping":
            return "pong"
        return [self.count, self.total, self.first, self.last, self.order_ok]


class Pinger(GenServer):
    """``("pings", target, seconds)``: calls ``target`` with a small request
    back to back for ``seconds``; answers ``[(sent_at, latency_s), ...]``."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        _, target, seconds = request
        samples: list[tuple[float, float]] = []
        deadline = time.monotonic() + seconds
        for _ in range(100_000):
            t0 = time.monotonic()
            if t0 > deadline:
                break
            target.call("ping", timeout=5.0)
            samples.append((t0, time.monotonic() - t0))
        return samples
