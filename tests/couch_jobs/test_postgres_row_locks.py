"""couch_jobs on PostgreSQL reads a job it is about to write under a row lock,
and no client holds such a lock for ever.

Under READ COMMITTED, a writer that read the job without ``FOR UPDATE``
would act on the version committed before a concurrent writer's, and its
upsert would then overwrite that writer's change: a lost update.  The race
that matters is a worker's `finish` against the activity monitor's
re-enqueue of the same (idle) job, in either order.  Each test holds one
transaction open after its write, waits (by asking PostgreSQL) until the
other is blocked on a lock, commits, and checks that the second writer saw
the first one's change."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest

from tests.polling import poll_until
from tests.postgres import HOW_TO_GET, postgres_missing

psycopg = pytest.importorskip("psycopg", reason=HOW_TO_GET)
pytest.importorskip("psycopg_pool", reason=HOW_TO_GET)

from actors.app import configcheck  # noqa: E402
from actors.config import Config, ConfigError  # noqa: E402
from actors.couch_jobs import CouchJobs, Halt, PostgresStore, StoreUnavailable, db, settings  # noqa: E402
from actors.couch_jobs.activity import ActivityMonitorLogic  # noqa: E402
from actors.couch_jobs.model import encode_type  # noqa: E402

pytestmark = [
    pytest.mark.skipif(postgres_missing() is not None, reason=HOW_TO_GET),
    pytest.mark.integration,
    pytest.mark.timeout(60),
]

TYPE = "locked"
KEY = encode_type(TYPE)


def _in_thread(work: Any) -> "tuple[threading.Thread, queue.Queue[Any]]":
    """Run ``work()`` on a thread; its outcome, ``("ok", value)`` or ``("raised", exc)``, goes on the queue."""
    out: "queue.Queue[Any]" = queue.Queue()

    def run() -> None:
        try:
            out.put(("ok", work()))
        except BaseException as exc:  # the test asserts on what was raised
            out.put(("raised", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _wait_until_blocked_on_a_lock(postgres_url: str, thread: threading.Thread) -> None:
    """Until a backend of this database waits for a lock (or the thread is
    done: then the assertions after the commit say what went wrong)."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:

        def blocked() -> bool:
            (waiting,) = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            return waiting > 0 or not thread.is_alive()

        poll_until(blocked, "the second writer to wait for the first one's row lock", 30.0)


def _config(**couch_jobs: str) -> Config:
    return Config({"couch_jobs": couch_jobs})


#: These tests hold a transaction open until the other writer is seen blocked,
#: which on a loaded machine may take longer than the default 5 s.
PATIENT = _config(pg_idle_in_transaction_timeout_msec="60000")


def _running_job(jobs: CouchJobs) -> tuple[Any, int]:
    jobs.set_type_timeout(TYPE, 60)
    jobs.add(None, TYPE, "j", {"step": 0})
    job, _data = jobs.accept(TYPE, timeout=5)
    with jobs.transaction(write=False) as tx:
        seq = db.get_running_seqs(tx, KEY)["j"]
    return job, seq


def test_a_finish_behind_the_monitors_re_enqueue_is_halted(postgres_url: str) -> None:
    with CouchJobs(postgres_url, config=PATIENT) as jobs:
        job, seq = _running_job(jobs)
        with jobs.transaction() as tx:  # the activity monitor's transaction, held open
            assert db.re_enqueue_inactive(tx, KEY, {"j": seq}) == ["j"]
            thread, outcome = _in_thread(lambda: jobs.finish(None, job, {"step": "done"}))
            _wait_until_blocked_on_a_lock(postgres_url, thread)
        kind, value = outcome.get(timeout=20)
        thread.join(10)
        # The worker's finish read the job after the re-enqueue committed: it
        # no longer holds the job, so it is told so rather than overwriting it.
        assert kind == "raised" and isinstance(value, Halt), (kind, value)
        assert [(j[1], j[2], j[3]) for j in jobs.get_jobs(TYPE)] == [("j", "pending", {"step": 0})]
        again, data = jobs.accept(TYPE, timeout=5)  # and it is queued: a worker gets it again
        assert again.id == "j" and data == {"step": 0}


def test_the_monitors_re_enqueue_behind_a_finish_leaves_the_job_finished(postgres_url: str) -> None:
    with CouchJobs(postgres_url, config=PATIENT) as jobs:
        job, _seq = _running_job(jobs)
        monitor = ActivityMonitorLogic(TYPE, jobs.store)
        assert monitor.check_activity() == []  # the first check only records the running jobs
        with jobs.transaction() as tx:  # the worker's finish, held open
            jobs.finish(tx, job, {"step": "done"})
            thread, outcome = _in_thread(monitor.check_activity)  # j looks idle since the last check
            _wait_until_blocked_on_a_lock(postgres_url, thread)
        kind, value = outcome.get(timeout=20)
        thread.join(10)
        # The monitor read the job after the finish committed: nothing to re-enqueue.
        assert (kind, value) == ("ok", [])
        assert [(j[1], j[2], j[3]) for j in jobs.get_jobs(TYPE)] == [("j", "finished", {"step": "done"})]
        with jobs.transaction(write=False) as tx:
            assert tx.pending_range(KEY, 0, 1 << 62, 10) == []


def test_a_session_left_idle_in_a_transaction_is_ended_and_its_row_lock_freed(postgres_url: str) -> None:
    """A client frozen (SIGSTOP, a paused VM) inside a transaction while it
    held a job's row lock must not keep the job's other writers out for
    ever: the server ends the session after ``idle_in_transaction_timeout``,
    the lock goes, and the frozen client's commit fails when it wakes."""
    frozen = CouchJobs(PostgresStore(postgres_url, idle_in_transaction_timeout=1.0))
    locked, thaw = threading.Event(), threading.Event()
    backend: list[int] = []

    def freeze_holding_the_row() -> None:
        with frozen.transaction() as tx:
            assert db.get_job(tx, KEY, "j") is not None  # FOR UPDATE: the job's row is held
            backend.append(tx.execute("SELECT pg_backend_pid()").fetchone()[0])
            locked.set()
            thaw.wait(30)  # frozen: no statement, no commit

    try:
        with CouchJobs(postgres_url) as jobs:
            jobs.set_type_timeout(TYPE, 60)
            jobs.add(None, TYPE, "j", {"step": 0})
            thread, outcome = _in_thread(freeze_holding_the_row)
            assert locked.wait(20)
            with jobs.transaction() as tx:  # another writer of that job
                # Without the timeout it would wait for ever; here it would fail after 20 s.
                tx.execute("SET LOCAL lock_timeout = '20s'")
                db.remove(tx, KEY, "j")
            assert jobs.get_jobs(TYPE) == []
            thaw.set()
            kind, value = outcome.get(timeout=20)
            thread.join(10)
            assert kind == "raised" and isinstance(value, StoreUnavailable), (kind, value)
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                (alive,) = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend[0],)
                ).fetchone()
            assert alive == 0
            # The frozen client's store goes on with a fresh connection.
            frozen.add(None, TYPE, "after", {})
            assert [j[1] for j in jobs.get_jobs(TYPE)] == ["after"]
    finally:
        thaw.set()
        frozen.close()
        frozen.store.close()


def test_the_idle_in_transaction_timeout_keeps_the_urls_own_options(postgres_url: str) -> None:
    """The session setting is added to the URL's ``options`` (the test's
    ``search_path``), not put in their place; 0 in the config turns it off."""
    store = PostgresStore(postgres_url, idle_in_transaction_timeout=2.5)
    off = CouchJobs(postgres_url, config=_config(pg_idle_in_transaction_timeout_msec="0"))
    try:
        with store.transaction(write=False) as tx:
            assert tx.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "2500ms"
            (path,) = tx.execute("SHOW search_path").fetchone()
        assert path.startswith("t_")  # the fresh schema postgres_url names
        with off.transaction(write=False) as tx:
            assert tx.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "0"
    finally:
        store.close()
        off.close()


def test_a_negative_or_zero_idle_in_transaction_timeout_is_refused() -> None:
    with pytest.raises(ConfigError, match="pg_idle_in_transaction_timeout_msec"):
        settings.pg_idle_in_transaction_timeout_msec(_config(pg_idle_in_transaction_timeout_msec="-1"))
    assert not configcheck.check(_config(pg_idle_in_transaction_timeout_msec="-1")).ok
    with pytest.raises(ValueError, match="idle_in_transaction_timeout"):
        PostgresStore("postgresql:///nowhere", idle_in_transaction_timeout=0)
