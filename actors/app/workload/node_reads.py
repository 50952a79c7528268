"""IOQ reads on every node of ``demo --nodes N``, every byte checked where it is read.

IOQ is per node (its servers are registered on the node that runs them),
so the reads must come from the node: a `NodeReader` actor, under the
node's workload supervisor beside that node's `FileServer` actors, reads
random slices of the controller's files (the same files: one machine)
through the node's IOQ and compares them with the bytes it loaded at
``init``.  It counts, it never decides: ``("counts",)`` returns its tallies,
and `NodeReads` on the controller polls every reader about once a second.
Each reader joins the process group ``demo_readers`` (`actors.pg`), and the
controller finds the readers of every node as that group's members.

A reader's tallies die with it (an actor kill, a SIGKILLed node): the
controller keeps the last report of every reader it ever saw, keyed by the
reader's ref, so what is summed is every read up to each reader's last
report.  Wrong bytes and hangs are losses; a failure with an exit reason
(the file or an IOQ server killed mid-read) is expected under kills.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from actors import CallTimeout, Exit, GenServer, Node, pg
from actors.ioq import IoTargetDown, call
from supervision import ChildSpec

from .base import Check, Driver
from .ioq_reads import FILE_NAME, SHARD

__all__ = ["NODE_READER", "READERS", "NodeReader", "NodeReads", "reader_spec"]

NODE_READER = "demo_node_reader"
#: The process group every node's reader joins.
READERS = "demo_readers"


class NodeReader(GenServer):
    """Reads through this node's IOQ every ``period`` seconds; ``("counts",)`` returns the tallies."""

    def init(self, paths: list[str], seed: int, period: float = 0.01, max_len: int = 8192) -> None:
        self.data = []
        for path in paths:
            with open(path, "rb") as fh:
                self.data.append(fh.read())
        self.rng = random.Random(seed)
        self.period = period
        self.max_len = max_len
        self.counts: Counter = Counter()
        try:
            pg.join(READERS, self.ref)
        except LookupError:  # a node without the pg scope: found by its name instead
            pass
        self.send_after(period, "read")

    def handle_info(self, message: Any) -> None:
        if message == "read":
            self._read()
            self.send_after(self.period, "read")

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == ("counts",):
            return dict(self.counts)
        raise ValueError(f"NodeReader: unknown call {request!r}")

    def _read(self) -> None:
        i = self.rng.randrange(len(self.data))
        data = self.data[i]
        length = self.rng.randint(1, self.max_len)
        pos = self.rng.randrange(0, len(data) - length)
        ref = self.whereis(FILE_NAME.format(i))
        if ref is None:
            self.counts["no_file"] += 1
            return
        try:
            got = call(ref, ("pread", pos, length), ("interactive", SHARD.format(i)), timeout=10.0)
        except CallTimeout:
            self.counts["hung"] += 1
        except (IoTargetDown, Exit):
            self.counts["failed"] += 1
        else:
            self.counts["ok" if bytes(got) == data[pos : pos + length] else "wrong"] += 1


def reader_spec(paths: list[str], seed: int, host: str = "demo_files") -> Any:
    """The child spec of a node's reader (beside the file actors, in their host)."""
    return ChildSpec(NODE_READER, (NodeReader, (paths, seed)), host=host, name=NODE_READER)


class NodeReads(Driver):
    """Polls every node's reader; sums the last report of every reader ever seen."""

    name = "node-reads"

    def __init__(self, node: Node, live: Callable[[], list[str]], *, period: float = 1.0) -> None:
        super().__init__(period)
        self.node = node
        self.live = live
        self.reports: dict[tuple[str, str], dict[str, int]] = {}  # (node id, actor id) -> its last counts
        self.where: dict[tuple[str, str], str] = {}  # the same key -> node name

    def tick(self, index: int) -> None:
        self.poll()

    def _readers(self) -> list[Any]:
        """The members of ``demo_readers`` (every node's reader), or, where
        this node runs no pg scope, each live node's registered reader."""
        try:
            return pg.members(READERS)
        except LookupError:
            pass
        found = []
        for name in self.live():
            try:
                ref = self.node.whereis(NODE_READER, node=name, timeout=2.0)
            except (Exit, CallTimeout):
                continue
            if ref is not None:
                found.append(ref)
        return found

    def poll(self) -> None:
        for ref in self._readers():
            try:
                counts = ref.call(("counts",), timeout=2.0)
            except (Exit, CallTimeout):
                continue
            with self.lock:
                self.reports[(ref.node_id, ref.id)] = counts
                self.where[(ref.node_id, ref.id)] = ref.node_id.rpartition("@")[0]

    def totals(self) -> tuple[Counter, Counter]:
        """All counts, and ``ok`` reads per node name."""
        total: Counter = Counter()
        per_node: Counter = Counter()
        with self.lock:
            for key, counts in self.reports.items():
                total.update(counts)
                per_node[self.where[key]] += counts.get("ok", 0)
        return total, per_node

    def check(self) -> Check:
        self.poll()
        total, per_node = self.totals()
        answered = total["ok"] + total["wrong"] + total["hung"]
        c = Check("ioq-nodes")
        c.lines.append(
            f"ioq on the nodes: {answered + total['failed']} reads through each node's own IOQ by "
            f"{len(self.reports)} readers (up to each one's last report): {total['ok']} correct bytes, "
            f"{total['wrong']} wrong bytes, {total['failed']} failed with an exit reason, "
            f"{total['hung']} hung; correct per node: "
            + (", ".join(f"{n} {k}" for n, k in sorted(per_node.items())) or "none")
        )
        c.lost = total["wrong"] + total["hung"]
        c.failed = total["failed"]
        c.counted = f"{answered} answered reads on the nodes"
        return c

    def snapshot(self) -> dict[str, Any]:
        total, _ = self.totals()
        return {"ok": total["ok"], "failed": total["failed"], "wrong": total["wrong"], "hung": total["hung"]}
