"""The coordinator: the one table ``shard -> region`` a sharded type's cluster agrees on.

Every node runs one per type; only the leader's is active (the leader is
the node whose name sorts first among the nodes whose region hosts shards;
each region tells its own coordinator whether it leads).  The active one:

- learns the regions from their ``register`` (each says which shards it
  holds), and before it answers anything waits until every region the
  leader knows has registered (or `SETTLE` seconds passed), so a new
  coordinator never hands out a shard a region already holds;
- gives a homeless shard to the least loaded region (`placement.allocate`)
  and tells every region its home;
- on a region's loss gives its shards to the others at once;
- every ``rebalance_every`` seconds, when no hand-off is in flight, moves at
  most ``moves_per_round`` shards (`placement.rebalance`): every region first
  stops routing to the shard (``begin_handoff``, messages buffer), the
  source stops the shard's entities and releases its lease
  (``handed_off``), and only then is the new home announced.  A source
  that does not answer within ``handoff_timeout`` seconds (an entity stuck
  in a long call, a message lost) no longer holds up other rounds: with a
  store the target is named home at once, and serves only once it gets the
  shard's lease, which the old holder keeps until it lets go or its lease
  expires; without a store the shard stays where it is until its old node
  answers or is lost (placing it elsewhere could run its keys twice).

Leadership can flip quickly (a peer seen, then lost, then seen again):
every timer carries the generation of the leadership that set it, and a
timer of an earlier generation is dropped, so one chain of rebalance
rounds runs at a time.

With ``remember`` and no store it also keeps each shard's remembered
entities (its region sends every change, and the whole set when it
registers) and sends them to the shard's next home with its announcement:
so a shard whose node is lost comes back with its entities, unless that
node was the leader (its coordinator's copy goes with it).

It keeps nothing the regions do not also hold: a coordinator that crashes
is restarted by the type's supervisor and rebuilt from the regions'
registrations, so its crash loses nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from actors import ActorRef, GenServer
from actors.gen_server import PREVIOUS_HOLDER_WAIT

from .names import TAG, coordinator_name
from .placement import allocate, rebalance
from .settings import Settings

__all__ = ["HANDOFF_TIMEOUT", "SETTLE", "Coordinator"]

log = logging.getLogger("actors.sharding")

#: Seconds a new active coordinator waits for every known region to register.
SETTLE = 2.0
#: Seconds a hand-off's source has to stop the shard's entities before the round goes on without it.
HANDOFF_TIMEOUT = 10.0


class Coordinator(GenServer):
    def init(self, type_name: str, settings: Settings, handoff_timeout: float = HANDOFF_TIMEOUT) -> None:
        self.type_name = type_name
        self.settings = settings
        self.handoff_timeout = handoff_timeout
        self.generation = 0  # of the leadership: timers of an earlier one are dropped
        self.register(coordinator_name(type_name), wait=PREVIOUS_HOLDER_WAIT)
        self.active = False
        self._reset()
        regions = self.whereis(f"$sharding.{type_name}")
        if regions is not None:  # restarted under a running region: ask it who leads
            regions.send((TAG, "coordinator_up"))

    def _reset(self) -> None:
        self.regions: dict[ActorRef, str] = {}  # hosting regions -> node
        self.proxies: set[ActorRef] = set()
        self.monitors: dict[ActorRef, Any] = {}
        self.alloc: dict[int, ActorRef] = {}
        self.moving: dict[int, tuple[ActorRef, ActorRef]] = {}
        self.stalled: set[int] = set()  # moves whose source did not answer in time (no store)
        self.rounds = 0  # rebalance rounds of this leadership (a statistic)
        self.waiting: set[ActorRef] = set()
        self.queued: list[tuple[int, ActorRef]] = []
        self.remembered: dict[int, set[Any]] = {}  # no store: shard -> keys its next home starts
        self.ready = False

    # -- leadership ----------------------------------------------------------------------

    def _lead(self, active: bool, hosting: list[ActorRef]) -> None:
        if active == self.active:
            if active and not self.ready:
                self.waiting &= set(hosting)
                self._maybe_ready()
            return
        self.active = active
        self.generation += 1
        self._reset()
        if active:
            self.waiting = set(hosting)
            self.send_after(SETTLE, (TAG, "settled", self.generation))
            self.send_after(self.settings.rebalance_every, (TAG, "rebalance", self.generation))
            log.info("sharding %s: coordinator active, waiting for %d regions", self.type_name, len(hosting))

    def _maybe_ready(self) -> None:
        if self.ready or self.waiting:
            return
        self.ready = True
        queued, self.queued = self.queued, []
        for shard, asker in queued:
            self._get_home(shard, asker)

    # -- the table -------------------------------------------------------------------------

    def _everyone(self) -> list[ActorRef]:
        return [*self.regions, *self.proxies]

    def _announce(self, shard: int) -> None:
        home = self.alloc.get(shard)
        for region in self._everyone():
            region.send((TAG, "home", shard, home))
        keys = self.remembered.get(shard)
        if home is not None and keys:
            home.send((TAG, "recall", shard, list(keys)))  # after "home": the shard is active there

    def _place(self, shard: int, avoid: ActorRef | None = None) -> None:
        self.alloc[shard] = allocate(self.alloc, self.regions, avoid)
        self._announce(shard)

    def _register(
        self, region: ActorRef, node: str, proxy: bool, held: list[int], remembered: dict[int, list[Any]]
    ) -> None:
        if region not in self.monitors:
            self.monitors[region] = self.monitor(region)
        if proxy:
            self.proxies.add(region)
        else:
            self.regions[region] = node
        for shard in held:
            owner = self.alloc.get(shard)
            if owner is not None and owner != region and shard not in self.moving:
                region.send((TAG, "handoff", shard))  # held twice (a split healed): the first stays
            elif owner is None:
                self.alloc[shard] = region
            if self.alloc.get(shard) == region and shard in remembered:
                self.remembered[shard] = set(remembered[shard])
        region.send((TAG, "welcome", dict(self.alloc)))
        self.waiting.discard(region)
        self._maybe_ready()
        if self.ready and self.regions:
            queued, self.queued = self.queued, []
            for shard, asker in queued:
                self._get_home(shard, asker)

    def _get_home(self, shard: int, asker: ActorRef) -> None:
        if not self.ready or not self.regions:
            self.queued.append((shard, asker))
            return
        if shard in self.moving:
            return  # announced when the hand-off completes
        if shard in self.alloc:
            asker.send((TAG, "home", shard, self.alloc[shard]))
            return
        self._place(shard)

    def _lost(self, region: ActorRef) -> None:
        self.monitors.pop(region, None)
        self.proxies.discard(region)
        self.waiting.discard(region)
        if self.regions.pop(region, None) is None:
            self._maybe_ready()
            return
        orphans = [s for s, r in self.alloc.items() if r == region]
        for shard in orphans:
            del self.alloc[shard]
        for shard, (source, target) in list(self.moving.items()):
            if region in (source, target):
                del self.moving[shard]
                self.stalled.discard(shard)
                self.alloc.pop(shard, None)
                orphans.append(shard)
        self._maybe_ready()
        if self.regions:
            for shard in sorted(set(orphans)):
                self._place(shard)

    def _rebalance(self) -> None:
        self.send_after(self.settings.rebalance_every, (TAG, "rebalance", self.generation))
        self.rounds += 1
        if not self.ready or set(self.moving) - self.stalled:
            return
        settled = {s: r for s, r in self.alloc.items() if s not in self.moving}
        for move in rebalance(settled, self.regions, self.settings.moves_per_round):
            source, target = self.alloc[move.shard], move.target
            self.moving[move.shard] = (source, target)  # type: ignore[assignment]
            for region in self._everyone():
                region.send((TAG, "begin_handoff", move.shard))
            source.send((TAG, "handoff", move.shard))
            self.send_after(self.handoff_timeout, (TAG, "handoff_timeout", self.generation, move.shard, source))

    def _handoff_timeout(self, shard: int, source: ActorRef) -> None:
        """``source`` did not hand ``shard`` off in time: see the module's docstring."""
        move = self.moving.get(shard)
        if move is None or move[0] != source or shard in self.stalled:
            return
        log.warning(
            "sharding %s: shard %s not handed off by %s within %.1f s",
            self.type_name,
            shard,
            source,
            self.handoff_timeout,
        )
        if self.settings.store is None:
            self.stalled.add(shard)  # until its source answers or is lost
            return
        del self.moving[shard]
        self.alloc[shard] = move[1] if move[1] in self.regions else allocate(self.alloc, self.regions)
        self._announce(shard)

    def _handed_off(self, shard: int, region: ActorRef) -> None:
        if shard in self.moving:
            self.stalled.discard(shard)
            source, target = self.moving.pop(shard)
            if target not in self.regions:
                del self.alloc[shard]
                self._place(shard)
                return
            self.alloc[shard] = target
            self._announce(shard)
        elif self.alloc.get(shard) == region:  # it lost the shard (its lease): place it elsewhere
            del self.alloc[shard]
            self._place(shard, avoid=region)

    # -- messages --------------------------------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "table":
            return {
                "active": self.active,
                "ready": self.ready,
                "regions": {r.node_id if hasattr(r, "node_id") else str(r): n for r, n in self.regions.items()},
                "shards": {n: sorted(s for s, r in self.alloc.items() if r == ref) for ref, n in self.regions.items()},
                "moving": sorted(self.moving),
                "rounds": self.rounds,
            }
        raise ValueError(f"unknown request {request!r}")

    def handle_info(self, message: Any) -> None:
        if type(message) is not tuple or not message:
            return
        if message[0] == "DOWN":
            self._lost(message[2])
            return
        if message[0] != TAG:
            return
        kind = message[1]
        if kind == "leader":
            self._lead(message[2], message[3])
        elif not self.active:
            return  # a region that still thinks this node leads: it learns otherwise soon
        elif kind == "register":
            self._register(message[2], message[3], message[4], message[5], message[6] if len(message) > 6 else {})
        elif kind == "remember":
            _, _, shard, key, add, region = message
            if self.alloc.get(shard) == region:  # from the shard's holder only
                keys = self.remembered.setdefault(shard, set())
                if add:
                    keys.add(key)
                else:
                    keys.discard(key)
        elif kind == "get_home":
            self._get_home(message[2], message[3])
        elif kind == "handed_off":
            self._handed_off(message[2], message[3])
        elif kind in ("rebalance", "settled", "handoff_timeout") and message[2] != self.generation:
            return  # set by an earlier leadership
        elif kind == "rebalance":
            self._rebalance()
        elif kind == "handoff_timeout":
            self._handoff_timeout(message[3], message[4])
        elif kind == "settled":
            if self.waiting:
                log.warning("sharding %s: %d regions did not register in time", self.type_name, len(self.waiting))
            self.waiting.clear()
            self._maybe_ready()
