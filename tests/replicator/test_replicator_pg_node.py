"""One clustered node on the PostgreSQL store: documents, databases, leases and the audit
all in PostgreSQL, jobs in their own host processes."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from actors import Node
from actors.leases import overlapping_runs
from actors.replicator import ReplicationJob, ReplicatorSup, cluster_status, delete_replication, put_replication
from actors.replicator.docs_model import LOCAL_PREFIX
from actors.replicator.lease import read_runs
from actors.replicator.stores import open_db
from tests.replicator.pg_kit import latest_revs, make_pg_sources


def wait_until(what: str, check: Any, timeout: float = 60.0) -> Any:
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        pause.wait(0.1)
    raise AssertionError(f"not within {timeout} s: {what} (last: {last!r})")


@pytest.mark.timeout(120)
def test_one_node_runs_replications_of_the_store_under_leases(postgres_url: str) -> None:
    reps = make_pg_sources(postgres_url, 3, 12)
    for doc_id, source, target in reps:
        put_replication(
            postgres_url,
            doc_id,
            source,
            target,
            continuous=True,
            create_target=True,
            checkpoint_interval=200,
            worker_batch_size=5,
            worker_processes=2,
        )
    config = {
        "replicator": {
            "cluster": "true",
            "store": postgres_url,
            "cluster_start_period": "0.2",
            "doc_poll_interval": "0.1",
            "lease_ttl": "4",
        }
    }
    with Node(config, name="solo", listen="tcp://127.0.0.1:0") as node:
        node.spawn(ReplicatorSup, ReplicationJob, "own", name="couch_replicator_sup", host="own")
        wait_until("the three jobs run", lambda: len(cluster_status(node)["running"]) == 3)
        for _doc, source, target in reps:
            wait_until(
                f"{target} has its 12 documents",
                lambda s=source, t=target: latest_revs(postgres_url, t) == latest_revs(postgres_url, s),
            )
        runs = read_runs(postgres_url)
        assert sorted(r.node for r in runs) == ["solo"] * 3 and len({r.job for r in runs}) == 3
        # renewals move the runs' leases on while they run
        first = {r.job: r.end for r in runs}
        wait_until(
            "the leases were renewed", lambda: all(r.end > first[r.job] for r in read_runs(postgres_url)), timeout=30.0
        )
        job_of = cluster_status(node)["docs"]
        with open_db(reps[0][1], store=postgres_url) as source:
            wait_until(
                "the first job checkpointed in its source",
                lambda: source.get_local(LOCAL_PREFIX + job_of[reps[0][0]]) is not None,
                timeout=30.0,
            )
        assert delete_replication(postgres_url, reps[1][0])
        wait_until("the deleted document's job stopped", lambda: len(cluster_status(node)["running"]) == 2)
        gone = job_of[reps[1][0]]
        ended = wait_until(
            "its run ended in the audit (the lease released)",
            lambda: [r for r in read_runs(postgres_url, gone) if r.end <= time.time()],
            timeout=30.0,
        )
        assert len(ended) == 1 and ended[0].node == "solo"
    assert overlapping_runs(read_runs(postgres_url)) == []
