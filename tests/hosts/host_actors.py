"""Actors the namespace-host tests start on the nodes (importable by name on every host)."""

from __future__ import annotations

import time
from typing import Any

from actors import Exit, GenServer
from supervision import ChildSpec, Supervisor, SupFlags
from tests.cluster.dist_actors import Worker

__all__ = ["Caller", "Singleton", "SingletonSup", "Worker"]


class Singleton(Worker):
    """The child of `SingletonSup`: a class of its own, so it can be counted across the nodes."""


class Caller(GenServer):
    """Makes calls from its node: ``("call", ref, request, timeout)`` answers ``("ok", reply, seconds)``
    or ``("exit", reason, seconds)`` (the test's own view of a node reaches only that node's actors)."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        _, ref, message, timeout = request
        start = time.monotonic()
        try:
            return ("ok", ref.call(message, timeout=timeout), time.monotonic() - start)
        except Exit as exc:
            return ("exit", exc.reason, time.monotonic() - start)


class SingletonSup(Supervisor):
    """One `Worker` ("singleton"), placed on the first of ``nodes`` that is up, restarted on
    the next one when its node is lost: the child that must never run twice."""

    def init(self, nodes: list[str]) -> Any:
        return SupFlags(intensity=20, period=10), [
            ChildSpec("singleton", (Singleton, ("singleton",)), node=nodes, host="own")
        ]
