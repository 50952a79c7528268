"""An entity: the program's object for one key, run inside an actor its region starts.

The program gives a class; the region starts one `EntityServer` per active
key, which builds ``cls(context)`` and hands it the key's messages:
``handle_call(request)`` (its return value is the reply),
``handle_cast(request)``, ``handle_info(message)`` and, when it stops
(passivation, hand-off, shutdown), ``terminate(reason)`` -- each optional.

`EntityContext` is what the object may ask of the runtime: its key and
shard, its stored state (`load`/`save`, with a store: the write carries
the shard's fencing token) and `passivate` to stop itself when done.

Before every message the server looks at its shard's lease (`guard`):
past the deadline it stops without running the program's code, so a node
that thaws from a freeze or was cut from the store never serves a key that
another node may already serve.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from actors import GenServer, Stop
from actors.leases import Fenced

from . import guard as guards
from .names import TAG

__all__ = ["LEASE_EXPIRED", "PASSIVATED", "EntityContext", "EntityServer"]

#: Exit reason of an entity its region passivated (idle, LRU, hand-off): a shutdown, not an error.
PASSIVATED = ("shutdown", "passivated")
#: Exit reason of an entity whose shard's lease deadline passed before a message.
LEASE_EXPIRED = ("shutdown", "shard_lease_expired")
_TAG = TAG
#: An entity failing more than this many times within `RESTART_PERIOD` seconds stops.
RESTARTS = 5
RESTART_PERIOD = 5.0

log = logging.getLogger("actors.sharding")


class EntityContext:
    """What an entity may ask of the runtime about itself."""

    def __init__(self, type_name: str, key: str | int, shard: int, server: "EntityServer") -> None:
        self.type_name = type_name
        self.key = key
        self.shard = shard
        self._server = server

    @property
    def ref(self) -> Any:
        """The entity's actor (valid until it is passivated or moved)."""
        return self._server.ref

    @property
    def has_store(self) -> bool:
        """`load` and `save` are available (the type runs with a store)."""
        found = guards.find(self.type_name)
        return found is not None and found.state is not None

    def _guard(self) -> guards.Guard:
        found = guards.find(self.type_name)
        if found is None or found.state is None:
            raise RuntimeError(f"sharding {self.type_name!r} runs without a store: set [sharding] store")
        return found

    def load(self) -> Any:
        """The value last saved for this key (None when there is none)."""
        return self._guard().state.load(self.type_name, str(self.key))  # type: ignore[union-attr]

    def save(self, value: Any) -> None:
        """Store ``value`` (JSON) for this key, under the shard's fencing token:
        `actors.leases.Fenced` when this node no longer holds the shard."""
        found = self._guard()
        assert found.leases is not None and found.state is not None
        fence = found.leases.fence(guards.lease_name(self.type_name, self.shard))
        if fence is None or found.expired(self.shard):
            raise Fenced(
                guards.lease_name(self.type_name, self.shard), -1 if fence is None else fence.token, "not held"
            )
        found.state.save(self.type_name, str(self.key), value, fence)

    def passivate(self) -> None:
        """Ask the region to stop this entity: messages already sent to it are handled
        first, later ones wait in the region and start it again."""
        self._server.region.send((_TAG, "passivate_me", self.key, self._server.ref))


class EntityServer(GenServer):
    """The actor of one active entity.

    A failure in the program's code restarts the entity *in place*: its
    ``terminate`` runs, a new object is built from the class (reading its
    stored state again), and the messages queued behind the one that failed
    are handled by it -- none is lost to the crash.  A call that failed is
    answered with the failure.  More than `RESTARTS` failures within
    `RESTART_PERIOD` seconds stop the entity with the last one's reason (its
    region starts it again on the next message)."""

    def init(self, type_name: str, key: str | int, shard: int, cls: type, region: Any) -> None:
        self.type_name = type_name
        self.shard = shard
        self.region = region
        self.cls = cls
        self.crashes: list[float] = []
        self.guard = guards.find(type_name)
        self.context = EntityContext(type_name, key, shard, self)
        self.entity = cls(self.context)

    def _expired(self) -> bool:
        return self.guard is not None and self.guard.expired(self.shard)

    def handle_info(self, message: Any) -> Any:
        if self._expired():  # first thing: a thawed or cut-off holder must not serve
            return Stop(LEASE_EXPIRED)
        if type(message) is not tuple or len(message) < 2 or message[0] != _TAG:
            return self._run("handle_info", message)
        kind = message[1]
        if kind == "passivate":
            return Stop(PASSIVATED)
        payload = message[2]
        if kind == "call":
            reply_to, token = message[3], message[4]
            try:
                value = self.entity.handle_call(payload)
            except Exception as exc:  # noqa: BLE001 - answered, then restarted in place
                reply_to.send((_TAG, "reply", token, False, ("error", "entity_crashed", repr(exc))))
                return self._restart(exc)
            reply_to.send((_TAG, "reply", token, True, value))
            return None
        return self._run("handle_cast" if kind == "cast" else "handle_info", payload)

    def _run(self, callback: str, payload: Any) -> Any:
        handler = getattr(self.entity, callback, None)
        if handler is None:
            return None
        try:
            handler(payload)
        except Exception as exc:  # noqa: BLE001 - restarted in place
            return self._restart(exc)
        return None

    def _restart(self, exc: Exception) -> Any:
        now = time.monotonic()
        self.crashes = [t for t in self.crashes if now - t < RESTART_PERIOD] + [now]
        log.error("entity %s/%r crashed: %r", self.type_name, self.context.key, exc, exc_info=exc)
        self._terminate(("crash", repr(exc)))
        if len(self.crashes) > RESTARTS:
            del self.entity  # its terminate ran
            return Stop(("entity_crashed", repr(exc)))
        self.entity = self.cls(self.context)
        return None

    def _terminate(self, reason: Any) -> None:
        handler = getattr(self.entity, "terminate", None)
        if handler is None:
            return
        try:
            handler(reason)
        except Exception:  # noqa: BLE001 - a failing terminate is reported, never fatal here
            log.exception("entity %s/%r: terminate failed", self.type_name, self.context.key)

    def terminate(self, reason: Any) -> None:
        # Past its lease deadline the entity runs no more of the program's code.
        if hasattr(self, "entity") and reason != LEASE_EXPIRED:
            self._terminate(reason)
