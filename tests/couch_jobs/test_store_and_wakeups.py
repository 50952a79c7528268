"""The SQLite store, encodings, argument checks, and wake-ups without polling."""

from __future__ import annotations

import threading

import pytest

import actors.couch_jobs as couch_jobs
from actors.couch_jobs import (
    ConditionWaker,
    CouchJobs,
    CouchJobsError,
    JsonEncodingError,
    NotFound,
    SQLiteStore,
    decode_type,
    encode_type,
)

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("value", ["t", 42, -1, ("t1", 1024), ("a", (1, ("b",))), ()])
def test_type_encoding_round_trips(value):
    assert decode_type(encode_type(value)) == value
    assert encode_type(value) == encode_type(decode_type(encode_type(value)))


@pytest.mark.parametrize("value", [True, 1.5, ["a"], None, b"x", ("a", [1]), 1 << 70])
def test_bad_types_are_rejected_with_the_value_named(value):
    with pytest.raises((TypeError, ValueError), match="job type"):
        encode_type(value)


def test_string_and_integer_types_are_distinct(ctx):
    couch_jobs.set_type_timeout("42", 1)
    couch_jobs.add(None, "42", "j", {"s": 1})
    couch_jobs.add(None, 42, "j", {"i": 1})
    assert couch_jobs.get_job_data(None, "42", "j") == {"s": 1}
    assert couch_jobs.get_job_data(None, 42, "j") == {"i": 1}


@pytest.mark.parametrize("data", [[1], "x", None, {"a": {1: 2}}, {"a": object()}])
def test_job_data_must_be_a_json_object_with_string_keys(ctx, data):
    with pytest.raises(JsonEncodingError):
        couch_jobs.add(None, ctx["t1"], "j", data)
    assert couch_jobs.get_job(ctx["t1"], "j") is None


def test_argument_checks(ctx):
    t = ctx["t1"]
    with pytest.raises(TypeError, match="job_id"):
        couch_jobs.add(None, t, 1, {})
    with pytest.raises(TypeError, match="sched_time"):
        couch_jobs.add(None, t, "j", {}, 1.5)
    with pytest.raises(ValueError, match="type timeout"):
        couch_jobs.set_type_timeout(t, 0)
    couch_jobs.add(None, t, "j", {})
    with pytest.raises(ValueError, match="lock"):
        couch_jobs.finish(None, couch_jobs.get_job(t, "j"))
    sub, _, _ = couch_jobs.subscribe(t, "j")
    with pytest.raises(ValueError, match="timeout="):
        couch_jobs.wait(sub, 5)
    with pytest.raises(TypeError, match="tx"):
        couch_jobs.add(42, t, "k", {})


def test_accept_with_zero_timeout_is_not_found(ctx):
    with pytest.raises(NotFound):
        couch_jobs.accept(ctx["t1"], timeout=0)


def test_unconfigured_default_says_how_to_configure():
    previous = couch_jobs.set_default(None)
    try:
        with pytest.raises(CouchJobsError, match="configure"):
            couch_jobs.get_type_timeout("t")
    finally:
        couch_jobs.set_default(previous)


def test_store_uses_wal_and_refuses_nested_transactions(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    try:
        with store.transaction() as tx:
            assert tx.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            with pytest.raises(RuntimeError, match="already open"):
                with store.transaction():
                    pass
    finally:
        store.close()


def test_data_survives_reopening(store_url):
    path = store_url
    with CouchJobs(path) as a:
        a.set_type_timeout("t", 5)
        a.add(None, "t", "j", {"keep": True})
    with CouchJobs(path) as b:
        assert b.get_job_data(None, "t", "j") == {"keep": True}


def _background(fn) -> tuple[threading.Thread, list]:
    out: list = []

    def run():
        try:
            out.append(fn())
        except Exception as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_accept_is_woken_by_a_commit_not_by_polling(store_url):
    # A recheck interval far longer than the test proves the wake-up came from the commit.
    with CouchJobs(store_url, waker=ConditionWaker(recheck_interval=120)) as jobs:
        jobs.set_type_timeout("t", 5)
        thread, out = _background(lambda: jobs.accept("t", timeout=60))
        jobs.add(None, "t", "j", {"n": 1})
        thread.join(10)
        assert not thread.is_alive()
        job, data = out[0]
        assert (job.id, data) == ("j", {"n": 1})


def test_wait_is_woken_by_a_commit_not_by_polling(store_url):
    with CouchJobs(store_url, waker=ConditionWaker(recheck_interval=120)) as jobs:
        jobs.set_type_timeout("t", 5)
        jobs.add(None, "t", "j", {})
        sub, _, _ = jobs.subscribe("t", "j")
        thread, out = _background(lambda: jobs.wait(sub, "running", timeout=60))
        jobs.accept("t", timeout=5)
        thread.join(10)
        assert not thread.is_alive()
        assert out[0] == ("t", "j", "running", {})


def test_writes_from_outside_are_seen_by_the_bounded_recheck(tmp_path):
    path = tmp_path / "x.db"
    with CouchJobs(path, waker=ConditionWaker(recheck_interval=0.05)) as worker, CouchJobs(path) as outsider:
        outsider.set_type_timeout("t", 5)
        thread, out = _background(lambda: worker.accept("t", timeout=60))
        outsider.add(None, "t", "j", {})
        thread.join(10)
        assert not thread.is_alive()
        assert out[0][0].id == "j"


def test_caller_transaction_wakes_waiters_only_after_commit(tmp_path):
    waker = ConditionWaker(recheck_interval=120)
    with CouchJobs(tmp_path / "c.db", waker=waker) as jobs:
        jobs.set_type_timeout("t", 5)
        key = encode_type("t")
        before = waker.generation(key)
        with jobs.transaction() as tx:
            jobs.add(tx, "t", "j", {})
            assert waker.generation(key) == before
        assert waker.generation(key) == before + 1


def test_threads_racing_to_accept_never_share_a_job(store_url):
    """Contention: SQLite's write lock, PostgreSQL's FOR UPDATE SKIP LOCKED."""
    n_jobs, n_threads = 120, 4
    with CouchJobs(store_url) as jobs:
        jobs.set_type_timeout("t", 30)
        finished: list[list[str]] = [[] for _ in range(n_threads)]
        errors: list[BaseException] = []

        def worker(i):
            try:
                for _ in range(n_jobs + 1):
                    try:
                        job, _ = jobs.accept("t", timeout=1.0)
                    except NotFound:
                        return
                    jobs.finish(None, job, {"by": i})  # Halt here: the job went to two workers
                    finished[i].append(job.id)
            except BaseException as exc:  # any other end of a worker fails the test
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n_threads)]
        for th in threads:
            th.start()
        for k in range(n_jobs):
            jobs.add(None, "t", f"j{k}", {})
        for th in threads:
            th.join(20)
        assert not any(th.is_alive() for th in threads)
        assert errors == []
        done = [j for ids in finished for j in ids]
        assert sorted(done) == sorted(f"j{k}" for k in range(n_jobs))
        assert all(state == "finished" for _, _, state, _ in jobs.get_jobs("t"))
