"""``couch_replicator_clustering``: the replicator's view of the cluster, as an actor.

Upstream the clustering server follows ``mem3_cluster``: it watches nodes
come and go (``net_kernel:monitor_nodes``), declares the cluster unstable on
every change and stable after a quiet period, and tells the doc processor.
This one does the same with `actors.GenServer.monitor_nodes` and a
`ClusterState`, and also carries what `clustering.plan` needs to never run a
job twice: every member's report of the jobs in its scheduler.

Protocol between the clustering servers of two nodes (registered as
``couch_replicator_clustering`` on each), all casts, in order per pair:

* ``("hello", node, ref, live, running, reply)``: sent to a node when it
  comes up (and, at start, to every node already connected), with this
  node's report.  The receiver makes the sender a member, monitors ``ref``
  and answers with its own hello (``reply=False``) when asked.  A node that
  runs no replicator never says hello and is never a member.
* ``("report", node, live, running)``: this node's members or jobs changed.
* ``("withdraw", node)``: that node cannot reach the shared store (its doc
  processor said so): it stays connected but is no member, so the others
  take over its jobs (once its leases expire) instead of waiting for a node
  that cannot run them.  When it reaches the store again it says hello.

A member leaves on ``nodedown`` or when its clustering server dies (its
replicator tree stopped: its jobs stopped with it, since the clustering
server is the tree's first child and stops last).  A node that restarts
comes back as a new incarnation: its hello replaces the old member even when
it arrives before the old one's DOWN (the refs' node ids differ).

Local subscribers (the doc processor) get ``("couch_replicator_clustering",
view)`` with a `ClusterView` whenever the view changes.
"""

from __future__ import annotations

import logging
from typing import Any

from actors import ActorRef, GenServer
from actors import config as config_module
from actors.clock import MonotonicClock

from ._names import register_self
from .cluster_state import ClusterState, ClusterView, PeerReport
from .settings import SECTION, Settings

__all__ = ["CLUSTERING", "ClusteringServer"]

log = logging.getLogger("actors.replicator.clustering")

CLUSTERING = "couch_replicator_clustering"


class ClusteringServer(GenServer):
    """Membership, stability and the members' running jobs for this node."""

    def init(self, me: str, clock: Any = None) -> None:
        if not isinstance(me, str) or not me or me == "nonode@nohost":
            raise ValueError(f"the clustered replicator needs this node's name, got {me!r}")
        register_self(self, CLUSTERING)
        self.me = me
        self.clock = clock or MonotonicClock()
        cfg = config_module.current()
        settings = Settings.from_config(cfg)
        self.state = ClusterState(me, self.clock.now(), settings.cluster_quiet_period, settings.cluster_start_period)
        self.peers: dict[str, ActorRef] = {}
        self.peer_monitors: dict[Any, str] = {}
        self.subscribers: dict[Any, ActorRef] = {}
        self.timer: Any = None
        self.withdrawn = False  # this node cannot reach the shared store
        self.last_view: ClusterView | None = None
        ref = self.ref
        self._config = cfg
        self._listener = cfg.listen(
            lambda section, key, value, _persist: (
                ref.cast(("config", key, value)) if section == SECTION and key == "cluster_quiet_period" else None
            )
        )
        self.monitor_nodes()  # before listing the nodes: none can slip between the two
        for node in self.nodes():
            self._greet(node, reply=True)
        self._changed()

    # -- requests ------------------------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        op, *args = request if isinstance(request, tuple) else (request,)
        if op == "subscribe":
            self.subscribers[self.monitor(args[0])] = args[0]
            return self._view()
        if op == "running":
            if self.state.set_running(args[0]):
                self._broadcast()
                self._changed()
            return "ok"
        if op == "store_reachable":
            self._store_reachable(bool(args[0]))
            return "ok"
        if op == "view":
            return self._view()
        if op == "peers":
            return dict(self.peers)
        raise ValueError(f"unknown clustering request {request!r}")

    def handle_cast(self, request: Any) -> None:
        op = request[0]
        now = self.clock.now()
        if op == "hello":
            _, node, ref, live, running, reply = request
            old = self.peers.get(node)
            before = self.state.live
            if old != ref:
                if old is not None and old.node_id != ref.node_id:
                    # A new incarnation said hello before the old one's DOWN got here:
                    # the old one left (its jobs died with it), this one joins.
                    self.state.node_down(node, now)
                self.peers[node] = ref
                self.peer_monitors[self.monitor(ref)] = node
            if self.state.hello(node, PeerReport(tuple(live), frozenset(running)), now):
                log.info("%s: replicator on %s joined; members %s", self.me, node, self.state.live)
            if reply and not self.withdrawn:
                ref.cast(("hello", self.me, self.ref, self.state.live, tuple(self.state.running), False))
            if self.state.live != before:
                self._broadcast(skip=node if reply else None)
        elif op == "report":
            _, node, live, running = request
            self.state.peer_report(node, PeerReport(tuple(live), frozenset(running)))
        elif op == "withdraw":
            if self.state.node_down(request[1], now):
                log.info("%s: %s cannot reach the store and withdrew; members %s", self.me, request[1], self.state.live)
                self._broadcast()
        elif op == "config":
            _, key, value = request
            seconds = Settings.cluster_quiet_period if value is None else value
            try:
                checked = Settings().with_value(key, seconds).cluster_quiet_period
            except ValueError as exc:
                log.warning("rejected %s", exc)
                return None
            self.state.membership.set_quiet_period(checked, now)
        else:
            raise ValueError(f"unknown clustering cast {request!r}")
        self._changed()
        return None

    def handle_info(self, message: Any) -> None:
        now = self.clock.now()
        if message == "check":
            self.timer = None
        elif isinstance(message, tuple) and message[0] == "nodeup":
            self._greet(message[1], reply=True)
        elif isinstance(message, tuple) and message[0] == "nodedown":
            # The fast path; when a newer incarnation is connected already, the
            # DOWN of the old one's clustering server says which one left.
            if message[1] not in self.nodes():
                self._lost(message[1], now)
        elif isinstance(message, tuple) and len(message) == 4 and message[0] == "DOWN":
            _, mref, _ref, _reason = message
            if mref in self.subscribers:
                del self.subscribers[mref]
            else:
                node = self.peer_monitors.pop(mref, None)
                if node is not None and self.peers.get(node) == _ref:
                    self._lost(node, now)
        else:
            return super().handle_info(message)
        self._changed()
        return None

    def terminate(self, reason: Any) -> None:
        self._config.unlisten(self._listener)

    # -- internals -----------------------------------------------------------------

    def _store_reachable(self, reachable: bool) -> None:
        """Withdraw from the members while the shared store is out of reach; rejoin after."""
        if reachable == (not self.withdrawn):
            return
        self.withdrawn = not reachable
        for node, ref in list(self.peers.items()):
            if self.withdrawn:
                ref.cast(("withdraw", self.me))
            else:
                ref.cast(("hello", self.me, self.ref, self.state.live, tuple(self.state.running), True))
        log.warning(
            "%s: %s",
            self.me,
            "cannot reach the store: withdrew from the replicator's members"
            if self.withdrawn
            else "reaches the store again: rejoins",
        )

    def _greet(self, node: str, reply: bool) -> None:
        """Say hello to ``node``'s replicator, if it runs one (it greets us when it starts)."""
        try:
            ref = self.whereis(CLUSTERING, node=node)
        except Exception as exc:  # a node lost while we asked: its nodedown follows
            log.info("%s: could not ask %s for its replicator: %r", self.me, node, exc)
            return
        if ref is not None and not self.withdrawn:
            ref.cast(("hello", self.me, self.ref, self.state.live, tuple(self.state.running), reply))

    def _lost(self, node: str, now: float) -> None:
        self.peers.pop(node, None)
        if self.state.node_down(node, now):
            log.info("%s: replicator on %s left; members %s", self.me, node, self.state.live)
            self._broadcast()

    def _broadcast(self, skip: str | None = None) -> None:
        report = self.state.report()
        for node, ref in list(self.peers.items()):
            if node != skip:
                ref.cast(("report", self.me, report.live, tuple(report.running)))

    def _view(self) -> ClusterView:
        return self.state.view(self.clock.now())

    def _changed(self) -> None:
        """Tell subscribers about a new view, and arm the next stability check."""
        view = self._view()
        if view != self.last_view:
            self.last_view = view
            for ref in list(self.subscribers.values()):
                ref.send(("couch_replicator_clustering", view))
        due = self.state.next_check()
        if self.timer is not None:
            self.cancel_timer(self.timer)
            self.timer = None
        if due is not None:
            self.timer = self.send_after(max(0.0, due - self.clock.now()) + 0.001, "check")
