"""Names across the cluster: Erlang's ``global``, with its lock and its clash rule.

``register(name, ref)`` gives ``ref`` a name every node resolves
(``whereis(name)`` on any node); of many concurrent registrations of one
name, on any nodes, exactly one succeeds.  The name is released when its
holder dies or its node goes down, and ``unregister`` releases it.

How: every node runs a `NameServer` holding a full copy of the table.  A
registration locks the name in the copy of every node this node knows,
one after another in the order of the node names (so the first node of
that order serialises registrants, as ``global``'s "boss" node does),
reads each copy's holder, and writes the holder into every copy only when
all of them said the name was free; a registrant that finds a lock taken
releases what it holds and tries again after a short random wait.  Every
copy monitors every holder, so a holder's death, or its node's loss,
frees the name in every copy that sees it (a monitor that never waits on
the holder's node; a holder on a node not connected yet is watched once
that node is up).

Partitions: the nodes on each side of a cut see the other side's holders
go (``noconnection``), so each side may register a name anew.  Nodes that
meet again (a cut that heals, or two groups of nodes started apart that
connect) exchange their copies of the table; for a name held on both sides the holder on
the node whose name sorts first keeps it (`actors._core.cluster.global_state.keeps`,
the same answer on every node) and the other is sent an exit signal with
reason ``("global_name_conflict", name)``, which its supervisor sees as an
ordinary abnormal exit.  Erlang's default (``random_exit_name``) kills one
at random; this rule is deterministic.  Every node's copy holds one holder
per name at every moment; a node that has not heard of the other side yet
answers with its own side's holder until the exchange reaches it.

Meeting: the copies are exchanged in the handshake itself
(`actors._core.node.greeting`): each node merges the other's copy, clash
resolved, before it lists the other in ``nodes()`` or tells anyone of its
``nodeup``.  So two nodes that list each other never answer two holders
because one of them has not heard of the other's copy.  ``whereis`` is
answered by the node process from its copy, never queued behind the
server's work, so a node cut off from the others answers at once from what
it holds.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from actors._core.cluster.global_state import NameTable, node_name_of
from actors._core.node import greeting
from actors._core.runtime.runtime import current_runtime
from actors._core.wire import system as sysop
from actors._core.wire.reasons import CallTimeout, Exit, NotRegistered, Stop
from actors._core.wire.ref import ActorRef
from actors.api import whereis as _local_whereis
from actors.gen_server import PREVIOUS_HOLDER_WAIT, GenServer

__all__ = [
    "CONFLICT",
    "GlobalName",
    "NameServer",
    "SERVER_NAME",
    "named",
    "register",
    "registered",
    "send",
    "start",
    "unregister",
    "whereis",
]

#: The node-local name of each node's `NameServer`.
SERVER_NAME = "$global_names"
#: The first element of the exit reason of a holder that lost a clash.
CONFLICT = "global_name_conflict"
#: A lock not released by its registrant (it hung) is dropped after this many seconds.
LOCK_LEASE = 10.0
_LOCK_CALL_TIMEOUT = 5.0
_TAG = "$global"
#: The node process's system request that answers ``whereis`` from the copy.
#: What the node process answers `whereis` with when no server runs there.
_NO_SERVER = "$no_global_name_server"
#: The key of the copy in the handshake's greeting.
_GREETING = "global_names"
#: The server of each node in this process (node id -> server): what the node process's
#: ``whereis`` reads, and the live one when a restarted server meets its old self.
_serving: dict[str, "NameServer"] = {}
_GONE = ("noconnection", "noproc")


def _tell(ref: ActorRef, message: Any) -> None:
    """Send, never failing: a peer whose node is gone misses it (its monitor says so)."""
    try:
        ref.send(message)
    except Exit:
        pass


class GlobalName(NamedTuple):
    """A cluster-wide name, where a local name (a string) is also accepted:
    ``ChildSpec(..., name=GlobalName("leader"))``."""

    name: str


class NameServer(GenServer):
    """One node's copy of the name table and its part of the protocol.

    It never waits on another node: the registrant drives the protocol with
    calls that each server answers at once, so no two servers can wait on
    each other, and a peer's server is looked up without waiting.  Its copy
    is shared with the node's link (merged in handshakes) and with the node
    process's ``whereis`` (a system request answered on its I/O thread)."""

    def init(self) -> None:
        self.table = NameTable()
        self.holder_mons: dict[ActorRef, Any] = {}
        self.peer_mons: dict[ActorRef, Any] = {}
        #: Holders on nodes this node is not connected to yet (a peer's copy names them), by node
        #: name: watched once that node is up, their names freed if it goes down first.
        self.unwatched: dict[str, set[ActorRef]] = {}
        self.register(SERVER_NAME, wait=PREVIOUS_HOLDER_WAIT)  # a restart may meet its old self leaving
        self._runtime = current_runtime()
        node_id = self.ref.node_id
        _serving[node_id] = self
        self._runtime.register_sys(sysop.GlobalWhereis, lambda src, msg: _whereis_here(node_id, msg.name))
        greeting.add(node_id, _GREETING, self._offer, self._accept)
        self.monitor_nodes()
        self.up = set(self.nodes())
        for node in self.up:
            self._discover(node)

    def terminate(self, reason: Any) -> None:
        node_id = self.ref.node_id
        greeting.remove(node_id, _GREETING, self._offer)
        if _serving.get(node_id) is self:
            del _serving[node_id]

    # -- meeting a node (the link's thread) ----------------------------------------------

    def _offer(self, peer: str) -> tuple[ActorRef, dict[str, ActorRef]]:
        """What this node tells a node it meets: its server and its whole copy."""
        return (self.ref, self.table.snapshot())

    def _accept(self, peer: str, value: Any) -> Callable[[], None] | None:
        """A node met: its copy merged now, before the node reports it up; what needs the
        actor (monitors, ending a loser) follows in a message to the server once it is up."""
        if (
            type(value) is not tuple
            or len(value) != 2
            or not isinstance(value[0], ActorRef)
            or type(value[1]) is not dict
        ):
            return None
        server, names = value
        adopted, conflicts = self.table.merge(names)
        merged = (_TAG, "merged", server, [names[name] for name in adopted], conflicts)
        runtime, me = self._runtime, self.ref
        return lambda: runtime.call_soon(lambda: runtime.send(me, merged))

    # -- peers ---------------------------------------------------------------------

    def _discover(self, node: str) -> None:
        """Look up ``node``'s server without waiting: the answer comes as a message."""
        runtime, me = self._runtime, self.ref

        def found(ok: bool, peer: Any) -> None:
            # That node gone again, or busy (ending an incarnation, say): its name
            # server, when it runs, discovers this one itself (its init, or its nodeup).
            if ok and isinstance(peer, ActorRef):
                runtime.send(me, (_TAG, "found", peer))

        try:
            runtime.sys_request_then(runtime.node_proc, sysop.WhereisOn(SERVER_NAME, node), found)
        except Exit:
            pass

    def _know(self, peer: ActorRef) -> bool:
        if peer in self.peer_mons:
            return False
        self.peer_mons[peer] = self.monitor(peer, wait=False)  # never waits on that node
        return True

    def _servers(self) -> list[ActorRef]:
        """Every known server, this one included, in the order of their node names."""
        return sorted([self.ref, *self.peer_mons], key=lambda ref: (node_name_of(ref), ref.node_id))

    def _watch(self, ref: ActorRef) -> None:
        if ref in self.holder_mons:
            return
        node = node_name_of(ref)
        if node == node_name_of(self.ref) and ref.node_id != self.ref.node_id:
            self.table.holder_gone(ref)  # a holder of this node's previous incarnation: gone with it
            return
        if ref.node_id != self.ref.node_id and node not in self.up:
            # A monitor to a node not connected fails at once (noconnection) and would free
            # the name: a heal reaches nodes one by one, so a peer may name a holder on a
            # node this one meets a moment later.
            self.unwatched.setdefault(node, set()).add(ref)
            return
        self.holder_mons[ref] = self.monitor(ref, wait=False)  # never waits on the holder's node

    def _unwatch_if_free(self, ref: ActorRef) -> None:
        if self.table.holds_any(ref):
            return
        if ref in self.holder_mons:
            self.demonitor(self.holder_mons.pop(ref))
        self.unwatched.get(node_name_of(ref), set()).discard(ref)

    def _node_up(self, node: str) -> None:
        self.up.add(node)
        for ref in self.unwatched.pop(node, set()):
            if self.table.holds_any(ref):
                self._watch(ref)
        self._discover(node)

    def _node_down(self, node: str) -> None:
        """Holders there that were never watched: their names go, as a watched one's DOWN frees it."""
        self.up.discard(node)
        for ref in self.unwatched.pop(node, set()):
            self.table.holder_gone(ref)

    # -- the protocol ------------------------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        op = request[0]
        if op == "whereis":
            return self.table.whereis(request[1])
        if op == "registered":
            return self.table.snapshot()
        if op == "servers":
            return self._servers()
        if op == "lock":
            name, token = request[1], request[2]
            fresh = not self.table.locked(name)
            answer = self.table.lock(name, token)
            if answer[0] == "ok" and fresh:
                self.send_after(LOCK_LEASE, (_TAG, "expire", name, token))
            return answer
        if op == "unlock":
            return self.table.unlock(request[1], request[2])
        if op == "commit":
            name, ref, token = request[1], request[2], request[3]
            before = self.table.whereis(name)
            if not self.table.commit(name, ref, token):
                return False
            self._watch(ref)
            if before is not None and before != ref:
                self._unwatch_if_free(before)
            return True
        if op == "commit_drop":
            name, ref, token = request[1], request[2], request[3]
            done = self.table.commit_drop(name, ref, token)
            if done and ref is not None:
                self._unwatch_if_free(ref)
            return done
        raise Exit(("unexpected_call", request))

    def handle_info(self, message: Any) -> None:
        if type(message) is not tuple or not message:
            return
        if message[0] == "DOWN":
            self._down(message[2])
        elif message[0] == "nodeup":
            self._node_up(message[1])
        elif message[0] == "nodedown":
            self._node_down(message[1])
        elif message[0] == _TAG and len(message) >= 3:
            self._peer_message(message)

    def _peer_message(self, message: tuple[Any, ...]) -> None:
        kind = message[1]
        if kind == "expire":
            self.table.unlock(message[2], message[3])
            return
        peer = message[2]
        if not isinstance(peer, ActorRef) or peer == self.ref:
            return
        if kind == "found":
            _tell(peer, (_TAG, "discover", self.ref))
        elif kind == "discover":
            # The whole copy, not only this node's holders: a peer that meets this node before
            # the holder's own node (a heal reaches nodes one by one) learns of the clash at once.
            _tell(peer, (_TAG, "sync", self.ref, self.table.snapshot()))
            if self._know(peer):
                _tell(peer, (_TAG, "discover", self.ref))
        elif kind == "sync" and isinstance(message[3], dict):
            self._know(peer)
            adopted, conflicts = self.table.merge(message[3])
            self._merged([message[3][name] for name in adopted], conflicts)
        elif kind == "merged" and len(message) == 5:
            # A handshake merged that node's copy already (`_accept`): what is left needs the actor.
            if self._know(peer):
                _tell(peer, (_TAG, "discover", self.ref))
            self._merged(message[3], message[4])

    def _merged(self, adopted: list[ActorRef], conflicts: list[tuple[str, ActorRef, ActorRef]]) -> None:
        for holder in adopted:
            self._watch(holder)
        for name, kept, ended in conflicts:
            self._watch(kept)
            self._unwatch_if_free(ended)
            if ended.node_id == self.ref.node_id:
                # Only the loser's own node ends it, once per clash it learns of.
                self.exit(ended, (CONFLICT, name))

    def _down(self, ref: ActorRef) -> None:
        if self.holder_mons.pop(ref, None) is not None:
            self.table.holder_gone(ref)
        if self.peer_mons.pop(ref, None) is not None:
            self.table.release_locks_of(ref.node_id)


# -- the functions a program calls ------------------------------------------------------


def _server() -> ActorRef:
    ref = _local_whereis(SERVER_NAME)
    if ref is None:
        raise LookupError("no global name server runs on this node: start it with actors.global_names.start(node)")
    return ref


def start(node: Any, timeout: float | None = 30.0) -> ActorRef:
    """Start this node's `NameServer` in its node process (``node``: the
    `actors.Node`).  Every node of the cluster that uses global names runs one."""
    ref = node.spawn(NameServer, timeout=timeout)
    assert ref is not None
    return ref


def _whereis_here(node_id: str, name: str) -> Any:
    """The node process's answer to `whereis`: its server's copy, read at once
    (`_NO_SERVER` when none runs: the caller raises, the node logs nothing)."""
    server = _serving.get(node_id)
    if server is None or not server._actor_cell.alive:  # killed: its copy is no one's any more
        return _NO_SERVER
    return server.table.whereis(name)


def whereis(name: str, timeout: float | None = 5.0) -> ActorRef | None:
    """The holder of ``name`` as this node's copy says, or None.  Answered by
    the node process from its copy: it never waits on another node."""
    runtime = current_runtime()
    try:
        holder = runtime.sys_request(runtime.node_proc, sysop.GlobalWhereis(name), timeout=timeout)
    except Exit as exc:
        if type(exc.reason) is tuple and exc.reason[:1] == ("unknown_system_request",):
            holder = _NO_SERVER  # no server ever ran on this node
        else:
            raise
    if holder == _NO_SERVER:
        raise LookupError("no global name server runs on this node: start it with actors.global_names.start(node)")
    return holder


def registered(timeout: float | None = 5.0) -> dict[str, ActorRef]:
    """Every name in this node's copy."""
    return _server().call(("registered",), timeout=timeout)


def send(name: str, message: Any) -> None:
    """Send to the holder of ``name``; `NotRegistered` when nothing holds it."""
    ref = whereis(name)
    if ref is None:
        raise NotRegistered(name, f"no actor holds the global name {name!r}")
    ref.send(message)


def _attempt(servers: list[ActorRef], name: str, ref: ActorRef | None, token: tuple[str, str], drop: bool) -> str:
    """One try of the protocol: ``"ok"``, ``"taken"`` or ``"busy"`` (try again)."""
    held: list[tuple[ActorRef, Any]] = []
    try:
        for server in servers:
            try:
                state, holder = server.call(("lock", name, token), timeout=_LOCK_CALL_TIMEOUT)
            except Exit as exc:
                if exc.reason in _GONE:
                    continue  # that node is going down: its copy goes with it
                raise
            except CallTimeout:
                return "busy"
            if state != "ok":
                return "busy"
            held.append((server, holder))
            if not drop and holder is not None and holder != ref:
                return "taken"
        if drop and all(holder is None for _, holder in held):
            return "taken"
        lost = False
        while held:
            server, holder = held.pop(0)
            try:
                request = ("commit_drop", name, holder, token) if drop else ("commit", name, ref, token)
                lost |= not server.call(request, timeout=_LOCK_CALL_TIMEOUT)
            except Exit as exc:
                if exc.reason not in _GONE:
                    raise
            except CallTimeout:
                lost = True
        return "busy" if lost else "ok"
    finally:
        for server, _ in held:
            _unlock(server, name, token)


def _unlock(server: ActorRef, name: str, token: tuple[str, str]) -> None:
    try:
        server.call(("unlock", name, token), timeout=_LOCK_CALL_TIMEOUT)
    except (Exit, CallTimeout):
        pass  # gone or stuck: the lease frees it


def _servers_now(local: ActorRef, timeout: float) -> list[ActorRef]:
    """The servers to lock: those this node's server knows, and the server of
    any connected node it has not discovered yet (a node that connected a
    moment ago), so that a registration covers every connected node."""
    servers: list[ActorRef] = local.call(("servers",), timeout=timeout)
    known = {node_name_of(server) for server in servers}
    runtime = current_runtime()
    for node in runtime.sys_request(runtime.node_proc, sysop.Nodes(), timeout=timeout):
        if node not in known:
            server = _local_whereis(SERVER_NAME, node=node, timeout=timeout)
            if server is not None:
                servers.append(server)
    return sorted(servers, key=lambda ref: (node_name_of(ref), ref.node_id))


def _run(name: str, ref: ActorRef | None, drop: bool, timeout: float) -> bool:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a global name is a non-empty string, got {name!r}")
    local = _server()
    deadline = time.monotonic() + timeout
    for attempt in itertools.count():
        token = (local.node_id, os.urandom(8).hex())
        outcome = _attempt(_servers_now(local, timeout), name, ref, token, drop)
        if outcome != "busy":
            return outcome == "ok"
        if time.monotonic() >= deadline:
            raise TimeoutError(f"global name {name!r}: still contended after {timeout} s")
        # A randomised, growing pause: contenders that collided spread out.
        time.sleep(random.uniform(0.0, min(0.1, 0.002 * 2 ** min(attempt, 6))))
    raise AssertionError("unreachable")


def register(name: str, ref: ActorRef, timeout: float = 10.0) -> bool:
    """Give ``ref`` the cluster-wide ``name``: True, or False when another
    actor holds it (registering the holder again is True).  Raises
    `TimeoutError` when the name stays contended past ``timeout``."""
    if not isinstance(ref, ActorRef):
        raise TypeError(f"register needs an ActorRef, got {ref!r}")
    return _run(name, ref, False, timeout)


def unregister(name: str, timeout: float = 10.0) -> bool:
    """Release ``name`` everywhere (its holder keeps running); False when nothing held it."""
    return _run(name, None, True, timeout)


def named(cls: type, name: str) -> type:
    """``cls`` made to take the global ``name`` before its ``init`` runs
    (OTP's ``gen_server:start_link({global, Name}, ...)``): the start fails
    with ``("already_started", holder)`` while another live actor holds it.
    A holder that is on its way out (the previous instance of a restarted
    child, one on a node going down) is waited for, up to a few seconds."""
    if not (isinstance(cls, type) and issubclass(cls, GenServer)):
        raise TypeError(f"named needs a GenServer subclass, got {cls!r}")

    class GloballyNamed(cls):  # type: ignore[misc, valid-type]
        def _gen_init(self, *args: Any, **kwargs: Any) -> Any:
            for _ in range(3):
                if register(name, self.ref):
                    return super()._gen_init(*args, **kwargs)
                holder = whereis(name)
                if holder is None:
                    continue  # freed meanwhile: try again
                watch = self.monitor_wait(holder)
                try:
                    watch.wait(PREVIOUS_HOLDER_WAIT)
                except TimeoutError:
                    watch.cancel()
                    return Stop(("already_started", holder))
            return Stop(("already_started", whereis(name)))

    GloballyNamed.__name__ = cls.__name__
    GloballyNamed.__qualname__ = f"named.<{cls.__qualname__}>"
    GloballyNamed.__doc__ = cls.__doc__
    return GloballyNamed
