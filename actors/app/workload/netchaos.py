"""Network chaos for the demo on namespace hosts: cut a node's host off, cut a pair, heal, and check that
the cluster re-forms by itself after each heal.

One fault at a time, and only while every node is up (the node killer
waits for it too): every ``period`` seconds either a whole host is cut
off from the switch or the link between two node hosts is blackholed, for
``hold`` seconds (longer than ``net_ticktime``, so the cut is really
declared on both sides), then healed.  After each heal the driver waits
(bounded by ``heal_limit``) until the controller lists every node and
every node lists every other, reading each node's view through its
runtime directory as ``otpy status`` does, and records how long that took.
A heal that never completes is counted lost.  The controller's own host
is never cut: the controller is the demo, and has nobody to restart it.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from actors import CallTimeout, Exit, Node

from .base import Check, Driver
from .netns import Topology
from .nodes import NodeSet

__all__ = ["ClusterViews", "NetChaos", "full_mesh"]


class ClusterViews:
    """What the controller and each node lists: the controller asks every node over the cluster
    (`Node.nodes` with ``node=``).  Not through the nodes' runtime directories: an attached view
    in a process that is itself a node of the cluster would take that node's id as its own."""

    def __init__(self, ctl: Node, nodes: NodeSet) -> None:
        self.ctl = ctl
        self.nodes = nodes

    def read(self) -> dict[str, list[str] | None]:
        """Per node name, the nodes it lists now (None: it did not answer)."""
        views: dict[str, list[str] | None] = {self.ctl.name or "ctl": self.ctl.nodes()}
        for name in sorted(self.nodes.nodes):
            try:
                views[name] = self.ctl.nodes(node=name, timeout=2.0)
            except (Exit, CallTimeout):
                views[name] = None
        return views

    def close(self) -> None:
        """Nothing held: kept so the driver's stop and check read alike."""


def full_mesh(views: dict[str, list[str] | None]) -> bool:
    everyone = set(views)
    return all(v is not None and set(v) == everyone - {name} for name, v in views.items())


class NetChaos(Driver):
    """Cuts, pair cuts and heals on the nodes' hosts; see the module's docstring."""

    name = "net-chaos"

    def __init__(
        self,
        ctl: Node,
        nodes: NodeSet,
        topo: Topology,
        period: float,
        hold: float,
        heal_limit: float,
        *,
        first_after: float | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(period)
        self.ctl = ctl
        self.nodes = nodes
        self.topo = topo
        self.hold = hold
        self.heal_limit = heal_limit
        self.first_after = period if first_after is None else first_after
        self.rng = random.Random(seed)
        self.views = ClusterViews(ctl, nodes)
        self.cuts = 0
        self.pair_cuts = 0
        self.heals = 0
        self.healed: list[float] = []  # seconds from each heal to a full mesh again
        self.unhealed: list[str] = []
        self.log: list[str] = []
        self._busy = threading.Lock()
        self.waiting = ""  # why no fault was made at the last tick (shown in the summary)

    def _run(self, index: int) -> None:
        if self.stop_flag.wait(self.first_after):
            return
        super()._run(index)

    def tick(self, index: int) -> None:
        names = sorted(self.nodes.nodes)
        if self.nodes.up() != names:
            self.waiting = f"waiting for every node to be up: {self.nodes.line()}"
            return  # one fault at a time: a node is down or still rejoining
        views = self.views.read()
        if not full_mesh(views):
            self.waiting = f"waiting for a full mesh: {views}"
            return
        self.waiting = ""
        with self._busy:
            self.nodes.faulted = True
            try:
                self._fault(names)
            finally:
                self.nodes.faulted = False

    def _fault(self, names: list[str]) -> None:
        if len(names) >= 2 and (self.cuts + self.pair_cuts) % 2 == 1:  # a host cut, a pair cut, and so on
            a, b = sorted(self.rng.sample(names, 2))
            what = f"pair cut {a}-{b}"
            self.topo.cut_pair(a, b)
            with self.lock:
                self.pair_cuts += 1
        else:
            a = self.rng.choice(names)
            what = f"cut {a}"
            self.topo.cut(a)
            with self.lock:
                self.cuts += 1
        with self.lock:
            self.log.append(what)
        try:
            self.stop_flag.wait(self.hold)  # stopping the load ends the cut early; it still heals below
        finally:
            self.topo.heal()
        healed_at = time.monotonic()
        with self.lock:
            self.heals += 1
        deadline = healed_at + self.heal_limit
        views: dict[str, list[str] | None] = {}
        for _ in range(100_000):  # bounded by the deadline too
            views = self.views.read()
            if full_mesh(views) and self.nodes.up() == names:
                with self.lock:
                    self.healed.append(time.monotonic() - healed_at)
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)  # polling the nodes' views of the cluster, bounded by the deadline
        with self.lock:
            self.unhealed.append(f"after {what}: no full mesh {self.heal_limit:g} s after the heal: {views}")

    def stop(self, timeout: float = 15.0) -> None:
        super().stop(timeout)
        self.views.close()  # reopened (one per node) if the summary reads the views again

    def summary(self) -> str:
        with self.lock:
            return f"network: {self.cuts} cuts, {self.pair_cuts} pair cuts, {self.heals} heals"

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "cuts": self.cuts,
                "pair_cuts": self.pair_cuts,
                "heals": self.heals,
                "last": self.log[-1] if self.log else "",
            }

    def check(self) -> Check:
        """Every heal re-formed the cluster in time, and at the end every node lists every other."""
        c = Check("network")
        views = self.views.read()
        self.views.close()
        final = full_mesh(views)
        with self.lock:
            longest = max(self.healed) if self.healed else 0.0
            c.lines.append(
                f"network: {self.cuts} host cuts, {self.pair_cuts} pair cuts, {self.heals} heals; "
                f"{len(self.healed)} of them re-formed the whole cluster by itself (longest "
                f"{longest:.1f} s after the heal, limit {self.heal_limit:g} s)"
            )
            c.lines.extend(f"  {why}" for why in self.unhealed)
            if self.waiting and not self.heals:
                c.lines.append(f"  no fault made: {self.waiting}")
            c.lost = len(self.unhealed) + (0 if final else 1)
        c.lines.append(
            "  every node back in the cluster: "
            + ("yes, " if final else "NO, ")
            + "; ".join(f"{n} lists {', '.join(v) if v else 'nobody'}" for n, v in views.items())
        )
        c.counted = f"{self.heals} heals"
        return c

    def settle(self, deadline: float) -> bool:
        """After the load: wait (bounded) for a fault under way to heal and the mesh to re-form."""
        for _ in range(100_000):
            if full_mesh(self.views.read()):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)  # polling the nodes' views, bounded by the deadline
        return False
