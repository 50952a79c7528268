"""The other nodes as one node sees them: who is connected, who was declared down, who waits.

The link's thread changes this table (a node up, a node down), while the
program's threads read it (`Node.nodes`, `Node.wait_for_node`) and actors'
requests watch it (``monitor_node``); one condition guards it and is
notified on every change, so a wait for a node wakes as soon as it comes.
Two facts outlive a connection: the incarnations this node declared down
(they never connect again, so no ref of theirs comes back to life), and
whether this node's own incarnation has ended (then it connects to nothing
more, and the program starts a new one).  The decisions about both are pure
policy, in `actors._core.node.membership`; this module only keeps the facts.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from actors._core.node.membership import SILENCE, Membership, PeerInfo

__all__ = ["NodeMonitor", "PeerNodes"]


class NodeMonitor:
    """A watch on another node from the host program: `wait` returns
    ``("nodedown", name)`` once the node is lost (at once when it is not
    connected when the watch is set)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._event = threading.Event()

    def fire(self) -> None:
        self._event.set()

    def wait(self, timeout: float | None = None) -> tuple[str, str]:
        """Block until the node is down; raises `TimeoutError` after ``timeout``."""
        if not self._event.wait(timeout):
            raise TimeoutError(f"node {self.name} still up after {timeout} s")
        return ("nodedown", self.name)

    def is_down(self) -> bool:
        return self._event.is_set()


class PeerNodes:
    """The connected nodes (name -> node id), their watchers, and what outlives a connection."""

    def __init__(self, me: str) -> None:
        self.ids: dict[str, str] = {}  # connected node name -> its node id
        self.lock = threading.Condition()  # also notified when a node comes up or goes
        self._watchers: dict[str, list[Callable[[], None]]] = {}
        # Who this incarnation counts as its cluster (`actors._core.node.membership`), and
        # why it ended, once it has: then `otpy node` starts a new one.
        self.members = Membership(me)
        # Incarnations of other nodes this node declared down (node id -> why):
        # they never connect again, so no ref of theirs comes back to life.
        self.lost: dict[str, str] = {}
        self.ended: str | None = None
        self._on_ended: list[Callable[[str], None]] = []

    def listing(self) -> list[dict[str, Any]]:
        """The connected nodes as ``otpy status`` lists them."""
        with self.lock:
            return self.members.peers()

    def wait_for(self, name: str, timeout: float) -> bool:
        with self.lock:
            return self.lock.wait_for(lambda: name in self.ids, timeout)

    def watch(self, name: str, fire: Callable[[], None]) -> None:
        """``fire()`` once node ``name`` is lost; at once when it is not connected."""
        with self.lock:
            if name in self.ids:
                self._watchers.setdefault(name, []).append(fire)
                return
        fire()

    def up(self, peer: str, address: str | None, incarnation: int) -> None:
        with self.lock:
            self.ids[peer] = f"{peer}@{incarnation:x}"
            self.members.node_up(PeerInfo(peer, address, incarnation, time.time()))
            self.lock.notify_all()

    def down(self, peer: str, incarnation: int, reason: str) -> tuple[list[Callable[[], None]], str | None]:
        """That incarnation of ``peer`` is lost: its watchers (to fire), and, when
        this loss leaves this node on the minority side of a cut, why it must end."""
        node_id = f"{peer}@{incarnation:x}"
        with self.lock:
            self.lost[node_id] = reason
            if self.ids.get(peer) == node_id:
                del self.ids[peer]
                self.members.node_down(peer, reason)
            watchers = self._watchers.pop(peer, [])
            minority = reason == SILENCE and self.members.in_minority()
            reachable, members = len(self.members.up) + 1, len(self.members.members())
            self.lock.notify_all()
        why = f"on the minority side of a network cut ({reachable} of {members} nodes reachable)" if minority else None
        return watchers, why

    def on_ended(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(reason)`` once this incarnation ends (at once if it has)."""
        with self.lock:
            if self.ended is None:
                self._on_ended.append(fn)
                return
        fn(self.ended)

    def end(self, reason: str, closed: bool) -> tuple[list[Callable[[str], None]], list[str]] | None:
        """Mark this incarnation ended: its ``on_ended`` callbacks and the peers to
        disconnect, or None when it had ended already (or the node is ``closed``)."""
        with self.lock:
            if self.ended is not None or closed:
                return None
            self.ended = reason
            callbacks, self._on_ended = self._on_ended, []
            peers = list(self.ids)
            self.lock.notify_all()
        return callbacks, peers

    def against(self, other: str, other_inc: int) -> tuple[bool, int]:
        """Whether this node declared ``other``'s incarnation down too, and how many
        nodes are connected here: what decides who yields after a mutual refusal."""
        with self.lock:
            return f"{other}@{other_inc:x}" in self.lost, len(self.ids)
