"""The methods of `Node` about the other nodes of its cluster, for the program that holds it.

`Node` inherits them: they are its public face on distribution (connect, list
the connected nodes, watch them, learn that this incarnation ended), each a
thin call into what does the work, the node's `Distribution`, its `PeerNodes` table
and its `Remote` requests.  Apart from `Node` because the handle's other jobs
(actors, closing) fill its own module.
"""

from __future__ import annotations

from typing import Any, Callable

from actors._core.node.distribution import Distribution
from actors._core.node.peers import NodeMonitor, PeerNodes
from actors._core.node.remote import Remote
from actors._core.wire.ref import ActorRef

__all__ = ["OtherNodes"]


class OtherNodes:
    """`Node`'s methods about other nodes (a base class of `Node`, which sets what they use)."""

    name: str | None
    _dist: Distribution
    _peers: PeerNodes
    _remote: Remote
    _check_open: Callable[[], None]

    def connect(self, address: str, timeout: float = 10.0) -> str:
        """Join the node listening at ``address`` (``tcp://HOST:PORT``); returns its name.

        Connecting to a node already connected returns its name at once.
        Raises `ConnectError` when it cannot be reached in ``timeout``, does
        not hold this cluster's key (the CurveZMQ handshake fails), or is an
        incarnation one of the two nodes declared down before (it must
        restart to rejoin)."""
        self._check_open()
        return self._dist.connect(address, timeout)

    def nodes(self, node: str | None = None, timeout: float | None = 5.0) -> list[str]:
        """The names of the nodes connected now; with ``node``, those the connected node ``node``
        is connected to, asked over the cluster (`Exit` ``noconnection`` when it is not connected)."""
        if node is not None and node != self.name:
            return self._remote.nodes_of(node, timeout)
        return sorted(self._peers.ids)

    def peers(self) -> list[dict[str, Any]]:
        """The nodes connected now, by name: ``name``, ``address``, ``incarnation`` (hex) and
        ``up_since`` (wall-clock seconds of their nodeup), as ``otpy status`` lists them."""
        return self._peers.listing()

    @property
    def ended(self) -> str | None:
        """Why this incarnation has ended (None while it has not).

        A node ends its incarnation when it finds itself on the minority side
        of a network cut, or learns that a peer declared it down (see
        docs/distribution.md, "When the network fails"): it disconnects from
        every node, stops dialing its seeds, refuses every handshake, and
        stops every actor it runs (`actors.INCARNATION_ENDED`); spawns and
        calls raise `actors.IncarnationEnded`.  A node made with ``rejoin=``
        then starts a new incarnation in place (this is None again); another
        is closed by its program, which may start a new `Node`."""
        return self._peers.ended

    def wait_for_node(self, name: str, timeout: float = 10.0) -> bool:
        """Block until node ``name`` is connected (it connected to this one,
        say); False after ``timeout``."""
        return self._peers.wait_for(name, timeout)

    def monitor_node(self, name: str) -> NodeMonitor:
        """Watch node ``name``: the returned `NodeMonitor` waits for
        ``("nodedown", name)``, given once; at once when it is not connected."""
        watch = NodeMonitor(name)
        self._peers.watch(name, watch.fire)
        return watch

    def monitor_nodes(self, ref: ActorRef, flag: bool = True) -> None:
        """``net_kernel:monitor_nodes(Flag)`` for the actor ``ref``: it gets
        ``("nodeup", name)`` and ``("nodedown", name)`` in ``handle_info`` for
        every node that connects or is lost from now on, in order (nodes
        connected already are not announced: read `nodes` after this).
        ``flag=False`` ends it; a subscriber that dies is forgotten."""
        self._check_open()
        self._dist.events.subscribe(ref, flag)

    def net_stats(self) -> dict[str, int]:
        """The node-to-node link's counters (frames and heartbeat ticks in and out,
        connections up and down, ...); empty for a node that is not distributed."""
        return self._dist.net.stats() if self._dist.net is not None else {}
