"""The clustered replicator on PostgreSQL under faults: nodes, a writer, the checks.

`PgNode` is a replicator node process (`cluster_peer.py` on the store, jobs
as threads of the node's process, so a SIGSTOP freezes them with it) whose
store URL goes through its own `PgProxy`, so one node can be cut off from the
store.  `Writer` keeps writing to the sources and remembers what the store
acknowledged.  The checks read the store's audit of runs (Jepsen-style: a
history, then a verdict): `overlapping_runs` (no job ran on two nodes at
once), `running_jobs` (liveness) and `assert_all_replicated` (every
acknowledged write in its target at its latest revision).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from actors.leases import Run, overlapping_runs
from actors.replicator.docs_model import DocStoreError
from actors.replicator.lease import read_runs
from actors.replicator.stores import open_db
from tests.cluster.netkit import LineProcess
from tests.replicator.pg_kit import latest_revs
from tests.replicator.pg_proxy import PgProxy

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster_peer.py")
QUIET = 2.0
START = 0.5
TTL = 4.0
TICK = 2.0
#: After a fault every job runs again within this: the peers' --quiet, one lease TTL and 10 s of slack.
LIVENESS = QUIET + TTL + 10.0


class PgNode(LineProcess):
    what = "replicator node"

    def __init__(self, name: str, url: str, proxy: PgProxy) -> None:
        self.name = name
        self.proxy = proxy
        super().__init__(
            [
                sys.executable,
                PEER,
                "--name",
                name,
                "--db",
                url,
                "--store",
                "--quiet",
                str(QUIET),
                "--start",
                str(START),
                "--lease-ttl",
                str(TTL),
                "--ticktime",
                str(TICK),
                "--backoff",
                "0.5",
                "--job-host",
                "thread",
            ]
        )

    def connect(self, other: "PgNode") -> None:
        self.command(f"connect {other.address}")
        assert self.expect("CONNECT", timeout=30.0) == f"CONNECTED {other.name}"

    def start(self) -> None:
        self.command("start")
        self.expect("STARTED", timeout=60.0)

    def status(self) -> dict[str, Any]:
        self.command("status")
        return json.loads(self.expect("STATUS", timeout=30.0).split(" ", 1)[1])


def wait_until(what: str, check: Callable[[], Any], timeout: float) -> Any:
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        pause.wait(0.2)
    raise AssertionError(f"not within {timeout:.1f} s: {what} (last: {last!r})")


def running_jobs(url: str, now: float | None = None) -> dict[str, str]:
    """job -> the node whose run of it is live in the audit right now (lease not ended)."""
    now = time.time() if now is None else now
    return {r.job: r.node for r in read_runs(url) if r.start <= now < r.end}


def assert_no_overlap(url: str) -> list[Run]:
    runs = read_runs(url)
    bad = overlapping_runs(runs)
    assert not bad, "a job ran on two nodes at once: " + "; ".join(
        f"{x.job[:8]} {x.node}#{x.token} [{x.start:.2f},{x.end:.2f}) and {y.node}#{y.token} [{y.start:.2f},{y.end:.2f})"
        for x, y in bad
    )
    return runs


class Writer:
    """Updates documents of the sources round-robin until stopped; keeps what was acknowledged."""

    def __init__(self, url: str, sources: list[str], max_writes: int = 5000) -> None:
        self.url = url
        self.sources = sources
        self.max_writes = max_writes
        self.acked: dict[tuple[str, str], str] = {}
        self.failed = 0
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        dbs: dict[str, Any] = {}
        try:
            for i in range(self.max_writes):
                if self.stop_event.wait(0.05):
                    return
                name = self.sources[i % len(self.sources)]
                doc_id = f"w{(i // len(self.sources)) % 7}"
                try:
                    db = dbs.get(name) or dbs.setdefault(name, open_db(name, store=self.url, op_timeout=5.0))
                    current = db.get(doc_id)
                    rev = db.put(doc_id, {"i": i}, current.rev if current else None)
                    self.acked[(name, doc_id)] = rev
                except DocStoreError:
                    self.failed += 1  # not acknowledged: the store was away
        finally:
            for db in dbs.values():
                db.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=30)


def assert_all_replicated(url: str, pairs: list[tuple[str, str]], writer: Writer | None, timeout: float) -> int:
    """Every source's documents are in its target at the source's latest revision; and
    every acknowledged write is at least that recent there.  Returns the documents checked."""
    target_of = dict(pairs)

    def caught_up() -> bool:
        return all(latest_revs(url, t) == latest_revs(url, s) for s, t in pairs)

    wait_until("every target caught up with its source", caught_up, timeout)
    checked = 0
    if writer is not None:
        for (source, doc_id), rev in writer.acked.items():
            target_rev = latest_revs(url, target_of[source]).get(doc_id)
            assert target_rev is not None, f"acknowledged {source}/{doc_id} missing from its target"
            assert int(target_rev.split("-")[0]) >= int(rev.split("-")[0])
            checked += 1
    return checked
