"""What ``couch_replicator_clustering`` knows, as a plain class: members, stability,
and what every member runs.

Members are the nodes whose replicator said hello, not every connected node:
a node that runs no replicator (a driver, an observer) owns nothing.  Each
member reports its *view*: the members it sees and the jobs in its
scheduler.  From the membership (`clustering.Membership`, with its quiet
period) and the views, `ClusterState.view` gives the doc processor what
`clustering.plan` needs:

* ``stable``: membership has been quiet long enough **and** every member
  reports the same members as this node.  Nodes connect pairwise, so a
  cluster that is not a full mesh (c connected to a only) would otherwise
  compute owners from different member lists and could run a job twice;
  with the agreement check it runs nothing new until the views agree
  (``disagree`` names the nodes that differ).
* ``elsewhere``: job -> member for every job another member runs, from its
  latest report.  A report is replaced by the next one from the same node
  (messages between two nodes arrive in order) and dropped when the node
  goes down.

No clock is read here: ``now`` comes in, as everywhere in policy.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from .clustering import DEFAULT_QUIET_PERIOD, DEFAULT_START_PERIOD, Membership

__all__ = ["ClusterState", "ClusterView", "PeerReport"]


@dataclass(frozen=True)
class PeerReport:
    """What one member said last: the members it sees and the jobs it runs."""

    live: tuple[str, ...]
    running: frozenset[Hashable]


@dataclass(frozen=True)
class ClusterView:
    """The doc processor's input: who is live, whether to act on ownership, who runs what."""

    me: str
    live: tuple[str, ...]
    stable: bool
    quiet: bool
    disagree: tuple[str, ...]
    elsewhere: dict[Hashable, str]


class ClusterState:
    """Membership, stability and the members' reports, updated by events with ``now``."""

    def __init__(
        self,
        me: str,
        now: float,
        quiet_period: float = DEFAULT_QUIET_PERIOD,
        start_period: float = DEFAULT_START_PERIOD,
    ) -> None:
        self.me = me
        self.membership = Membership(me, now, quiet_period, start_period)
        self.reports: dict[str, PeerReport] = {}
        self.running: frozenset[Hashable] = frozenset()

    @property
    def live(self) -> tuple[str, ...]:
        return self.membership.live

    def report(self) -> PeerReport:
        """This node's report, sent to every member whenever it changes."""
        return PeerReport(self.live, self.running)

    def hello(self, node: str, report: PeerReport, now: float) -> bool:
        """A member's replicator said hello (or reported again); True when it is new here."""
        if node == self.me:
            raise ValueError(f"{node} is this node")
        new = node not in self.reports
        self.reports[node] = report
        if new:
            self.membership.node_up(node, now)
        return new

    def peer_report(self, node: str, report: PeerReport) -> bool:
        """A later report from a member; ignored (False) from a node that is not one."""
        if node not in self.reports:
            return False
        self.reports[node] = report
        return True

    def node_down(self, node: str, now: float) -> bool:
        """A node was lost; True when it was a member (its report is forgotten)."""
        if self.reports.pop(node, None) is None:
            return False
        self.membership.node_down(node, now)
        return True

    def set_running(self, jobs: Iterable[Hashable]) -> bool:
        """The jobs in this node's scheduler; True when that changed."""
        running = frozenset(jobs)
        changed = running != self.running
        self.running = running
        return changed

    def disagree(self) -> tuple[str, ...]:
        live = self.live
        return tuple(sorted(node for node, rep in self.reports.items() if rep.live != live))

    def view(self, now: float) -> ClusterView:
        quiet = self.membership.is_stable(now)
        disagree = self.disagree()
        elsewhere: dict[Hashable, str] = {}
        for node in sorted(self.reports):
            for job in self.reports[node].running:
                elsewhere.setdefault(job, node)
        return ClusterView(self.me, self.live, quiet and not disagree, quiet, disagree, elsewhere)

    def next_check(self) -> float | None:
        return self.membership.next_check()
