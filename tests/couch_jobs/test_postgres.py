"""What only the PostgreSQL store has to show: schema versioning,
bad URLs, exactly once under killed and stalled worker processes, and the
server going away and coming back under load."""

from __future__ import annotations

import logging
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from tests.postgres import HOW_TO_GET, postgres_missing

psycopg = pytest.importorskip("psycopg", reason=HOW_TO_GET)
pytest.importorskip("psycopg_pool", reason=HOW_TO_GET)

import actors.couch_jobs as couch_jobs  # noqa: E402
from actors.couch_jobs import (  # noqa: E402
    CouchJobs,
    PostgresStore,
    StoreUnavailable,
    app,
    db,  # noqa: E402
    open_store,
)
from actors.couch_jobs.naming import SERVER_NAME, TOP_SUP  # noqa: E402
from actors.couch_jobs.pg_schema import _MIGRATIONS, SCHEMA_VERSION  # noqa: E402
from actors.couch_jobs.store_postgres import redact  # noqa: E402
from tests.couch_jobs.actor_fixtures import start_tree  # noqa: E402
from tests.couch_jobs.actor_workers import Collector, Worker, collected  # noqa: E402
from tests.couch_jobs.finished_log import create_finished_log, finish_counts  # noqa: E402

pytestmark = [
    pytest.mark.skipif(postgres_missing() is not None, reason=HOW_TO_GET),
    pytest.mark.integration,
    pytest.mark.timeout(120),
]

TYPE = "pgjob"


# -- schema and URLs ------------------------------------------------------------


def test_schema_is_created_once_and_versioned(postgres_url):
    with CouchJobs(postgres_url) as first:
        assert first.store.schema_version() == SCHEMA_VERSION
        first.set_type_timeout("t", 5)
    with CouchJobs(postgres_url) as second:  # a second start migrates nothing, loses nothing
        assert second.get_type_timeout("t") == 5
        with second.transaction(write=False) as tx:
            rows = tx.execute("SELECT version FROM couch_jobs_schema ORDER BY version").fetchall()
        assert rows == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
        with second.transaction() as tx:
            tx.execute("INSERT INTO couch_jobs_schema (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreUnavailable, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        PostgresStore(postgres_url)


def test_a_schema_1_database_is_migrated_without_losing_activity(postgres_url):
    """Schema 1 counted activity in one row per type; schema 2 goes on from there."""
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE couch_jobs_schema (version INTEGER NOT NULL)")
        conn.execute(_MIGRATIONS[0])
        conn.execute("INSERT INTO couch_jobs_schema (version) VALUES (1)")
        conn.execute("INSERT INTO couch_jobs_type_timeouts VALUES ('\"t\"', 5)")
        conn.execute("INSERT INTO couch_jobs_type_activity VALUES ('\"t\"', 40)")
        conn.execute("INSERT INTO couch_jobs VALUES ('\"t\"', 'old', 'running', 40, 'lock', 0, false, '{}')")
    with CouchJobs(postgres_url) as jobs:
        assert jobs.store.schema_version() == SCHEMA_VERSION
        with jobs.transaction(write=False) as tx:
            assert db.get_activity_seq(tx, '"t"') == 40
            assert db.get_running_seqs(tx, '"t"') == {"old": 40}
        jobs.add(None, "t", "new", {})
        job, _ = jobs.accept("t", timeout=5)
        with jobs.transaction(write=False) as tx:
            assert db.get_activity_seq(tx, '"t"') > 40  # never goes back
            assert db.get_running_seqs(tx, '"t"')["new"] > 40  # never reuses a sequence


def test_the_url_chooses_the_store(postgres_url, tmp_path):
    pg = open_store(postgres_url)
    lite = open_store(f"sqlite://{tmp_path}/x.db")
    plain = open_store(tmp_path / "y.db")
    try:
        assert type(pg).__name__ == "PostgresStore"
        assert (type(lite).__name__, lite.path) == ("SQLiteStore", f"{tmp_path}/x.db")
        assert (type(plain).__name__, plain.path) == ("SQLiteStore", f"{tmp_path}/y.db")
    finally:
        for store in (pg, lite, plain):
            store.close()
    with pytest.raises(StoreUnavailable, match="unknown scheme"):
        open_store("mysql://u:pw@127.0.0.1/db")
    with pytest.raises(StoreUnavailable, match="absolute path"):
        open_store("sqlite://relative.db")


def test_a_closed_store_starts_no_listener_thread(postgres_url):
    """A change listener added after close must not start a LISTEN thread nobody stops."""

    def listeners() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "couch_jobs-pg-listen"}

    store = PostgresStore(postgres_url)
    store.close()
    before = listeners()
    store.add_change_listener(lambda types: None)
    assert listeners() - before == set()


def test_redact_hides_only_the_password():
    assert redact("postgresql://bob:s3cret@db.example:5432/jobs") == ("postgresql://bob:***@db.example:5432/jobs")
    assert redact("postgresql://bob@db.example/jobs") == "postgresql://bob@db.example/jobs"
    # URLs urllib refuses (a bad port, an unclosed "[") are named too, without the password
    assert redact("postgresql://bob:s3cret@db.example:5x/jobs") == "postgresql://bob:***@db.example:5x/jobs"
    assert redact("postgresql://bob:s3cret@[::1/jobs") == "postgresql://bob:***@[::1/jobs"
    assert redact("postgresql://[::1/jobs") == "postgresql://[::1/jobs"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://bob:s3cret@127.0.0.1:1/jobs",  # nothing listens on port 1
        "postgresql://bob:s3cret@127.0.0.1:5432/jobs?sslmode=bogus",  # malformed option
        "postgresql://bob:s3cret@127.0.0.1:5x/jobs",  # malformed port (urllib refuses it)
        "postgresql://bob:s3cret@127.0.0.1:99999/jobs",  # port out of range
        "postgresql://bob:s3cret@127.0.0.1[/jobs",  # malformed host
    ],
)
def test_a_bad_or_unreachable_url_fails_start_with_one_line(node, url, caplog):
    caplog.set_level(logging.DEBUG)
    node.config.set("couch_jobs", "pg_connect_timeout_msec", "1000")
    with pytest.raises(StoreUnavailable) as info:
        app.start(node, url)
    message = str(info.value)
    assert "\n" not in message
    assert "postgresql://bob:***@127.0.0.1" in message
    assert "s3cret" not in message
    assert "s3cret" not in caplog.text
    assert node.whereis(TOP_SUP) is None  # nothing left running
    with pytest.raises(couch_jobs.CouchJobsError, match="not configured"):
        couch_jobs.default()


def test_a_caller_psycopg_transaction_is_the_jobs_transaction(postgres_url):
    with CouchJobs(postgres_url) as jobs:
        jobs.set_type_timeout("t", 5)
        with psycopg.connect(postgres_url) as conn:
            conn.execute("CREATE TABLE docs (id TEXT PRIMARY KEY)")
            conn.commit()
            with pytest.raises(RuntimeError):
                with conn.transaction():
                    conn.execute("INSERT INTO docs VALUES ('a')")
                    jobs.add(conn, "t", "j", {})
                    raise RuntimeError("roll both back")
            assert jobs.get_jobs("t") == []
            with conn.transaction():
                conn.execute("INSERT INTO docs VALUES ('a')")
                jobs.add(conn, "t", "j", {})
        assert [j[1] for j in jobs.get_jobs("t")] == ["j"]


def test_an_autocommit_connection_as_tx_runs_each_call_in_one_transaction(postgres_url):
    """A psycopg connection in autocommit mode, outside any transaction block,
    would commit each statement of a call on its own (and drop its row locks in
    between).  Each call runs in one transaction on it: the rows it writes carry
    one ``xmin``, the id of the transaction that wrote them."""
    with CouchJobs(postgres_url) as jobs:
        jobs.set_type_timeout("t", 5)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            jobs.add(conn, "t", "j", {"a": 1})
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # committed
            job_xmin = conn.execute("SELECT xmin::text FROM couch_jobs WHERE id = 'j'").fetchone()
            pending_xmin = conn.execute("SELECT xmin::text FROM couch_jobs_pending WHERE id = 'j'").fetchone()
            assert job_xmin is not None and job_xmin == pending_xmin
            job, _data = jobs.accept("t", timeout=5)
            jobs.finish(conn, job, {"done": True})
            assert jobs.get_job_state(None, "t", "j") == "finished"


def test_commits_of_one_type_do_not_wait_for_each_other(postgres_url):
    """Accept+finish of one type go ahead while another transaction of that type is open.

    Every accept/update/finish records the type's activity; were that one
    row per type, the open transaction would hold its lock and the other
    worker would wait for it (and, under load, for every commit's fsync).
    """
    with CouchJobs(postgres_url) as jobs:
        jobs.set_type_timeout("t", 60)
        for job_id in ("a", "b"):
            jobs.add(None, "t", job_id, {})
        held, _ = jobs.accept("t", timeout=5)
        done = threading.Event()
        finished: list[str] = []

        def other_worker() -> None:
            job, _ = jobs.accept("t", timeout=5)
            jobs.finish(None, job, {"by": "other"})
            finished.append(job.id)
            done.set()

        worker = threading.Thread(target=other_worker, daemon=True)
        with jobs.transaction() as tx:
            progressed = jobs.update(tx, held, {"step": 1})  # activity recorded, tx open
            worker.start()
            assert done.wait(10), "a commit of the same type waited for an open transaction"
            jobs.finish(tx, progressed, {"by": "held"})
        worker.join(10)
        assert finished == ["b"]
        assert {j[1]: j[3] for j in jobs.get_jobs("t")} == {"a": {"by": "held"}, "b": {"by": "other"}}


# -- many worker processes --------------------------------------------------------


@pytest.fixture
def postgres_tree(node, postgres_url):
    yield from start_tree(
        node, postgres_url, {"activity_monitor_max_jitter_msec": "100", "pg_connect_timeout_msec": "500"}
    )


def test_exactly_once_with_worker_processes_killed(postgres_tree):
    """SIGKILLed workers lose their jobs to others; a late finish after a takeover gets Halt."""
    node, jobs = postgres_tree["node"], postgres_tree["jobs"]
    n_jobs = 150
    jobs.set_type_timeout(TYPE, 1)
    couch_jobs.server.force_check_types()
    create_finished_log(jobs)
    q: "queue.Queue[Any]" = queue.Queue()
    collector = node.spawn(Collector, q)
    rng = random.Random(1234)
    # A worker that takes a job and stalls: its lock must be taken over.
    holder = node.spawn(Worker, TYPE, 99, host="holder")
    jobs.add(None, TYPE, "held-job", {})
    holder.cast(("accept_and_hold", collector))
    _, _, held_job, _ = collected(q, "held", 30)

    workers = {i: node.spawn(Worker, TYPE, i, host=f"pw{i}") for i in range(4)}
    for w in workers.values():
        w.cast(("run_resilient", collector, n_jobs + 1, 3.0, 0))
    for _ in workers:
        collected(q, "running", 30)
    with jobs.transaction() as tx:
        for k in range(n_jobs):
            jobs.add(tx, TYPE, f"job-{k:03d}", {"k": k})

    next_no = len(workers)
    for _ in range(3):  # kill a random worker at three moments, start a replacement
        for _ in range(10):
            collected(q, "finished", 30)
        victim = workers.pop(rng.choice(sorted(workers)))
        down = node.monitor(victim)
        os.kill(victim.os_pid, signal.SIGKILL)
        assert down.wait(10)[1] == "killed"
        workers[next_no] = node.spawn(Worker, TYPE, next_no, host=f"pw{next_no}")
        workers[next_no].cast(("run_resilient", collector, n_jobs + 1, 3.0, 0))
        next_no += 1

    live = set(workers)
    while live:
        message = q.get(timeout=60)
        if message[0] == "done":
            live.discard(message[1])
    counts = finish_counts(jobs)
    assert len(counts) == n_jobs + 1 and set(counts.values()) == {1}, counts
    assert {state for _, _, state, _ in jobs.get_jobs(TYPE)} == {"finished"}
    # The stalled holder's finish comes after its lock was taken over: refused.
    with pytest.raises(couch_jobs.Halt):
        jobs.finish(None, held_job)
    assert finish_counts(jobs)["held-job"] == 1


def test_server_stopped_and_restarted_under_load(postgres_tree, postgres_cluster):
    node, jobs = postgres_tree["node"], postgres_tree["jobs"]
    jobs.set_type_timeout(TYPE, 2)
    couch_jobs.server.force_check_types()
    create_finished_log(jobs)
    sup, server = node.whereis(TOP_SUP), node.whereis(SERVER_NAME)
    q: "queue.Queue[Any]" = queue.Queue()
    collector = node.spawn(Collector, q)
    workers = [node.spawn(Worker, TYPE, i, host=f"ow{i}") for i in range(2)]
    for w in workers:
        w.cast(("run_resilient", collector, 10_000, 15.0, 10_000))
    for _ in workers:
        collected(q, "running", 30)
    acked = []
    for k in range(40):
        jobs.add(None, TYPE, f"before-{k}", {})
        acked.append(f"before-{k}")
    for _ in range(5):
        collected(q, "finished", 30)

    postgres_cluster.stop()
    try:
        with pytest.raises(StoreUnavailable) as info:
            jobs.add(None, TYPE, "during", {})
        assert repr(jobs.store.location)[1:-1] in str(info.value)
        assert "is unavailable" in str(info.value)
        for _ in workers:  # each worker saw the same clear error, and lives on
            assert "is unavailable" in collected(q, "store_error", 30)[2]
    finally:
        postgres_cluster.start()

    deadline = time.monotonic() + 30
    k = 0
    while k < 40 and time.monotonic() < deadline:  # bounded; retries only while reconnecting
        try:
            jobs.add(None, TYPE, f"after-{k}", {})
        except StoreUnavailable:
            continue
        acked.append(f"after-{k}")
        k += 1
    assert k == 40
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        counts = finish_counts(jobs)
        if set(acked) <= set(counts):
            break
        try:
            q.get(timeout=1.0)  # paced by the workers' messages
        except queue.Empty:
            pass
    counts = finish_counts(jobs)
    assert set(acked) <= set(counts), sorted(set(acked) - set(counts))
    assert set(counts.values()) == {1}
    # The tree rode it out: same top supervisor and server, no restart storm.
    assert node.whereis(TOP_SUP) == sup
    assert node.whereis(SERVER_NAME) == server


def _demo(tmp_path, store: str) -> "subprocess.CompletedProcess[str]":
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "actors",
            "demo",
            "--short",
            "--no-live",
            "--store",
            store,
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=110,
        env=env,
    )


def test_demo_runs_with_couch_jobs_on_postgres(tmp_path, postgres_url):
    """``demo --store URL`` on the session's server (``--store postgres`` starts its
    own local server the same way the session fixture does)."""
    done = _demo(tmp_path, postgres_url)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "couch_jobs store: PostgreSQL at postgresql://" in done.stdout
    assert "twice or more: 0; never: 0" in done.stdout
    assert "RESULT: nothing lost" in done.stdout


def test_demo_refuses_a_store_it_does_not_know(tmp_path):
    done = _demo(tmp_path, "mysql://u:pw@127.0.0.1/x")
    assert done.returncode == 2
    assert "--store: must be sqlite, postgres or a postgresql:// URL" in done.stderr
    assert "pw" not in done.stderr.replace("postgres", "")
