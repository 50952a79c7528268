"""couch_jobs across nodes: one PostgreSQL database, jobs added on node a,
accepted and finished by workers on nodes b and c (separate OS processes,
connected over tcp with CurveZMQ), each job finished exactly once even when
node c is SIGKILLed while it holds jobs: their locks time out and the
activity monitor on b hands them back, as couch_jobs does between
CouchDB nodes."""

from __future__ import annotations

import queue
from typing import Any

import pytest

from tests.postgres import HOW_TO_GET, postgres_missing

pytest.importorskip("psycopg", reason=HOW_TO_GET)
pytest.importorskip("psycopg_pool", reason=HOW_TO_GET)

from actors import Node  # noqa: E402
from actors.couch_jobs import CouchJobs  # noqa: E402
from actors.couch_jobs.naming import SERVER_NAME  # noqa: E402
from tests.cluster.netkit import NodeProcess  # noqa: E402
from tests.couch_jobs.actor_workers import Collector, Worker, collected  # noqa: E402
from tests.couch_jobs.finished_log import create_finished_log, finishers  # noqa: E402
from tests.couch_jobs.node_workers import KeepingHolder  # noqa: E402

pytestmark = [
    pytest.mark.skipif(postgres_missing() is not None, reason=HOW_TO_GET),
    pytest.mark.integration,
    pytest.mark.timeout(120),
]

TYPE = "nodejob"
N_JOBS = 60
IDLE = 8.0  # a worker stops after this long without a job: well past the 1 s type timeout
SETTINGS = (
    "activity_monitor_max_jitter_msec=100 type_check_period_msec=500 type_check_max_jitter_msec=100 "
    "pg_connect_timeout_msec=2000"
)


def test_workers_on_two_nodes_finish_every_job_once_when_one_node_is_killed(postgres_url: str, key: str) -> None:
    jobs = CouchJobs(postgres_url)
    b = c = None
    try:
        jobs.set_type_timeout(TYPE, 1)
        create_finished_log(jobs)
        jobs.add(None, TYPE, "held-job", {})
        b, c = NodeProcess("b", key), NodeProcess("c", key)
        for peer in (b, c):
            assert peer.ask(f"couch_jobs {postgres_url} {SETTINGS}", "COUCH_JOBS") == "started"
        with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key) as node_a:
            node_a.connect(b.address)
            node_a.connect(c.address)
            for name in ("b", "c"):  # their servers learn the type now, asked from node a
                server = node_a.whereis(SERVER_NAME, node=name)
                assert server is not None
                server.call("check_types", timeout=10.0)
            q: queue.Queue[Any] = queue.Queue()
            collector = node_a.spawn(Collector, q)

            # A worker on c takes a job and keeps it alive (progress every
            # 0.2 s, type timeout 1 s): only c's death can free it.
            holder = node_a.spawn(KeepingHolder, TYPE, 99, node="c", host="own")
            holder.cast(("accept_and_keep", collector))
            _, _, held_job, _ = collected(q, "held", 30)
            assert held_job.id == "held-job"

            workers = {
                1: node_a.spawn(Worker, TYPE, 1, node="b", host="own"),
                2: node_a.spawn(Worker, TYPE, 2, node="b", host="own"),
                3: node_a.spawn(Worker, TYPE, 3, node="c", host="own"),
            }
            assert workers[1].node_id.startswith("b@") and workers[3].node_id.startswith("c@")
            for w in workers.values():
                w.cast(("run_resilient", collector, N_JOBS + 1, IDLE, 0))
            for _ in workers:
                collected(q, "running", 30)
            # Still c's after twice the 1 s type timeout: its updates keep it.
            while collected(q, "kept", 30)[2] < 10:
                pass
            assert jobs.get_job_state(None, TYPE, "held-job") == "running"
            with jobs.transaction() as tx:  # added on node a
                for k in range(N_JOBS):
                    jobs.add(tx, TYPE, f"job-{k:03d}", {"k": k})

            collected(q, "finished", 30, who={3})  # c is working too
            collected(q, "finished", 30, who={1, 2})
            c_down = node_a.monitor_node("c")
            c.kill()
            assert c_down.wait(5.0) == ("nodedown", "c")

            done = {}
            while len(done) < 2:
                message = collected(q, "done", 60, who={1, 2})
                done[message[1]] = message[2]
        by_job = finishers(jobs)
        assert len(by_job) == N_JOBS + 1, sorted(by_job)
        assert all(len(ws) == 1 for ws in by_job.values()), {j: ws for j, ws in by_job.items() if len(ws) > 1}
        assert by_job["held-job"][0] in (1, 2)  # taken over on b after c died holding it
        assert {w for ws in by_job.values() for w in ws} >= {1, 2, 3}
        assert sum(done.values()) == sum(1 for ws in by_job.values() if ws[0] in (1, 2))
        assert {state for _, _, state, _ in jobs.get_jobs(TYPE)} == {"finished"}
    finally:
        for peer in (b, c):
            if peer is not None:
                peer.close()
        jobs.close()
