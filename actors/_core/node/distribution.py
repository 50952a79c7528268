"""The node's side of distribution: its link to the other nodes, and what it does as they come and go.

A distributed node (one with a name) listens on tcp through a `NetLink`,
dials its seeds until they come, and hears from the link's thread when a
node comes up, goes down, is refused or refuses this one.  This module turns
those callbacks into the node's facts (`actors._core.node.peers`), into what
its processes must be told (a node down fails every ref into it with
``noconnection``), into the full mesh of ``connect_all`` (each node shares
its list of peers with a node that joins), and into the end of this
incarnation when the membership policy (`actors._core.node.membership`)
says this node is the one to go.  Frames themselves go through the router
(`actors._core.node.routing`).
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Callable
from typing import Any

from actors._core.host.pool import HostPool
from actors._core.net.keys import ClusterKey
from actors._core.net.net import NetError, NetLink
from actors._core.net.seeds import ATTEMPT_TIMEOUT, SeedDialer
from actors._core.net.settings import ClusterSettings
from actors._core.net.tick import DEFAULT_NET_TICKTIME
from actors._core.node import greeting as _greeting
from actors._core.node.events import NodeEvents
from actors._core.node.membership import RateLimit, yields
from actors._core.node.peers import PeerNodes
from actors._core.node.remote import Remote
from actors._core.node.routing import Router
from actors._core.runtime.runtime import Runtime
from actors._core.wire import system as sysop
from actors._core.wire.reasons import Exit
from actors._core.wire.ref import qualify

__all__ = ["Distribution", "LINK_SEND_WAIT_SHARE", "SEED_WAIT"]

log = logging.getLogger("actors.node")
#: How long `Node()` waits for its seeds' first connection attempts.
SEED_WAIT = ATTEMPT_TIMEOUT + 0.5
#: ``connect_all``: how many nodes one peer's list may name (the rest are ignored), and
#: how long a connection to one of them may take to be welcomed.
_MAX_SHARED_NODES = 1000
_SHARED_CONNECT_TIMEOUT = 10.0
#: The share of ``net_ticktime`` the link's thread waits, at most, for room
#: in a full pipe to one of this node's hosts before it drops and counts:
#: that thread also sends the ticks, which must leave in time.
LINK_SEND_WAIT_SHARE = 0.25


class Distribution:
    """Node ``node_id``'s link to the other nodes (`net` is None for a node that is not distributed)."""

    def __init__(
        self, rt: Runtime, pool: HostPool, peers: PeerNodes, remote: Remote, cluster: ClusterSettings, node_id: str
    ) -> None:
        self._rt = rt
        self._pool = pool
        self._cluster = cluster
        self.name = cluster.name
        self.id = node_id
        self.peers = peers
        self.remote = remote
        self.net: NetLink | None = None
        self.seeds: SeedDialer | None = None  # started once the node is up
        self.closed = False
        self.events = NodeEvents(rt)  # monitor_nodes subscribers
        self._connect_all = cluster.connect_all
        self._log_limit = RateLimit(60.0)  # refused handshakes: a line per peer per minute
        self._after_up: dict[str, list[Callable[[], None]]] = {}  # node id -> greeting follow-ups (link thread)
        self.router = Router(rt, pool, peers, (cluster.net_ticktime or DEFAULT_NET_TICKTIME) * LINK_SEND_WAIT_SHARE)

    def serve(self) -> None:
        """Answer this node's processes and the other nodes about the cluster."""
        rt = self._rt
        rt.register_sys(sysop.Nodes, lambda src, m: sorted(self.peers.ids))
        rt.register_sys(sysop.PeerList, lambda src, m: self.peers.listing())
        rt.register_sys(sysop.KnownNodes, self._on_known_nodes)
        rt.register_sys(sysop.MonitorNodes, lambda src, m: self.events.subscribe(m.ref, m.flag), threaded=True)
        rt.register_sys(sysop.PeerProcDown, self.router.on_peer_proc_down)
        self.remote.serve()

    # -- the link's life ------------------------------------------------------------------

    def link(self, key: ClusterKey | None, incarnation: int) -> None:
        """The link of this incarnation, not yet listening (a distributed node only)."""
        cluster = self._cluster
        assert cluster.name is not None and cluster.listen is not None
        self.net = self.router.net = NetLink(
            cluster.name,
            cluster.listen,
            key,
            on_frame=self.router.on_frame,
            on_up=self._net_up,
            on_down=self._net_down,
            refuse=self._net_refuse,
            on_rejected=self._net_rejected,
            net_ticktime=cluster.net_ticktime,
            incarnation=incarnation,
            greeting=lambda peer: _greeting.offer(self.id, peer),
            on_greeting=self._net_greeted,
        )

    def listen(self) -> str:
        """Bind the link and route frames for other nodes through it; the bound address."""
        assert self.net is not None
        try:
            address = self.net.start()
        except BaseException:
            self.net = self.router.net = None
            raise
        self._rt.relay = self.router.relay
        return address

    def dial_seeds(self) -> None:
        """Seeds up now are connected before the node is handed out; the
        others are dialed in the background until they come (and again
        whenever they are lost)."""
        if not self._cluster.seeds or self.net is None:
            return
        self.seeds = SeedDialer(self._cluster.seeds, self.net.connect, lambda peer: peer in self.peers.ids)
        self.seeds.start()
        self.seeds.wait_first_round(SEED_WAIT)

    def connect(self, address: str, timeout: float) -> str:
        if self.net is None:
            raise NetError("this node is not distributed: give Node(name=..., listen=...)")
        return self.net.connect(address, timeout)

    def close(self) -> None:
        """Say goodbye to every node and stop dialing (the node is closing)."""
        self.closed = True
        if self.net is not None:
            self._rt.relay = None
            self.net.close()
        if self.seeds is not None:
            self.seeds.close()  # the link is closed: an attempt under way has failed

    # -- this node's hosts, as other nodes must know them --------------------------------

    def host_up(self, proc: str) -> None:
        """A host of this node is up: it may reach every connected node on a
        connection of its own, and it fences the incarnations declared down
        before it was up, as the hosts up then do (`actors._core.runtime.dispatch`)."""
        for node_id in list(self.peers.lost):
            self._rt.sys_send(proc, sysop.NodeDown(node_id, "noconnection"))
        self.router.tell_net_peers(proc, dict(self.peers.ids))

    def host_gone(self, proc: str, reason: Any) -> None:
        """A host of this node died: other nodes may point into it too."""
        for node_id in list(self.peers.ids.values()):
            self._rt.sys_send(qualify(node_id, self._rt.node_proc), sysop.PeerProcDown(proc, reason))

    # -- the link's callbacks (on its I/O thread) ----------------------------------------

    def _net_greeted(self, peer: str, incarnation: int, data: bytes) -> None:
        """A peer's greeting, just before it is up (`actors._core.node.greeting`): merged by the
        services now; what they send it waits for `_net_up`."""
        self._after_up[f"{peer}@{incarnation:x}"] = _greeting.accept(
            self.id, peer, data, self._rt.peer_loads or pickle.loads
        )

    def _net_up(self, peer: str, incarnation: int) -> None:
        address = self.net.address_of(peer) if self.net is not None else None
        # Up here before the hosts hear of it: a host handles what the peer
        # sent it straight only once told (`actors._core.runtime.unheard`),
        # and what it sends back through this process must find the peer up.
        self.peers.up(peer, address, incarnation)
        for host in self._pool.up():
            self.router.tell_net_peers(host.proc, {peer: f"{peer}@{incarnation:x}"})
        direct, key = self._rt.direct, self.net.key if self.net is not None else None
        if direct is not None and address is not None:
            # This process's own frames to that node's processes go straight,
            # and what they sent straight here before (held) is handled now,
            # on the I/O thread, before anything that comes after it.
            node_id = f"{peer}@{incarnation:x}"
            public, secret = (key.public.decode(), key.secret.decode()) if key else (None, None)
            self._rt.call_soon(lambda: self._rt.learn_node(node_id, address, public, secret))
        log.info(
            "nodeup: node %s (incarnation %x) at %s",
            peer,
            incarnation,
            address,
            extra={"event": "nodeup", "peer": peer, "peer_incarnation": f"{incarnation:x}", "address": address},
        )
        self._rt.call_soon(lambda: self.events.publish("nodeup", peer))
        _greeting.run_after_up(self._after_up.pop(f"{peer}@{incarnation:x}", []), peer)
        if self._connect_all:
            # Here, on the link's thread, not later: what this node sends the
            # peer from now on goes after the list, so an answer to the peer's
            # first request tells it the list has been handled.
            self._share_nodes(peer)

    def _share_nodes(self, peer: str) -> None:
        """Tell node ``peer``, just connected, which other nodes this one is
        connected to and where they listen, so it connects to them too: with
        ``connect_all`` (Erlang's default) the nodes of a cluster form a full
        mesh, whichever node each was told to join."""
        net = self.net
        if net is None:
            return
        with self.peers.lock:
            names = [name for name in self.peers.ids if name != peer]
        known = [[name, address] for name in names if (address := net.address_of(name)) is not None]
        if not known:
            return
        try:
            self._rt.sys_send(self.remote.node_proc_of(peer), sysop.KnownNodes(known))
        except Exit:  # lost meanwhile
            pass

    def _on_known_nodes(self, src: str, msg: sysop.KnownNodes) -> None:
        """A connected node's list of its own peers (`_share_nodes`): connect
        to those this node is not connected to yet, in the background.  A
        node this one declared down answers with a refusal; that is all."""
        known = msg.known
        net = self.net
        if net is None or not self._connect_all or type(known) is not list:
            return
        for entry in known[:_MAX_SHARED_NODES]:
            if type(entry) is not list or len(entry) != 2 or not all(type(x) is str for x in entry):
                continue
            name, address = entry
            if name == self.name or name in self.peers.ids:
                continue
            try:
                net.connect_soon(address, expect=name, timeout=_SHARED_CONNECT_TIMEOUT)
            except NetError as exc:  # an address this node must not dial (no key for it)
                log.warning("not connecting to node %s at %s, known from %s: %s", name, address, src, exc)

    def _net_refuse(self, peer: str, incarnation: int) -> str | dict[str, Any] | None:
        """An incarnation declared down here stays down (Akka calls it
        quarantine): a node that was stopped (SIGSTOP) or cut off past
        ``net_ticktime`` and comes back must restart to rejoin, so the refs
        that failed with ``noconnection`` never start answering again."""
        if self.peers.ended is not None:
            return f"node {self.name} is ending incarnation {self.id} ({self.peers.ended})"
        why = self.peers.lost.get(f"{peer}@{incarnation:x}")
        if why is None:
            return None
        reason = (
            f"node {peer} (incarnation {incarnation:x}) was declared down by {self.name} ({why}); "
            f"an incarnation that was lost never reconnects: it starts a new one to rejoin"
        )
        if self._log_limit.allow(f"refused {peer}", time.monotonic()):
            log.warning(
                "refused a handshake from node %s: %s",
                peer,
                reason,
                extra={"event": "handshake_refused", "peer": peer, "reason": why},
            )
        assert self.net is not None
        # What the refused node needs to decide whether it is the one to end (`_net_rejected`).
        return {
            "reason": reason,
            "quarantined": True,
            "node": peer,
            "inc": incarnation,
            "by": self.name,
            "by_inc": self.net.incarnation,
            "by_up": len(self.peers.ids),
        }

    def _net_rejected(self, name: str | None, address: str, body: dict[str, Any]) -> None:
        """A node turned this one's handshake away: logged (a line per peer per minute); if it
        declared this incarnation down, this node may have to end it (`actors._core.node.membership.yields`)."""
        net = self.net
        if net is None:
            return
        if self._log_limit.allow(f"rejected {address}", time.monotonic()):
            log.warning(
                "node %s at %s refused this node's handshake: %s",
                name or "?",
                address,
                body.get("reason"),
                extra={"event": "handshake_rejected", "peer": name, "address": address, "reason": body.get("reason")},
            )
        other, other_inc, other_up = body.get("by"), body.get("by_inc"), body.get("by_up")
        if (
            body.get("quarantined") is not True
            or body.get("node") != self.name
            or body.get("inc") != net.incarnation
            or not isinstance(other, str)
            or type(other_inc) is not int
            or type(other_up) is not int
        ):
            return
        mutual, my_up = self.peers.against(other, other_inc)
        if yields(self.name or "", my_up, other, other_up, mutual):
            self.end_incarnation(
                f"node {other} declared this incarnation down"
                + (f" and wins the tie ({other_up} nodes connected there, {my_up} here)" if mutual else "")
            )

    def _net_down(self, peer: str, incarnation: int, reason: str) -> None:
        node_id = f"{peer}@{incarnation:x}"
        watchers, minority = self.peers.down(peer, incarnation, reason)
        if self.seeds is not None:
            self.seeds.node_changed()
        # A node that closed (said goodbye) is no news; a lost one is.
        log.log(
            logging.INFO if reason == "peer_closed" else logging.WARNING,
            "nodedown: node %s (incarnation %x) is down (%s): what pointed at it exits with noconnection",
            peer,
            incarnation,
            reason,
            extra={"event": "nodedown", "peer": peer, "peer_incarnation": f"{incarnation:x}", "reason": reason},
        )
        if minority is not None:
            self.end_incarnation(minority)

        def down() -> None:
            for host in list(self._pool.hosts.values()):
                if host.state == "up":
                    self._rt.sys_send(host.proc, sysop.NodeDown(node_id, "noconnection"))
            self._rt.node_down(node_id, "noconnection")
            for fire in watchers:
                fire()
            self.events.publish("nodedown", peer)

        self._rt.call_soon(down)

    # -- the end of this incarnation -------------------------------------------------------

    def end_incarnation(self, reason: str) -> None:
        """Disconnect from every node, stop dialing, then tell the ``on_ended`` callbacks."""
        ended = self.peers.end(reason, self.closed)
        if ended is None:
            return
        callbacks, peers = ended
        log.warning(
            "node %s ends incarnation %s: %s",
            self.name,
            self.id,
            reason,
            extra={"event": "incarnation_ended", "reason": reason},
        )
        if self.seeds is not None:
            self.seeds.stop()
        net = self.net
        if net is not None:
            for peer in peers:
                net.disconnect(peer)
        for fn in callbacks:
            try:
                fn(reason)
            except Exception:
                log.exception("an on_ended callback of node %s failed", self.id)
