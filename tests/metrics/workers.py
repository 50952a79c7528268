"""Actors the metrics tests run in host processes (importable there by name)."""

from __future__ import annotations

from typing import Any

from actors import GenServer


class Worker(GenServer):
    """Answers every call with its argument; counts casts."""

    def init(self) -> None:
        self.casts = 0

    def handle_call(self, request: Any, from_: Any) -> Any:
        return request if request != "casts" else self.casts

    def handle_cast(self, request: Any) -> None:
        self.casts += 1
