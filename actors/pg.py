"""Process groups across the nodes of a cluster: Erlang/OTP 23's ``pg``.

Any actor may join a named group on any node; anyone may read the members
(on every node, or only this node's) and send to all of them.  Each node
runs one `Scope` actor per scope; the scopes of a cluster exchange their
*local* groups as OTP's do: a scope that starts, or sees a node come up,
*discovers* the other node's scope of the same name, the two *sync* (each
sends all its local groups, which replace what the other kept), and from
then on send each other every join and leave as it happens.

What this gives, as OTP's ``pg`` does:

- eventual consistency: a join is in this node's view when ``join``
  returns, and in another node's view once the delta has crossed the link;
  two nodes may briefly disagree, never for longer than a message takes.
- a member that dies leaves at once (its scope monitors it); the members of
  a node that goes down leave when this node sees ``nodedown`` (the peer
  scope's monitor fires ``noconnection``); a node that (re)connects learns
  the members of the others in the sync.
- a restarted node is a new incarnation: its previous members belonged to
  another peer, which went down, so they never come back.
- ``monitor(group)`` returns the members now, then the subscriber gets
  ``("join", group, refs)`` and ``("leave", group, refs)`` in ``handle_info``
  in the order the scope applied them.

The bookkeeping is `actors._core.cluster.pg_state` (plain data); this module is the thin
actor around it and the functions a program calls.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from actors._core.cluster.pg_state import Change, PgState
from actors._core.runtime.runtime import current_cell
from actors._core.wire.reasons import Exit
from actors._core.wire.ref import ActorRef
from actors.api import send, whereis
from actors.gen_server import PREVIOUS_HOLDER_WAIT, GenServer

__all__ = [
    "DEFAULT_SCOPE",
    "Scope",
    "broadcast",
    "demonitor",
    "join",
    "leave",
    "local_members",
    "members",
    "monitor",
    "scope_name",
    "start",
    "which_groups",
]

#: The scope used when none is named (OTP's default scope is ``pg`` too).
DEFAULT_SCOPE = "pg"
_TAG = "$pg"


def _tell(ref: ActorRef, message: Any) -> None:
    """Send, never failing: a peer or subscriber whose node is gone misses it
    (its loss is handled by its monitor)."""
    try:
        ref.send(message)
    except Exit:
        pass


def scope_name(scope: str) -> str:
    """The node-local name a scope's actor registers under (one per node)."""
    return f"$pg.{scope}"


class Scope(GenServer):
    """One node's server of one scope: holds the groups, talks to its peers.

    Start one per node and scope (`start`, or a supervisor child with
    ``start=(Scope, (scope,))``); it lives best in the node process, which
    is where ``node.spawn(Scope)`` places it."""

    def init(self, scope: str = DEFAULT_SCOPE) -> None:
        if not isinstance(scope, str) or not scope:
            raise ValueError(f"a pg scope is a non-empty string, got {scope!r}")
        self.scope = scope
        self.state = PgState()
        self.member_mons: dict[ActorRef, Any] = {}
        self.peer_mons: dict[ActorRef, Any] = {}
        self.watcher_mons: dict[ActorRef, Any] = {}
        self.register(scope_name(scope), wait=PREVIOUS_HOLDER_WAIT)  # a restart may meet its old self leaving
        self.monitor_nodes()  # before reading nodes(): a node up meanwhile is announced
        for node in self.nodes():
            self._discover(node)

    # -- peers -------------------------------------------------------------------

    def _discover(self, node: str) -> None:
        """Say hello to ``node``'s scope of the same name, by name on that node
        (`actors.send` to ``(name, node)``, as OTP's ``pg`` sends to
        ``{Scope, Node}``): nothing is asked of the other node, so this
        scope never waits on a slow or lost one.  If that node runs no scope
        yet the hello is dropped there, and the scope that starts later
        discovers this one itself; a node gone again brings the hello with
        its next ``nodeup``."""
        send((scope_name(self.scope), node), (_TAG, "discover", self.ref))

    def _know(self, peer: ActorRef) -> bool:
        """Keep ``peer`` (monitored, so its node's loss drops its members); True if new."""
        if not self.state.add_peer(peer):
            return False
        self.peer_mons[peer] = self.monitor(peer)
        return True

    def _to_peers(self, message: tuple[Any, ...]) -> None:
        for peer in self.state.remote:
            _tell(peer, message)

    # -- notifications ---------------------------------------------------------------

    def _notify(self, changes: list[Change]) -> None:
        for change in changes:
            for watcher in self.state.watchers_of(change[1]):
                _tell(watcher, change)

    def _local_changed(self, changes: list[Change]) -> None:
        """A local join or leave: subscribers here hear it, peers get the delta."""
        self._notify(changes)
        for kind, group, refs in changes:
            self._to_peers((_TAG, kind, self.ref, group, refs))

    # -- requests ----------------------------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        op = request[0]
        if op == "members":
            return self.state.members(request[1])
        if op == "local_members":
            return self.state.local_members(request[1])
        if op == "which_groups":
            return self.state.which_groups()
        if op == "join":
            return self._join(request[1], request[2])
        if op == "leave":
            return self._leave(request[1], request[2])
        if op == "monitor":
            return self._monitor(request[1], request[2])
        if op == "demonitor":
            return self._demonitor(request[1], request[2])
        return ("badarg", f"unknown pg request {op!r}")

    def _check_local(self, refs: Any) -> str | None:
        if not isinstance(refs, list) or not all(isinstance(r, ActorRef) for r in refs):
            return f"members are ActorRefs, got {refs!r}"
        for ref in refs:
            if ref.node_id != self.ref.node_id:
                return f"{ref!r} is an actor of another node: join it on its own node"
        return None

    def _join(self, group: Hashable, refs: list[ActorRef]) -> Any:
        bad = self._check_local(refs)
        if bad is not None:
            return ("badarg", bad)
        for ref in refs:
            if ref not in self.member_mons:
                self.member_mons[ref] = self.monitor(ref)
        self._local_changed(self.state.join_local(group, refs))
        return "ok"

    def _leave(self, group: Hashable, refs: list[ActorRef]) -> Any:
        bad = self._check_local(refs)
        if bad is not None:
            return ("badarg", bad)
        changes = self.state.leave_local(group, refs)
        for ref in refs:
            if ref in self.member_mons and not self.state.is_local_member(ref):
                self.demonitor(self.member_mons.pop(ref))
        self._local_changed(changes)
        return "ok" if changes else "not_joined"

    def _monitor(self, group: Hashable, watcher: ActorRef) -> Any:
        if not isinstance(watcher, ActorRef):
            return ("badarg", f"a subscriber is an ActorRef, got {watcher!r}")
        self.state.watch(group, watcher)
        if watcher not in self.watcher_mons:
            self.watcher_mons[watcher] = self.monitor(watcher)
        return self.state.members(group)

    def _demonitor(self, group: Hashable, watcher: ActorRef) -> Any:
        found = self.state.unwatch(group, watcher)
        if watcher in self.watcher_mons and not self.state.is_watching(watcher):
            self.demonitor(self.watcher_mons.pop(watcher))
        return "ok" if found else "not_monitored"

    # -- messages ----------------------------------------------------------------------

    def handle_info(self, message: Any) -> None:
        if type(message) is tuple and message and message[0] == "DOWN":
            self._down(message[2])
        elif type(message) is tuple and len(message) >= 3 and message[0] == _TAG:
            self._peer_message(message)
        elif type(message) is tuple and len(message) == 2 and message[0] == "nodeup":
            self._discover(message[1])
        # nodedown: nothing to do here; each peer's monitor says which incarnation went

    def _peer_message(self, message: tuple[Any, ...]) -> None:
        kind, peer = message[1], message[2]
        if not isinstance(peer, ActorRef) or peer == self.ref:
            return
        if kind == "discover":
            _tell(peer, (_TAG, "sync", self.ref, self.state.snapshot()))
            if self._know(peer):
                _tell(peer, (_TAG, "discover", self.ref))
        elif kind == "sync" and isinstance(message[3], dict):
            self._know(peer)
            self._notify(self.state.sync_peer(peer, message[3]))
        elif kind == "join":
            self._notify(self.state.remote_join(peer, message[3], list(message[4])))
        elif kind == "leave":
            self._notify(self.state.remote_leave(peer, message[3], list(message[4])))

    def _down(self, ref: ActorRef) -> None:
        if self.member_mons.pop(ref, None) is not None:
            self._local_changed(self.state.local_died(ref))
        if self.peer_mons.pop(ref, None) is not None:
            self._notify(self.state.drop_peer(ref))
        if self.watcher_mons.pop(ref, None) is not None:
            self.state.watcher_died(ref)


# -- the functions a program calls ----------------------------------------------------


def _scope(scope: str) -> ActorRef:
    ref = whereis(scope_name(scope))
    if ref is None:
        raise LookupError(f"pg scope {scope!r} is not running on this node: start it with actors.pg.start(node)")
    return ref


def _ask(scope: str, request: tuple[Any, ...], timeout: float | None) -> Any:
    answer = _scope(scope).call(request, timeout=timeout)
    if type(answer) is tuple and answer and answer[0] == "badarg":
        raise ValueError(answer[1])
    return answer


def _as_list(refs: ActorRef | list[ActorRef] | tuple[ActorRef, ...]) -> list[ActorRef]:
    if isinstance(refs, ActorRef):
        return [refs]
    if not isinstance(refs, (list, tuple)):
        raise TypeError(f"pg needs an ActorRef or a list of them, got {refs!r}")
    return list(refs)


def _caller(ref: ActorRef | None) -> ActorRef:
    if ref is not None:
        return ref
    cell = current_cell()
    if cell is None:
        raise ValueError("outside an actor, name the subscriber: monitor(group, ref=...)")
    return cell.ref


def start(node: Any, scope: str = DEFAULT_SCOPE, timeout: float | None = 30.0) -> ActorRef:
    """Start this node's server of ``scope`` in its node process (``node`` is
    the `actors.Node`); every node of the cluster that takes part starts its own."""
    ref = node.spawn(Scope, scope, timeout=timeout)
    assert ref is not None
    return ref


def join(
    group: Hashable, refs: ActorRef | list[ActorRef], scope: str = DEFAULT_SCOPE, timeout: float | None = 5.0
) -> None:
    """Make each of ``refs`` (actors of this node) a member of ``group``; an
    actor joining twice is a member twice.  In this node's view when this
    returns; in the others' once the delta arrives."""
    _ask(scope, ("join", group, _as_list(refs)), timeout)


def leave(
    group: Hashable, refs: ActorRef | list[ActorRef], scope: str = DEFAULT_SCOPE, timeout: float | None = 5.0
) -> bool:
    """End one membership of each of ``refs``; False when none was a member."""
    return _ask(scope, ("leave", group, _as_list(refs)), timeout) == "ok"


def members(group: Hashable, scope: str = DEFAULT_SCOPE, timeout: float | None = 5.0) -> list[ActorRef]:
    """The members on every node, as this node knows them now."""
    return _ask(scope, ("members", group), timeout)


def local_members(group: Hashable, scope: str = DEFAULT_SCOPE, timeout: float | None = 5.0) -> list[ActorRef]:
    """The members on this node."""
    return _ask(scope, ("local_members", group), timeout)


def which_groups(scope: str = DEFAULT_SCOPE, timeout: float | None = 5.0) -> list[Hashable]:
    """Every group with a member on some node."""
    return _ask(scope, ("which_groups",), timeout)


def monitor(
    group: Hashable, ref: ActorRef | None = None, scope: str = DEFAULT_SCOPE, timeout: float | None = 5.0
) -> list[ActorRef]:
    """Subscribe the calling actor (or ``ref``) to ``group``: returns the
    members now; from then on it gets ``("join", group, refs)`` and
    ``("leave", group, refs)`` in ``handle_info``, in order."""
    return _ask(scope, ("monitor", group, _caller(ref)), timeout)


def demonitor(
    group: Hashable, ref: ActorRef | None = None, scope: str = DEFAULT_SCOPE, timeout: float | None = 5.0
) -> bool:
    """End a subscription; False when there was none."""
    return _ask(scope, ("demonitor", group, _caller(ref)), timeout) == "ok"


def broadcast(group: Hashable, message: Any, scope: str = DEFAULT_SCOPE, timeout: float | None = 5.0) -> int:
    """Send ``message`` to every member (`send`: to ``handle_info``); how many it went to."""
    targets = members(group, scope, timeout)
    for target in targets:
        _tell(target, message)
    return len(targets)
