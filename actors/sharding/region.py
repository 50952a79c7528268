"""A region: a node's part of one sharded type -- it routes, buffers and hosts.

Every message for an entity enters through its sender's node's region
(``deliver``) and goes region to region to the shard's home, then to the
entity; each hop keeps order, so what one sender sends one entity arrives
in the order sent.  A call's reply comes back the same way (the entity
answers the region the call entered, which answers the caller), so a
caller never waits on an actor that no longer exists without hearing why.

What the region holds:

- ``homes``: the home region of each shard it has heard of (from the
  coordinator).  A shard whose home is unknown, or that is being handed
  off, has its messages buffered (`buffer.Buffers`, bounded per shard)
  until the coordinator names its home.
- the shards it hosts: with a store, a shard is served only once its lease
  is granted (asked on a thread, so a slow store delays no other shard);
  renewals run on their own thread every ``renew_every``; a timer at the
  earliest deadline, and each entity before each message, stop a shard
  whose deadline passed.
- its active entities (`EntityServer`, linked to it): started on the first
  message for their key, passivated when idle or least recently used past
  ``max_active`` (`activity.Activity`); messages for an entity that is
  stopping wait for its exit and start it again.
- with ``remember``, the keys active in each hosted shard (``remembered``):
  added on activation, removed on passivation (idle, LRU, asked), kept
  through hand-off, loss and shutdown.  Without a store the coordinator
  keeps a copy (each change is sent to it) and sends the set to the
  shard's next home; with a store the set is a table written under the
  shard's fencing token, in order on one thread, and read by the next
  holder once its lease is granted.  Either way the new home starts those
  entities at once, without a message.
- its peers: the regions of the other nodes (found as `actors.pg` finds its
  peers: on ``nodeup``, by name), from which it derives the leader, whose
  coordinator it registers with.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from actors import ActorRef, CallTimeout, Exit, GenServer, Stop, is_normal_exit, noreply
from actors.api import node_id
from actors.gen_server import PREVIOUS_HOLDER_WAIT
from actors.leases import Fenced, LeaseSet, PgStore
from actors.stats import current as current_stats

from . import guard as guards
from . import metrics
from .activity import Activity
from .buffer import BufferFull, Buffers
from .entity import LEASE_EXPIRED, PASSIVATED, EntityServer
from .names import TAG, coordinator_name, region_name
from .placement import key_text, shard_of
from .settings import Settings
from .state import StateStore

__all__ = ["Region"]

log = logging.getLogger("actors.sharding")

#: Seconds between sweeps for idle entities (at most; less for a short ``idle``).
SWEEP_EVERY = 5.0


def _node_label(ident: str | None = None) -> str:
    """A node's name in its cluster, from its id (this node's by default; the id
    itself when it is not distributed)."""
    ident = node_id() if ident is None else ident
    name, at, _ = ident.rpartition("@")
    return name if at and name else ident


class Region(GenServer):
    def init(self, type_name: str, cls: type | None, settings: Settings, proxy: bool = False) -> None:
        if not proxy and cls is None:
            raise ValueError(f"sharding {type_name!r}: a region that hosts entities needs their class")
        self.trap_exit = True
        self.type_name = type_name
        self.cls = cls
        self.settings = settings
        self.proxy = proxy
        self.me = _node_label()
        self.register(region_name(type_name), wait=PREVIOUS_HOLDER_WAIT)
        self.stats = current_stats()
        self.coordinator_here = self.whereis(coordinator_name(type_name))
        # Routing.
        self.homes: dict[int, ActorRef] = {}
        self.asked: set[int] = set()
        self.moving: set[int] = set()
        self.buffers = Buffers(type_name, settings.buffer)
        self.tokens = itertools.count(1)
        self.pending: dict[int, tuple[Any, str | None]] = {}  # call token -> (caller, node it went to)
        # Hosting.
        self.hosted: dict[int, str] = {}  # shard -> "acquiring" | "active" | "handing_off"
        self.shard_keys: dict[int, set[Any]] = {}
        self.entities: dict[Any, ActorRef] = {}
        self.keys_of: dict[ActorRef, Any] = {}
        self.stopping: set[Any] = set()
        self.key_buffers = Buffers(type_name, settings.buffer)
        self.activity = Activity(settings.idle, settings.max_active)
        self.started_shards = 0  # shards this region began to host: what a move costs it
        # Remembered entities.
        self.remember = settings.remember and not proxy
        self.remembered: dict[int, set[Any]] = {}  # hosted shard -> keys to start again after a move
        self.recalled: dict[int, list[Any]] = {}  # keys to start once their shard is active here
        self.unwritten: dict[int, dict[Any, bool]] = {}  # with a store: changes not yet written
        self.writing = False
        self.store_jobs: queue.SimpleQueue[Any] | None = None
        # Leases.
        self.guard = guards.Guard(type_name, node=self.me)
        if settings.store is not None and not proxy:
            times = settings.times
            url = settings.store
            self.guard.leases = LeaseSet(lambda: PgStore(url, op_timeout=times.op_timeout), self.me, node_id(), times)
            self.guard.state = StateStore(url, times.op_timeout)
            self.send_after(times.renew_every, (TAG, "renew"))
        guards.install(self.guard)
        # Peers and the leader.
        self.peers: dict[str, tuple[ActorRef, ActorRef | None, bool]] = {
            self.me: (self.ref, self.coordinator_here, proxy)
        }
        self.peer_mons: dict[ActorRef, str] = {}
        self.leader: str | None = None
        self.coordinator: ActorRef | None = None
        self.monitor_nodes()
        # Tell this node's coordinator whether it leads before any peer hears of this region:
        # a peer that answers by registering with it must find it active, not drop the register.
        self._elect()
        for node in self.nodes():
            self._discover(node)
        if settings.idle is not None:
            self.send_after(min(SWEEP_EVERY, settings.idle / 2), (TAG, "sweep"))

    # -- peers and the leader -------------------------------------------------------------

    def _discover(self, node: str) -> None:
        try:
            peer = self.whereis(region_name(self.type_name), node=node)
        except (Exit, CallTimeout):
            return
        if peer is not None:
            peer.send((TAG, "hello", self.me, self.ref, self.coordinator_here, self.proxy, True))

    def _hello(self, node: str, region: ActorRef, coordinator: ActorRef | None, proxy: bool, answer: bool) -> None:
        known = self.peers.get(node)
        if known is None or known[0] != region:
            if known is not None:
                self.peer_mons.pop(known[0], None)
            self.peers[node] = (region, coordinator, proxy)
            self.peer_mons[region] = node
            self.monitor(region)
        if answer:
            region.send((TAG, "hello", self.me, self.ref, self.coordinator_here, self.proxy, False))
        self._elect()

    def _peer_down(self, region: ActorRef) -> None:
        node = self.peer_mons.pop(region, None)
        if node is None or self.peers.get(node, (None,))[0] != region:
            return
        del self.peers[node]
        for shard, home in list(self.homes.items()):
            if home == region:
                del self.homes[shard]
        for token, (caller, went) in list(self.pending.items()):
            if went == node:
                del self.pending[token]
                self.reply(caller, ("error", "noconnection", f"node {node} was lost before the entity replied"))
        self._elect()

    def _elect(self) -> None:
        hosting = sorted(n for n, (_, _, proxy) in self.peers.items() if not proxy)
        leader = hosting[0] if hosting else None
        if self.coordinator_here is not None:
            refs = [self.peers[n][0] for n in hosting]
            self.coordinator_here.send((TAG, "leader", leader == self.me, refs))
        if leader == self.leader:
            return
        self.leader = leader
        self.coordinator = None if leader is None else self.peers[leader][1]
        self._register()

    def _register(self) -> None:
        if self.coordinator is None:
            return
        held = [s for s, state in self.hosted.items() if state != "handing_off"]
        remembered = {s: sorted(self.remembered.get(s, ()), key=key_text) for s in held} if self.remember else {}
        self.coordinator.send((TAG, "register", self.ref, self.me, self.proxy, held, remembered))
        self.asked.clear()
        for shard in self.buffers.keys():
            self._ask(shard)

    def _ask(self, shard: Any) -> None:
        if shard not in self.asked and self.coordinator is not None:
            self.asked.add(shard)
            self.coordinator.send((TAG, "get_home", shard, self.ref))

    # -- routing ----------------------------------------------------------------------------

    def _route(self, item: tuple[Any, ...]) -> None:
        """``item`` is ``(key, shard, kind, payload, reply_to, token)``."""
        shard = item[1]
        home = None if shard in self.moving else self.homes.get(shard)
        if home is None:
            self._hold(shard, item)
            self._ask(shard)
        elif home == self.ref:
            self._host(item)
        else:
            home.send((TAG, "route", item))
            if item[2] == "call" and item[4] == self.ref:
                self.pending[item[5]] = (self.pending[item[5]][0], _node_label(home.node_id))

    def _hold(self, shard: Any, item: tuple[Any, ...], buffers: Buffers | None = None) -> None:
        try:
            (buffers or self.buffers).push(shard, item)
        except BufferFull as exc:
            metrics.count(self.stats, "dropped", self.type_name)
            self._fail(item, ("error", "buffer_full", str(exc)))
            return
        metrics.count(self.stats, "buffered", self.type_name)
        metrics.buffered(self.stats, self.type_name, len(self.buffers) + len(self.key_buffers))

    def _fail(self, item: tuple[Any, ...], answer: tuple[Any, ...]) -> None:
        key, _, kind, _, reply_to, token = item
        if kind != "call":
            log.warning("sharding %s: message to %r dropped: %s", self.type_name, key, answer[2])
        elif reply_to == self.ref:
            entry = self.pending.pop(token, None)
            if entry is not None:
                self.reply(entry[0], answer)
        else:
            reply_to.send((TAG, "reply", token, False, answer))

    def _flush(self, shard: int) -> None:
        items = self.buffers.take(shard)
        for item in items:
            self._route(item)
        if items:
            metrics.buffered(self.stats, self.type_name, len(self.buffers) + len(self.key_buffers))

    # -- hosting ----------------------------------------------------------------------------

    def _host(self, item: tuple[Any, ...]) -> None:
        key, shard = item[0], item[1]
        state = self.hosted.get(shard)
        if state is None:
            self._start_shard(shard)
            state = self.hosted[shard]
        if state == "active" and self.guard.expired(shard):
            self._lose(shard, "its lease deadline passed")
            state = None
        if state != "active":
            self._hold(shard, item)
            if state is None:
                self._ask(shard)
            return
        if key in self.stopping:
            self._hold(key, item, self.key_buffers)
            return
        entity = self.entities.get(key)
        if entity is None:
            entity = self._activate(key, shard)
            if entity is None:
                self._fail(item, ("error", "entity_failed", f"entity {key!r} failed to start"))
                return
        self.activity.touch(key, time.monotonic())
        entity.send((TAG, item[2], item[3], item[4], item[5]))
        if self.settings.max_active is not None and len(self.activity) > self.settings.max_active:
            self._sweep(time.monotonic())

    def _activate(self, key: Any, shard: int) -> ActorRef | None:
        try:
            ref = self.spawn(EntityServer, self.type_name, key, shard, self.cls, self.ref, link=True)
        except Exception as exc:  # noqa: BLE001 - the caller hears of it
            log.error("sharding %s: entity %r failed to start: %s", self.type_name, key, exc)
            return None
        assert ref is not None
        self.entities[key] = ref
        self.keys_of[ref] = key
        self.shard_keys.setdefault(shard, set()).add(key)
        metrics.count(self.stats, "activations", self.type_name)
        if self.remember:
            self._remembered(shard, key, True)
        return ref

    def _passivate(self, key: Any) -> None:
        entity = self.entities.get(key)
        if entity is None or key in self.stopping:
            return
        self.stopping.add(key)
        self.activity.forget(key)
        entity.send((TAG, "passivate"))

    def _sweep(self, now: float) -> None:
        for key in self.activity.due(now):
            self._passivate(key)

    def _entity_exit(self, entity: ActorRef, reason: Any) -> None:
        key = self.keys_of.pop(entity, None)
        if key is None:
            return
        del self.entities[key]
        self.stopping.discard(key)
        self.activity.forget(key)
        shard = shard_of(key, self.settings.shards)
        keys = self.shard_keys.get(shard)
        if keys is not None:
            keys.discard(key)
        if reason == PASSIVATED:
            metrics.count(self.stats, "passivations", self.type_name)
            if self.remember and self.hosted.get(shard) == "active":  # passivated, not moved: forgotten
                self._remembered(shard, key, False)
        elif not is_normal_exit(reason) and reason != LEASE_EXPIRED:
            log.error("sharding %s: entity %r stopped: %r", self.type_name, key, reason)
        for item in self.key_buffers.take(key):
            self._route(item)
        if self.hosted.get(shard) == "handing_off" and not keys:
            self._shard_stopped(shard)

    def _start_shard(self, shard: int) -> None:
        self.started_shards += 1
        leases = self.guard.leases
        if leases is None:
            self.hosted[shard] = "active"
            return
        self.hosted[shard] = "acquiring"
        name = guards.lease_name(self.type_name, shard)
        self._in_background(lambda: leases.try_acquire(name), (TAG, "acquired", shard))

    def _acquired(self, shard: int, ok: bool) -> None:
        if self.hosted.get(shard) != "acquiring":
            if ok and self.guard.leases is not None:  # given up meanwhile: give it back
                name = guards.lease_name(self.type_name, shard)
                self._in_background(lambda: self.guard.leases.release(name), None)  # type: ignore[union-attr]
            return
        if not ok:
            self.send_after(self.settings.times.renew_every, (TAG, "acquire", shard))
            return
        self.hosted[shard] = "active"
        recalled = self.recalled.pop(shard, None)
        if recalled:
            self._recall(shard, recalled)
        self._arm_deadline()
        self._flush(shard)
        if self.remember and self.guard.state is not None:
            state, type_name = self.guard.state, self.type_name
            self._in_background(lambda: state.remembered(type_name, shard), (TAG, "recall", shard))

    def _lose(self, shard: int, why: str) -> None:
        """Stop serving ``shard`` now (its lease is gone or past its deadline): its
        entities stop (each also stops itself before its next message) and the
        coordinator places it again."""
        log.error("sharding %s: shard %s stopped on %s: %s", self.type_name, shard, self.me, why)
        self.hosted.pop(shard, None)
        self.remembered.pop(shard, None)  # the next holder reads the set (a stale write would be fenced)
        self.unwritten.pop(shard, None)
        self.recalled.pop(shard, None)
        if self.guard.leases is not None:
            self.guard.leases.forget(guards.lease_name(self.type_name, shard))
        for key in list(self.shard_keys.get(shard, ())):
            self._passivate(key)
        self.homes.pop(shard, None)
        if self.coordinator is not None:
            self.coordinator.send((TAG, "handed_off", shard, self.ref))

    def _handoff(self, shard: int) -> None:
        if shard not in self.hosted:
            if self.coordinator is not None:
                self.coordinator.send((TAG, "handed_off", shard, self.ref))
            return
        self.hosted[shard] = "handing_off"
        self.moving.add(shard)
        self.homes.pop(shard, None)
        metrics.count(self.stats, "handoffs", self.type_name)
        keys = self.shard_keys.get(shard)
        if not keys:
            self._shard_stopped(shard)
            return
        for key in list(keys):
            self._passivate(key)

    def _shard_stopped(self, shard: int) -> None:
        """Every entity of a shard handed off has stopped (their ``terminate`` ran):
        give its lease back, then tell the coordinator it may start elsewhere."""
        del self.hosted[shard]
        self.shard_keys.pop(shard, None)
        self.remembered.pop(shard, None)  # the coordinator's copy or the store's goes with the shard
        self.recalled.pop(shard, None)
        coordinator = self.coordinator
        leases = self.guard.leases
        if leases is None:
            if coordinator is not None:
                coordinator.send((TAG, "handed_off", shard, self.ref))
            return
        name = guards.lease_name(self.type_name, shard)
        me = self.ref
        write = self._remember_job(shard)

        def release() -> None:
            if write is not None:
                write()
            leases.release(name, "handed off")
            if coordinator is not None:
                coordinator.send((TAG, "handed_off", shard, me))

        # After the shard's remembered set is written, under the lease still held.
        (self._in_order if self.remember else self._in_background)(release, None)

    # -- remembered entities -------------------------------------------------------------------

    def _remembered(self, shard: int, key: Any, add: bool) -> None:
        """``key`` joins (or leaves) ``shard``'s remembered set; the change goes to the
        coordinator (no store) or to the store's write queue."""
        keys = self.remembered.setdefault(shard, set())
        if (key in keys) == add:
            return
        if add:
            keys.add(key)
        else:
            keys.discard(key)
        if self.guard.state is None:
            if self.coordinator is not None:
                self.coordinator.send((TAG, "remember", shard, key, add, self.ref))
            return
        self.unwritten.setdefault(shard, {})[key] = add
        self._write_remembered()

    def _remember_job(self, shard: int) -> Callable[[], None] | None:
        """A write of ``shard``'s unwritten changes under its fence now, to run in order."""
        changes = self.unwritten.pop(shard, None)
        leases, state = self.guard.leases, self.guard.state
        if not changes or leases is None or state is None:
            return None
        fence = leases.fence(guards.lease_name(self.type_name, shard))
        if fence is None:
            return None
        type_name = self.type_name

        def write() -> None:
            try:
                state.remember(type_name, shard, changes, fence)
            except Fenced as exc:  # the shard moved on: its new holder's set stands
                log.warning("sharding %s: remembered entities of shard %s not written: %s", type_name, shard, exc)

        return write

    def _write_remembered(self) -> None:
        """One batch of changes at a time, so the set in the store is written in order."""
        if self.writing or not self.unwritten:
            return
        jobs = [job for job in (self._remember_job(shard) for shard in list(self.unwritten)) if job is not None]
        if not jobs:
            return
        self.writing = True

        def write_all() -> bool:
            for job in jobs:
                job()
            return True

        self._in_order(write_all, (TAG, "remember_written"))

    def _recall(self, shard: int, keys: list[Any]) -> None:
        """Start ``shard``'s remembered entities (those not active already)."""
        if not self.remember:
            return
        if self.hosted.get(shard) != "active":
            if shard in self.hosted or self.homes.get(shard) == self.ref:
                self.recalled.setdefault(shard, []).extend(keys)  # once its lease is granted
            return
        self.remembered.setdefault(shard, set()).update(keys)  # known to the store or the coordinator
        now = time.monotonic()
        for key in keys:
            if key in self.entities or key in self.stopping or shard_of(key, self.settings.shards) != shard:
                continue
            if self._activate(key, shard) is not None:
                self.activity.touch(key, now)

    def _in_order(self, work: Callable[[], Any], answer: tuple[Any, ...] | None) -> None:
        """As `_in_background`, but one job after another on one thread: a shard's
        remembered set is written before its lease is given back."""
        if self.store_jobs is None:
            self.store_jobs = queue.SimpleQueue()
            jobs = self.store_jobs
            me, type_name = self.ref, self.type_name

            def serve() -> None:
                for _ in range(1 << 62):  # until the region stops (None): one job per turn
                    job = jobs.get()
                    if job is None:
                        return
                    run, reply = job
                    try:
                        result = run()
                    except Exception:  # noqa: BLE001 - reported; the answer says it failed
                        log.exception("sharding %s: store operation failed", type_name)
                        result = False
                    if reply is not None:
                        me.send((*reply, result))

            threading.Thread(target=serve, name=f"sharding-{type_name}-writes", daemon=True).start()
        self.store_jobs.put((work, answer))

    # -- leases -------------------------------------------------------------------------------

    def _in_background(self, work: Callable[[], Any], answer: tuple[Any, ...] | None) -> None:
        """Run ``work`` (a store operation, bounded by its timeout) off this actor, and
        send ``answer + (result,)`` back: the region keeps routing meanwhile."""
        me = self.ref

        def run() -> None:
            try:
                result = work()
            except Exception:  # noqa: BLE001 - reported; the answer says it failed
                log.exception("sharding %s: store operation failed", self.type_name)
                result = False
            if answer is not None:
                me.send((*answer, result))

        threading.Thread(target=run, name=f"sharding-{self.type_name}", daemon=True).start()

    def _renew(self) -> None:
        leases = self.guard.leases
        assert leases is not None
        self.send_after(leases.times.renew_every, (TAG, "renew"))
        me = self.ref
        leases.renew_in_background(lambda lost: me.send((TAG, "renewed", lost)))

    def _renewed(self, lost: set[str] | None) -> None:
        if lost:
            for shard, state in list(self.hosted.items()):
                if state == "active" and guards.lease_name(self.type_name, shard) in lost:
                    self._lose(shard, "another node holds its lease")
        self._check_deadlines()

    def _arm_deadline(self) -> None:
        leases = self.guard.leases
        if leases is None:
            return
        deadline = leases.next_deadline()
        if deadline is not None:
            self.send_after(max(0.0, deadline - leases.clock()) + 0.001, (TAG, "deadline"))

    def _check_deadlines(self) -> None:
        for shard, state in list(self.hosted.items()):
            if state == "active" and self.guard.expired(shard):
                self._lose(shard, "its lease deadline passed without a renewal")
        self._arm_deadline()

    # -- messages -----------------------------------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        if type(request) is tuple and request and request[0] == "deliver":
            _, key, payload = request
            token = next(self.tokens)
            self.pending[token] = (from_, None)
            self._route((key, shard_of(key, self.settings.shards), "call", payload, self.ref, token))
            return noreply
        if request == "status":
            return self.status()
        raise ValueError(f"unknown request {request!r}")

    def handle_cast(self, request: Any) -> None:
        if type(request) is tuple and len(request) == 4 and request[0] == "deliver":
            _, key, kind, payload = request
            self._route((key, shard_of(key, self.settings.shards), kind, payload, None, None))

    def handle_info(self, message: Any) -> Any:
        if type(message) is not tuple or not message:
            return None
        head = message[0]
        if head == TAG:
            return self._tagged(message)
        if head == "EXIT":
            if message[1] in self.keys_of:
                self._entity_exit(message[1], message[2])
                return None
            if message[1] == self.parent:
                return Stop(message[2])
            return None
        if head == "DOWN":
            self._peer_down(message[2])
        elif head == "nodeup":
            self._discover(message[1])
        return None

    def _tagged(self, message: tuple[Any, ...]) -> None:
        kind = message[1]
        if kind == "route":
            item = message[2]
            if self.hosted.get(item[1]) is not None or self.homes.get(item[1]) == self.ref:
                self._host(item)
            else:  # not (or no longer) here: hold it until the coordinator says where
                self.homes.pop(item[1], None)
                self._hold(item[1], item)
                self._ask(item[1])
        elif kind == "reply":
            _, _, token, ok, value = message
            entry = self.pending.pop(token, None)
            if entry is not None:
                self.reply(entry[0], ("ok", value) if ok else value)
        elif kind == "home":
            shard, home = message[2], message[3]
            self.asked.discard(shard)
            self.moving.discard(shard)
            if home is None:
                self.homes.pop(shard, None)
            else:
                self.homes[shard] = home
                if home == self.ref and shard not in self.hosted:
                    self._start_shard(shard)
            self._flush(shard)
        elif kind == "welcome":
            for shard, home in message[2].items():
                if shard not in self.moving:
                    self.homes[shard] = home
            for shard in list(self.buffers.keys()):
                if shard in self.homes:
                    self.asked.discard(shard)
                    self._flush(shard)
        elif kind == "begin_handoff":
            self.moving.add(message[2])
            self.homes.pop(message[2], None)
        elif kind == "handoff":
            self._handoff(message[2])
        elif kind == "hello":
            self._hello(*message[2:])
        elif kind == "coordinator_up":
            self.coordinator_here = self.whereis(coordinator_name(self.type_name))
            self.peers[self.me] = (self.ref, self.coordinator_here, self.proxy)
            for region, _, _ in self.peers.values():
                if region != self.ref:
                    region.send((TAG, "hello", self.me, self.ref, self.coordinator_here, self.proxy, False))
            self.leader = None
            self._elect()
        elif kind == "passivate_me":
            if self.entities.get(message[2]) == message[3]:
                self._passivate(message[2])
        elif kind == "sweep":
            self._sweep(time.monotonic())
            assert self.settings.idle is not None
            self.send_after(min(SWEEP_EVERY, self.settings.idle / 2), (TAG, "sweep"))
        elif kind == "acquired":
            self._acquired(message[2], bool(message[3]))
        elif kind == "acquire":
            if self.hosted.get(message[2]) == "acquiring":
                leases = self.guard.leases
                assert leases is not None
                name = guards.lease_name(self.type_name, message[2])
                self._in_background(lambda: leases.try_acquire(name), (TAG, "acquired", message[2]))
        elif kind == "renew":
            self._renew()
        elif kind == "renewed":
            self._renewed(message[2])
        elif kind == "deadline":
            self._check_deadlines()
        elif kind == "recall":
            self._recall(message[2], list(message[3] or ()))
        elif kind == "remember_written":
            self.writing = False
            self._write_remembered()

    def status(self) -> dict[str, Any]:
        """What `actors.sharding.status` and the observer show of this node's region."""
        return {
            "type": self.type_name,
            "node": self.me,
            "proxy": self.proxy,
            "leader": self.leader,
            "shards": sorted(s for s, state in self.hosted.items() if state == "active"),
            "active_entities": len(self.entities),
            "remember": self.remember,
            "remembered": sum(len(keys) for keys in self.remembered.values()),
            "remember_unwritten": sum(len(c) for c in self.unwritten.values()) + int(self.writing),
            "shards_started": self.started_shards,
            "active_keys": sorted(self.entities, key=key_text)[:1000],
            "buffered": len(self.buffers) + len(self.key_buffers),
            "peers": sorted(self.peers),
            "store": self.guard.leases is not None,
        }

    def format_status(self, status: dict[str, Any]) -> dict[str, Any]:
        summary = self.status()
        summary.pop("active_keys")
        status["sharding"] = summary
        return status

    def terminate(self, reason: Any) -> None:
        for token, (caller, _) in list(self.pending.items()):
            self.reply(caller, ("error", "region_stopped", f"the region stopped ({reason!r}) before the reply"))
        self.pending.clear()
        for entity in list(self.entities.values()):
            self.exit(entity, "shutdown")
        guards.drop(self.guard)
        if self.store_jobs is not None:  # the writes queued so far, then the last changes, under the leases
            self.store_jobs.put(None)
        for shard in list(self.unwritten):
            job = self._remember_job(shard)
            if job is not None:
                job()
        if self.guard.leases is not None:
            for name in self.guard.leases.held():
                self.guard.leases.release(name, "region stopped")
            self.guard.leases.close()
        if self.guard.state is not None:
            self.guard.state.close()
