"""The sharded counter the namespace-host nodes run (``[sharding] types``), and the sampler that
reads, inside a node's process, which keys it serves now and since when.

Sampling is what the single-activation check rests on, so it says no more
than the node knows: a key is *served* when its entity is active in the
region and its shard's lease has not passed its deadline (`Guard.expired`:
past it the entity runs none of the program's code, whatever its region has
yet to hear), and each served key comes with the wall-clock time its
current object was built.  All hosts share one kernel clock, so two nodes'
intervals ``[built, sampled]`` of one key may be compared: if they meet,
the key ran on both at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from actors import GenServer, whereis
from actors.sharding import EntityContext, shard_of
from actors.sharding import guard as guards
from actors.sharding.names import region_name

__all__ = ["SHARDS", "TYPE", "Counter", "Sampler"]

TYPE = "counter"
#: The nodes' ``[sharding] shards`` (the test writes it into their ini file).
SHARDS = 30
_built: dict[Any, float] = {}  # key -> when its current object was built, in this node process
_lock = threading.Lock()


class Counter:
    """One count per key; with a store every increment is saved (fenced) before it is acknowledged."""

    def __init__(self, context: EntityContext) -> None:
        with _lock:
            _built[context.key] = time.time()
        self.context = context
        self.n = (context.load() or 0) if context.has_store else 0

    def handle_call(self, request: Any) -> Any:
        if request == "get":
            return self.n
        if self.context.has_store:
            self.context.save(self.n + request)  # refused (Fenced) once the shard moved on
        self.n += request
        return self.n


class Sampler(GenServer):
    """``"sample"`` answers ``(sampled_at, {key: built_at})`` for the keys this node serves now."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request != "sample":
            raise ValueError(f"unknown request {request!r}")
        sampled = time.time()  # before the region's answer: the keys were served at least until then
        region = whereis(region_name(TYPE))
        if region is None:
            return sampled, {}
        status = region.call("status", timeout=2.0)
        guard = guards.find(TYPE)
        served: dict[Any, float] = {}
        with _lock:
            for key in status["active_keys"]:
                if guard is not None and guard.expired(shard_of(key, SHARDS)):
                    continue
                served[key] = _built.get(key, sampled)
        return sampled, served
