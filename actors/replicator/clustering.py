"""Which node runs which replication job: upstream's clustering, as pure policy.

Upstream CouchDB (``couch_replicator_clustering`` over ``mem3_cluster``)
gives every replication document one owner among the live nodes::

    owner(Key, Nodes) -> hd(rotate_list(Key, lists:usort(Nodes)))
    rotate_list(Key, List) -> split at crc32(Key) rem length(List), T ++ H

so the owner is ``sorted(live)[crc32(key) % len(live)]``.  Every node
computes the same answer from the same membership, so no coordination is
needed while membership is agreed.  Right after a node joins or leaves it
is not: the cluster is *unstable* until membership has not changed for a
quiet period (``[replicator] cluster_quiet_period``, 60 s), and for the
first quiet period after a node starts a shorter ``cluster_start_period``
(5 s) applies.  While unstable, ownership is not acted on: no node claims a
job it does not already run, and no node drops one.

`owner` is the hash.  `Membership` is ``mem3_cluster``'s state machine with
its timer made explicit: changes reset the check time, and `is_stable(now)`
runs the checks that fell due (a check passes when ``now - last_change >=
interval``; upstream compares with ``>`` on a timer that always fires a
little late).  `plan` turns jobs, membership and stability into what this
node should start and stop.  The clock is the caller's.

Upstream hashes the Erlang term ``{DbName, DocId}``; here the key is a
string (by default ``"<db_name>/<doc_id>"``, see `job_key`) hashed as
UTF-8, so owners differ from a CouchDB cluster's but follow the same rule.
Transient jobs (``_replicate`` requests, no document) belong to the node
that created them, as upstream's ``owner/2`` returns ``node()`` for them.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "DEFAULT_QUIET_PERIOD",
    "DEFAULT_START_PERIOD",
    "Membership",
    "OwnershipPlan",
    "job_key",
    "owner",
    "plan",
]

DEFAULT_QUIET_PERIOD = 60.0
DEFAULT_START_PERIOD = 5.0


def _key_bytes(key: str | bytes) -> bytes:
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode("utf-8")
    raise TypeError(f"ownership key must be str or bytes, got {type(key).__name__}")


def owner(key: str | bytes, live_nodes: Iterable[str]) -> str:
    """The node that owns ``key``: ``sorted(set(live))[crc32(key) % n]``.

    `ValueError` when no node is live (upstream would crash in ``rem 0``).
    """
    nodes = sorted(set(live_nodes))
    if not nodes:
        raise ValueError("no live node to own a job")
    return nodes[zlib.crc32(_key_bytes(key)) % len(nodes)]


def job_key(db_name: str | None, doc_id: str | None) -> str | None:
    """The ownership key of a job made from a replicator document; None for a transient job."""
    if db_name is None or doc_id is None:
        return None
    return f"{db_name}/{doc_id}"


def _period(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


class Membership:
    """Live nodes as seen by ``me``, and whether they have been quiet long enough.

    ``mem3_cluster`` with an explicit timer: it starts unstable with a check
    due ``start_period`` after start; a node going up or down makes it
    unstable and moves the check to ``interval(now)`` after the change,
    where ``interval`` is the start period during the first quiet period
    after start and the quiet period afterwards.  Once a check passes the
    cluster stays stable until the next change.
    """

    def __init__(
        self,
        me: str,
        now: float,
        quiet_period: float = DEFAULT_QUIET_PERIOD,
        start_period: float = DEFAULT_START_PERIOD,
        nodes: Iterable[str] = (),
    ) -> None:
        if not isinstance(me, str) or not me:
            raise ValueError(f"node name must be a non-empty string, got {me!r}")
        self.me = me
        self.quiet_period = _period("cluster_quiet_period", quiet_period)
        self.start_period = _period("cluster_start_period", start_period)
        self._nodes: set[str] = {me, *nodes}
        self._start = now
        self._last_change = now
        self._stable = False
        self._check_at: float | None = now + self.start_period
        self.changes = 0

    @property
    def live(self) -> tuple[str, ...]:
        """Live nodes, this one included, sorted as ownership needs them."""
        return tuple(sorted(self._nodes))

    @property
    def last_change(self) -> float:
        return self._last_change

    def interval(self, now: float) -> float:
        """The quiet time required at ``now`` (upstream ``interval/1``)."""
        return self.quiet_period if now - self._start > self.quiet_period else self.start_period

    def node_up(self, node: str, now: float) -> bool:
        """Record a nodeup; True if membership changed (then the cluster is unstable)."""
        if node in self._nodes:
            return False
        self._nodes.add(node)
        self._changed(now)
        return True

    def node_down(self, node: str, now: float) -> bool:
        """Record a nodedown; True if membership changed.  This node never goes down here."""
        if node == self.me:
            raise ValueError(f"{node} is this node; it cannot be recorded as down")
        if node not in self._nodes:
            return False
        self._nodes.discard(node)
        self._changed(now)
        return True

    def _changed(self, now: float) -> None:
        self.changes += 1
        self._last_change = max(now, self._last_change)
        self._stable = False
        self._check_at = self._last_change + self.interval(self._last_change)

    def set_quiet_period(self, seconds: float, now: float) -> None:
        """A new ``cluster_quiet_period`` (a live config change); the pending check is recomputed."""
        self.quiet_period = _period("cluster_quiet_period", seconds)
        if not self._stable:
            self._check_at = max(now, self._last_change + self.interval(now))

    def is_stable(self, now: float) -> bool:
        """Run the checks that fell due by ``now``; True once one passed and nothing changed since."""
        check = self._check_at
        while not self._stable and check is not None and check <= now:
            interval = self.interval(check)
            if check - self._last_change >= interval:
                self._stable = True
                self._check_at = None
            else:
                check = max(check + interval, self._last_change + interval)
                self._check_at = check
        return self._stable

    def next_check(self) -> float | None:
        """When stability should be asked about next (None while stable): the caller's timer."""
        return None if self._stable else self._check_at


@dataclass(frozen=True)
class OwnershipPlan:
    """What this node does now: ``start`` jobs it owns and does not run, ``stop`` jobs it
    runs and does not own.  Both are empty while the cluster is unstable."""

    stable: bool
    start: frozenset[Hashable]
    stop: frozenset[Hashable]
    owned: frozenset[Hashable]


def plan(
    jobs: Mapping[Hashable, str | bytes | None],
    running: Collection[Hashable],
    me: str,
    live_nodes: Iterable[str],
    stable: bool,
    running_elsewhere: Mapping[Hashable, str] | None = None,
) -> OwnershipPlan:
    """Which of ``jobs`` (id -> ownership key, None for this node's transient jobs) to run here.

    Transient jobs are always this node's.  While unstable only they may be
    started; a document job is never claimed nor released, so a job that
    ran on a lost node waits for stability before a survivor takes it, and
    a job owned by a node that just came back stays where it runs until
    stability hands it back.  A running job that no longer exists is
    stopped in any case (its document was deleted).

    ``running_elsewhere`` (job -> node, as other nodes report what they
    run) closes the gap upstream leaves open: a node that restarts is
    stable after the short start period while the others are still in
    their quiet period and keep its jobs.  A job that another live node
    reports running is not started here; it is started on a later plan,
    after that node has stopped it.  Reports from nodes that are not live
    are ignored.
    """
    live = set(live_nodes) | {me}
    running_set = set(running)
    gone = frozenset(j for j in running_set if j not in jobs)
    transient = frozenset(j for j, key in jobs.items() if key is None)
    if not stable:
        return OwnershipPlan(False, frozenset(transient - running_set), gone, transient)
    owned = frozenset(j for j, key in jobs.items() if key is None or owner(key, live) == me)
    busy = {j for j, node in (running_elsewhere or {}).items() if node != me and node in live}
    start = frozenset(j for j in owned - running_set if j in transient or j not in busy)
    return OwnershipPlan(True, start, frozenset(running_set - owned), owned)
