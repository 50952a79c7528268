"""Closing a store while threads and actors still use it, without a segfault.

Closing a sqlite3 connection that another thread is executing on crashes the
interpreter.  The store closes a connection only when no transaction uses
it, and refuses new transactions with `StoreClosed`; the tree stops every
actor that reads the store before the teardown closes it.
"""

from __future__ import annotations

import threading
import time

import pytest

import actors.couch_jobs as couch_jobs
from actors.couch_jobs import CouchJobs, SQLiteStore
from actors.couch_jobs.errors import StoreClosed
from tests.couch_jobs.actor_fixtures import start_tree

pytestmark = pytest.mark.timeout(60)


def test_a_call_on_a_closed_store_raises_store_closed(tmp_path):
    store = SQLiteStore(tmp_path / "c.db")
    store.close()
    with pytest.raises(StoreClosed, match="c.db.*closed"):
        with store.transaction(write=False):
            pass
    store.close()  # idempotent


def test_a_closed_instance_refuses_api_calls(tmp_path):
    jobs = CouchJobs(tmp_path / "c.db")
    jobs.set_type_timeout("t", 5)
    jobs.close()
    with pytest.raises(StoreClosed):
        jobs.add(None, "t", "j", {})


def test_a_transaction_open_at_close_finishes_and_its_connection_closes(tmp_path):
    store = SQLiteStore(tmp_path / "c.db")
    with store.transaction() as tx:
        store.close()
        tx.set_type_activity("t", 7)  # still usable: its thread owns the connection
    assert store._connections == []  # closed by its own thread at the end
    reopened = SQLiteStore(tmp_path / "c.db")
    with reopened.transaction(write=False) as tx:
        assert tx.get_type_activity("t") == 7
    reopened.close()


def _hammer(store: SQLiteStore, started: threading.Event, errors: list[BaseException], rounds: int) -> None:
    try:
        for i in range(rounds):
            with store.transaction(write=i % 2 == 0) as tx:
                tx.get_type_activity("t")
                if tx.write:
                    tx.set_type_activity("t", i)
            started.set()
    except StoreClosed:
        return
    except BaseException as exc:  # anything else is the failure this test looks for
        errors.append(exc)
        return
    errors.append(AssertionError("the store was never closed under this thread"))


def test_closing_under_load_many_times_never_crashes(tmp_path):
    """Each round: four threads in tight transactions, the main thread closes."""
    for n in range(30):
        store = SQLiteStore(tmp_path / f"load{n}.db")
        errors: list[BaseException] = []
        events = [threading.Event() for _ in range(4)]
        threads = [threading.Thread(target=_hammer, args=(store, ev, errors, 1_000_000), daemon=True) for ev in events]
        for th in threads:
            th.start()
        for ev in events:
            assert ev.wait(10), "a loader thread never got a transaction through"
        store.close()
        for th in threads:
            th.join(10)
        assert not any(th.is_alive() for th in threads)
        assert errors == []
        assert store._connections == []


def test_stopping_the_tree_and_closing_under_subscriptions_many_times(node, tmp_path):
    """The fixture's teardown order (stop tree, close store) under notifier load."""
    deadline = time.monotonic() + 40
    for n in range(8):
        assert time.monotonic() < deadline
        tree = start_tree(
            node, tmp_path / f"tree{n}.db", {"type_monitor_timeout_msec": "1", "wakeup_recheck_msec": "1"}
        )
        ctx = next(tree)
        jobs, t = ctx["jobs"], ctx["t1"]
        for k in range(5):
            couch_jobs.add(None, t, f"j{k}", {})
            couch_jobs.subscribe(t, f"j{k}")
        with pytest.raises(StopIteration):
            next(tree)  # stop the tree, detach, close the store
        assert jobs.store.closed


def test_threads_that_come_and_go_leave_no_connection_behind(tmp_path):
    """An actor is a thread and a restart is a new one: 200 threads in turn,
    each with a transaction, leave the pool's few connections, not 200."""
    store = SQLiteStore(tmp_path / "c.db", idle_connections=2)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            with store.transaction() as tx:
                tx.set_type_activity("t", i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    for i in range(200):
        th = threading.Thread(target=one, args=(i,))
        th.start()
        th.join(10)
        assert not th.is_alive()
    assert errors == []
    assert store.open_connections() <= 2
    with store.transaction(write=False) as tx:
        assert tx.get_type_activity("t") == 199
    store.close()
    assert store.open_connections() == 0


def test_more_threads_at_once_than_the_pool_keeps(tmp_path):
    """Eight threads inside transactions at the same time get eight connections;
    when they are done only ``idle_connections`` stay open."""
    store = SQLiteStore(tmp_path / "c.db", idle_connections=3)
    inside = threading.Barrier(8, timeout=20)
    errors: list[BaseException] = []

    def one() -> None:
        try:
            with store.transaction(write=False) as tx:
                tx.get_type_activity("t")
                inside.wait()  # all eight hold a connection here
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(20)
    assert errors == []
    assert store.open_connections() == 3
    store.close()


def test_idle_connections_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="idle_connections"):
        SQLiteStore(tmp_path / "c.db", idle_connections=0)
