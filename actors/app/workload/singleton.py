"""The cluster's one `Beacon`: a singleton named across the cluster that fails over.

``demo --nodes N`` puts one `Beacon` under the controller's workload
supervisor with every node as a candidate and the cluster-wide name
``demo_singleton`` (`actors.global_names`): it runs on the first node up,
and when that node is SIGKILLed (or the beacon is killed) the supervisor
restarts it on the next one.  `SingletonWatch` asks every node's copy of the
name table, about twice a second, who holds the name, and checks that no
look ever found two live holders (a copy a moment behind during a failover
names a dead holder: counted, not a fault).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors import ActorRef, CallTimeout, Exit, GenServer, Node, global_names
from supervision import ChildSpec

from .base import Check, Driver, wait_until

__all__ = ["SINGLETON", "Beacon", "SingletonWatch", "singleton_spec"]

SINGLETON = "demo_singleton"


class Beacon(GenServer):
    """Answers ``("where",)`` with its node's name and how many times it was asked."""

    def init(self) -> None:
        self.asked = 0

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == ("where",):
            self.asked += 1
            return (self.ref.node_id.rpartition("@")[0], self.asked)
        raise ValueError(f"Beacon: unknown call {request!r}")


def singleton_spec(nodes: list[str]) -> ChildSpec:
    """The beacon's spec: named cluster-wide, started on the first of ``nodes`` that is up."""
    return ChildSpec(SINGLETON, (Beacon, ()), name=global_names.GlobalName(SINGLETON), node=tuple(nodes), shutdown=2.0)


def _alive(ref: ActorRef) -> bool:
    try:
        return ref.is_alive(timeout=2.0)
    except (Exit, CallTimeout):
        return False


class SingletonWatch(Driver):
    """Looks at every node's copy of the name table; counts what it sees."""

    name = "singleton"

    def __init__(self, node: Node, live: Callable[[], list[str]], *, period: float = 0.5) -> None:
        super().__init__(period)
        self.node = node
        self.live = live
        self.looks = 0
        self.behind = 0  # looks where the copies named different holders, at most one of them alive
        self.two_live = 0  # looks that found two live holders: a fault
        self.holders: list[ActorRef] = []  # every holder seen, in order

    def copies(self) -> dict[str, ActorRef | None]:
        """Node name -> the holder its copy names (the controller's own copy too)."""
        seen: dict[str, ActorRef | None] = {str(self.node.name): global_names.whereis(SINGLETON, timeout=2.0)}
        for name in self.live():
            try:
                server = self.node.whereis(global_names.SERVER_NAME, node=name, timeout=2.0)
                if server is not None:
                    seen[name] = server.call(("whereis", SINGLETON), timeout=2.0)
            except (Exit, CallTimeout):
                continue  # that node is going down or restarting
        return seen

    def tick(self, index: int) -> None:
        holders = list(dict.fromkeys(ref for ref in self.copies().values() if ref is not None))
        alive = [ref for ref in holders if _alive(ref)] if len(holders) > 1 else holders
        with self.lock:
            self.looks += 1
            self.holders.extend(ref for ref in holders if ref not in self.holders)
            if len(holders) > 1:
                self.behind += 1
                if len(alive) > 1:
                    self.two_live += 1

    def _settled(self) -> bool:
        holders = set(self.copies().values())
        holder = next(iter(holders)) if len(holders) == 1 else None
        return holder is not None and _alive(holder)

    def settle(self, deadline: float) -> None:
        wait_until(self._settled, deadline)

    def check(self) -> Check:
        c = Check("singleton")
        try:
            copies = self.copies()
        except (Exit, CallTimeout, LookupError):
            copies = {}
        holders = set(copies.values())
        holder = next(iter(holders)) if len(holders) == 1 else None
        where = "nowhere"
        if holder is not None:
            try:
                where = holder.call(("where",), timeout=5.0)[0]
            except (Exit, CallTimeout):
                holder = None
        with self.lock:
            c.lines.append(
                f"singleton: one Beacon named {SINGLETON!r} cluster-wide, candidates every node; "
                f"{len(self.holders)} holder{'' if len(self.holders) == 1 else 's'} over the run (failovers and "
                f"restarts), on {where} at the end; "
                f"{self.looks} looks at every node's copy: {self.two_live} found two live holders, "
                f"{self.behind} found a copy a moment behind a failover; "
                f"at the end {len(copies)} copies name "
                + (
                    "one live holder"
                    if holder
                    else ", ".join(
                        f"{n}: {ref!r}" + ("" if ref is None else " (alive)" if _alive(ref) else " (dead)")
                        for n, ref in sorted(copies.items())
                    )
                )
            )
            c.lost = self.two_live + (0 if holder is not None else 1)
        c.counted = f"{self.looks} looks at the singleton"
        return c

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"looks": self.looks, "holders": len(self.holders), "two_live": self.two_live}
