"""Actors the distribution tests start on other nodes (importable by name on
every node), and the waits the tests drive them with."""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

import actors
from actors import ActorRef, GenServer, Stop, noreply
from tests.kernel.probes import call_in_thread


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


def watched(watcher: ActorRef, n: int, timeout: float = 10.0) -> list[Any]:
    """What a `Watcher` received, once it holds at least ``n`` messages (or
    what it holds after ``timeout``: the caller's asserts say what is missing).
    Each try is a call to the watcher; bounded in time and in tries."""
    deadline = time.monotonic() + timeout
    got: list[Any] = watcher.call(("got",))
    for _ in range(1_000_000):
        if len(got) >= n or time.monotonic() >= deadline:
            break
        got = watcher.call(("got",))
    return got


@dataclass
class WatchedWorker:
    """A `Worker` on another node, watched every way this node can: a
    monitor, a node monitor, a `Watcher` linked to it that monitors its node,
    and a call hanging in it (its outcome goes to ``results``)."""

    worker: ActorRef
    mon: Any
    nodemon: Any
    watcher: ActorRef
    results: "queue.Queue[Any]"
    thread: threading.Thread

    @classmethod
    def start(cls, node: Any, peer: str, *args: Any) -> "WatchedWorker":
        worker = node.spawn(Worker, *args, node=peer, host="own")
        mon = node.monitor(worker)
        nodemon = node.monitor_node(peer)
        watcher = node.spawn(Watcher, host="own")
        watcher.call(("monitor_node", peer))
        watcher.call(("link", worker))
        results: queue.Queue[Any] = queue.Queue()
        thread = call_in_thread(worker, "hang", 30.0, results)  # never answered
        assert worker.call("ping")[0] == "pong"  # the hanging call went out before this one
        return cls(worker, mon, nodemon, watcher, results, thread)


class NodesWatcher(GenServer):
    """Subscribes to every nodeup/nodedown (``monitor_nodes``) and answers
    ``("await", n)`` once it holds n events, so a test waits on messages."""

    def init(self, subscribe: bool = True) -> None:
        self.events: list[Any] = []
        self.waiting: list[tuple[int, Any]] = []
        if subscribe:
            self.monitor_nodes()

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request[0] == "await":
            if len(self.events) >= request[1]:
                return list(self.events)
            self.waiting.append((request[1], from_))
            return noreply
        if request[0] == "monitor_nodes":
            self.monitor_nodes(request[1])
            return "ok"
        if request[0] == "whereis":
            return self.whereis(request[1], node=request[2])
        if request[0] == "api_whereis":  # the process-level function, as library code calls it
            return actors.whereis(request[1], node=request[2])
        if request[0] == "nodes":
            return self.nodes()
        return None

    def handle_info(self, message: Any) -> None:
        self.events.append(message)
        still = []
        for count, from_ in self.waiting:
            if len(self.events) >= count:
                self.reply(from_, list(self.events))
            else:
                still.append((count, from_))
        self.waiting = still
