"""A blocked `accept` on PostgreSQL is woken by a job added before its
process's LISTEN was in place.

A process's listener thread connects and LISTENs on its own while the
process goes on; its first `accept` may read the queue (empty), sleep, and
then a job is added whose NOTIFY reaches no listener of that process. Once
the LISTEN is in place the listener must wake its waiters, who re-read the
queue; otherwise they sleep until their re-check (a minute here) or their
own timeout, as a worker host under load once did for 30 s.

The test holds the listener's LISTEN back (`PgListener._subscribe`, the racy point)
until the job is in, so the race goes the bad way every time.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Collection
from typing import Any

import pytest

from tests.postgres import HOW_TO_GET, postgres_missing

pytest.importorskip("psycopg", reason=HOW_TO_GET)
pytest.importorskip("psycopg_pool", reason=HOW_TO_GET)

from actors.couch_jobs import CouchJobs, PostgresStore  # noqa: E402
from actors.couch_jobs.pg_listener import PgListener  # noqa: E402
from actors.couch_jobs.waker import ConditionWaker  # noqa: E402

pytestmark = [
    pytest.mark.skipif(postgres_missing() is not None, reason=HOW_TO_GET),
    pytest.mark.integration,
    pytest.mark.timeout(90),
]

TYPE = "wake"
ACCEPT_TIMEOUT = 20.0


class LateListener(PgListener):
    """A listener that LISTENs only when the test releases it (a slow connect)."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        self.connected = threading.Event()
        self.release = threading.Event()
        super().__init__(url, **kwargs)

    def _subscribe(self, conn: Any) -> None:
        self.connected.set()
        self.release.wait(60)
        super()._subscribe(conn)


class LateStore(PostgresStore):
    """A store whose listener is a `LateListener`."""

    listener_class = LateListener


class SignallingWaker(ConditionWaker):
    """Says when a caller has read the store and gone to sleep."""

    def __init__(self, recheck_interval: float) -> None:
        super().__init__(recheck_interval)
        self.sleeping = threading.Event()

    def wait(self, type_keys: Collection[str], token: object, timeout: float) -> bool:
        self.sleeping.set()
        return super().wait(type_keys, token, timeout)


def test_a_job_added_before_the_listener_listens_wakes_the_accept(postgres_url: str) -> None:
    adder = CouchJobs(postgres_url)  # another process, as far as the worker's store can tell
    store = LateStore(postgres_url)
    listener = store._changes
    assert isinstance(listener, LateListener)
    waker = SignallingWaker(60.0)  # re-reads once a minute: a prompt accept is a wake-up
    worker = CouchJobs(store, waker=waker)
    out: "queue.Queue[Any]" = queue.Queue()

    def accept() -> None:
        try:
            job, _ = worker.accept(TYPE, timeout=ACCEPT_TIMEOUT)
            out.put(("ok", job.id, time.monotonic()))
        except BaseException as exc:  # the test asserts on it
            out.put(("raised", exc, time.monotonic()))

    thread = threading.Thread(target=accept, daemon=True)
    try:
        adder.set_type_timeout(TYPE, 60)
        assert listener.connected.wait(20), "the listener thread did not connect"
        thread.start()
        assert waker.sleeping.wait(20), "the accept did not go to sleep"
        adder.add(None, TYPE, "early", {})  # its NOTIFY reaches no listener of the worker's
        released = time.monotonic()
        listener.release.set()  # LISTEN goes in now
        kind, value, at = out.get(timeout=ACCEPT_TIMEOUT + 20)
        assert (kind, value) == ("ok", "early")
        # Prompt: without a wake-up the accept finds the job only when its own
        # 20 s timeout ends the sleep (half of it tells the two apart under load).
        assert at - released < ACCEPT_TIMEOUT / 2, at - released
    finally:
        listener.release.set()
        thread.join(ACCEPT_TIMEOUT + 10)
        worker.close()
        store.close()
        adder.close()


def test_resubmitting_a_pending_job_at_its_own_time_notifies_every_process(postgres_url: str) -> None:
    """An `accept` that skipped the job's row while the resubmit held it (SKIP
    LOCKED) sleeps until a NOTIFY: a resubmit that leaves the time as it was
    must send one too, not only one that moves the job in the queue."""
    jobs = CouchJobs(postgres_url)
    watcher = PostgresStore(postgres_url)  # another process's store, as far as NOTIFY can tell
    heard: "queue.Queue[frozenset[str]]" = queue.Queue()
    watcher.add_change_listener(heard.put)
    try:
        jobs.set_type_timeout(TYPE, 60)
        jobs.add(None, TYPE, "again", {"v": 1})
        key = _heard_a_type(heard)  # the add's NOTIFY: the listener is in place
        for _ in range(100):  # bounded: drain what else the set-up committed
            try:
                heard.get_nowait()
            except queue.Empty:
                break
        jobs.add(None, TYPE, "again", {"v": 2})  # pending, same time: resubmitted in place
        assert _heard_a_type(heard) == key
        assert jobs.get_job_data(None, TYPE, "again") == {"v": 2}
    finally:
        watcher.close()
        jobs.close()


def _heard_a_type(heard: "queue.Queue[frozenset[str]]") -> str:
    """The type named by the next notice that names one (a listener that has
    just LISTENed wakes everyone with an empty one first)."""
    for _ in range(100):
        types = heard.get(timeout=20)
        if types:
            (key,) = types
            return key
    raise AssertionError("no notice named a type")
