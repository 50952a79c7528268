"""Actors the distribution tests start on other nodes (importable by name on every node)."""

from __future__ import annotations

import os
from typing import Any

from actors import GenServer, Stop, noreply


class Worker(GenServer):
    """Answers pings, keeps what it is cast, crashes on demand."""

    def init(self, tag: str = "w") -> None:
        self.tag = tag
        self.seen: list[Any] = []

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "ping":
            return ("pong", self.tag, os.getpid())
        if request == "seen":
            return list(self.seen)
        if request == "crash":
            raise RuntimeError("asked to crash")
        if request == "hang":
            return noreply
        if isinstance(request, tuple) and request[0] == "echo":
            return request[1]
        if isinstance(request, tuple) and request[0] == "stop":
            return Stop(request[1], "stopping")
        return ("unknown", request)

    def handle_cast(self, request: Any) -> None:
        self.seen.append(("cast", request))

    def handle_info(self, message: Any) -> None:
        self.seen.append(("info", message))


class Watcher(GenServer):
    """Monitors what it is told to and keeps the DOWNs and nodedowns it gets."""

    def init(self) -> None:
        self.got: list[Any] = []

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request[0] == "monitor":
            return self.monitor(request[1])
        if request[0] == "monitor_node":
            self.monitor_node(request[1])
            return "ok"
        if request[0] == "link":
            self.trap_exit = True
            self.link(request[1])
            return "ok"
        if request[0] == "got":
            return list(self.got)
        return None

    def handle_info(self, message: Any) -> None:
        self.got.append(message)
