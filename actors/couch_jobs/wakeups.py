"""Cross-process wake-ups: the node's ``couch_jobs_wakeups`` hub.

The seed's workers block on FoundationDB watches, which fire in every
process of every node.  SQLite has no watches, so each process's store
commit listener casts the job types its commit touched to this hub (one
registered actor in the node process), and the hub re-broadcasts them to
the `ProcessAgent` of every process that uses couch_jobs; each agent wakes
its own process's blocked `accept`/`wait` callers and type monitors.

The hub holds no job state: if it restarts, the agents (which monitor it)
subscribe again and the bounded-interval re-check of blocked callers
covers the gap.
"""

from __future__ import annotations

import logging
from typing import Any

from actors import ActorRef, GenServer, Stop

from .naming import HUB_NAME, register_self

__all__ = ["HUB_NAME", "WakeupHub"]

_log = logging.getLogger(__name__)


class WakeupHub(GenServer):
    """Fan "these job types changed" out to every subscribed process agent.

    Protocol: call ``["subscribe", agent_ref]`` (answers "ok"), cast
    ``["changed", [type_key, ...]]``.  Agents are monitored and dropped when
    they die.  Anything else crashes the hub, like the seed's servers.
    """

    def init(self) -> None:
        register_self(self, HUB_NAME)
        self.agents: dict[Any, ActorRef] = {}  # monitor ref -> agent
        self.forwarded = 0

    def handle_call(self, request: Any, from_: Any) -> Any:
        if _is(request, "subscribe", 2) and isinstance(request[1], ActorRef):
            agent = request[1]
            if agent not in self.agents.values():
                self.agents[self.monitor(agent)] = agent
            return "ok"
        if _is(request, "agents", 1):
            return list(self.agents.values())
        return Stop(("bad_call", request), reply=("bad_call", request))

    def handle_cast(self, request: Any) -> Any:
        if _is(request, "changed", 2):
            keys = list(request[1])
            message = ["changed", keys]
            for agent in list(self.agents.values()):
                agent.cast(message)
            self.forwarded += 1
            return None
        return Stop(("bad_cast", request))

    def handle_info(self, message: Any) -> Any:
        if _is(message, "DOWN", 4):
            self.agents.pop(message[1], None)
            return None
        return Stop(("bad_info", message))


def _is(message: Any, tag: str, size: int) -> bool:
    """``message`` is a list/tuple of ``size`` items starting with ``tag``.

    Messages between processes arrive as lists (orjson) or tuples (pickle),
    so handlers accept both.
    """
    return isinstance(message, (list, tuple)) and len(message) == size and message[0] == tag
