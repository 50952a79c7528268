"""Actors the cluster-wide-name heal tests start on the nodes (importable by name on every host)."""

from __future__ import annotations

import time
from typing import Any

from actors import ActorRef, GenServer, global_names
from tests.cluster.dist_actors import Worker

__all__ = ["NameAgent", "NameHolder"]


class NameHolder(Worker):
    """An actor that holds a global name: a class of its own, so it can be counted across the nodes."""


class NameAgent(GenServer):
    """Uses `actors.global_names` on its node for the test (its calls must run inside an actor):

    * ``("register", name, ref)`` -> what ``register`` answers; the agent then monitors ``ref``;
    * ``("sample", name)`` -> ``(t0, nodes_before, holder, nodes_after, t1)``: ``whereis(name)``
      bracketed by ``time.monotonic()`` (one clock on one machine: the samples of every host
      compare), and those by the nodes this node lists just before and just after;
    * ``("down", ref)`` -> the exit reason of a monitored holder, or None while it lives."""

    def init(self) -> None:
        self.downs: dict[ActorRef, Any] = {}

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request[0] == "register":
            self.monitor(request[2])
            return global_names.register(request[1], request[2])
        if request[0] == "sample":
            before = sorted(self.nodes())
            t0 = time.monotonic()
            holder = global_names.whereis(request[1])
            t1 = time.monotonic()
            return (t0, before, holder, sorted(self.nodes()), t1)
        if request[0] == "down":
            return self.downs.get(request[1])
        raise ValueError(request)

    def handle_info(self, message: Any) -> None:
        if type(message) is tuple and message and message[0] == "DOWN":
            self.downs[message[2]] = message[3]
