"""Entities the sharding tests run, importable by the test and its node processes."""

from __future__ import annotations

from typing import Any

from actors.sharding import EntityContext


class Counter:
    """A counter per key; with a store, every increment is saved (fenced) before it is acknowledged."""

    def __init__(self, context: EntityContext) -> None:
        self.context = context
        self.n = (context.load() or 0) if context.has_store else 0

    def handle_call(self, request: Any) -> Any:
        if request == "get":
            return self.n
        if request == "where":
            return self.context.ref.node_id.partition("@")[0]
        if request == "boom":
            raise RuntimeError("boom")
        if request == "passivate":
            self.context.passivate()
            return "ok"
        if self.context.has_store:
            self.context.save(self.n + request)  # refused (Fenced) when the shard moved on
        self.n += request
        return self.n

    def handle_cast(self, request: Any) -> None:
        self.n += request
