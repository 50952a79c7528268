"""The replicator's store on a real PostgreSQL (pgserver) and on SQLite: leases, fences,
the audit, ``_replicator`` documents by URL, and a store that goes away and comes back."""

from __future__ import annotations

import threading

import pytest

from actors.leases import LeaseTimes, overlapping_runs
from actors.leases import sql as lease_sql
from actors.replicator import delete_replication, put_replication
from actors.replicator.docs_model import Doc, Fenced, StoreUnavailable
from actors.replicator.docstore import DocStore
from actors.replicator.docstore_pg import PgDocStore, redact
from actors.replicator.lease import LeaseConfig, open_holder, read_runs
from actors.replicator.replicator_db import ReplicatorDb
from actors.replicator.settings import InvalidSetting
from actors.replicator.stores import open_db

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "sqlite":
        db = DocStore(tmp_path / "_replicator.db", create=True)
    else:
        db = PgDocStore(request.getfixturevalue("postgres_url"), "_replicator", create=True)
    with db:
        yield db


def test_lease_grant_refusal_takeover_and_audit(store) -> None:
    with store.transaction() as tx:
        fence_a, _ = lease_sql.acquire(tx, "job1", "a", "1", 0.5)
    assert fence_a is not None and fence_a.token == 1
    with store.transaction() as tx:
        refused, holder = lease_sql.acquire(tx, "job1", "b", "2", 0.5)
    assert refused is None and holder.node == "a"
    with store.transaction() as tx:
        assert lease_sql.renew(tx, fence_a, 0.2)
    done = threading.Event()
    done.wait(0.3)  # let a's lease expire on the store's clock (the thing under test is time)
    with store.transaction() as tx:
        assert not lease_sql.renew(tx, fence_a, 0.5)  # expired: never extended
        fence_b, _ = lease_sql.acquire(tx, "job1", "b", "2", 30.0)
    assert fence_b.token == 2
    with store.transaction() as tx:
        assert not lease_sql.release(tx, fence_a)  # not a's any more
        assert lease_sql.release(tx, fence_b)
        fence_c, _ = lease_sql.acquire(tx, "job1", "c", "3", 30.0)
        runs = lease_sql.runs(tx)
    assert fence_c.token == 3
    assert [(r.node, r.token) for r in runs] == [("a", 1), ("b", 2), ("c", 3)]
    assert overlapping_runs(runs) == []
    assert runs[0].end <= runs[1].start and runs[1].end <= runs[2].start


def test_a_write_carrying_a_stale_fence_is_refused_in_its_transaction(store) -> None:
    with store.transaction() as tx:
        old, _ = lease_sql.acquire(tx, "job1", "a", "1", 30.0)
    store.put_local("_local/job1", {"seq": 1}, fence=old)
    store.bulk_docs([Doc("x", "1-aa", {"v": 1})], fence=old)
    with store.transaction() as tx:
        new, _ = lease_sql.acquire(tx, "job1", "a", "1", 30.0)  # the job restarted: next token
    with pytest.raises(Fenced, match="token 1 refused"):
        store.put_local("_local/job1", {"seq": 2}, fence=old)
    with pytest.raises(Fenced):
        store.bulk_docs([Doc("y", "1-bb", {"v": 2})], fence=old)
    assert store.get_local("_local/job1").body == {"seq": 1}
    assert store.get("y") is None  # the refused batch rolled back whole
    store.put_local("_local/job1", {"seq": 3}, fence=new)
    assert store.get_local("_local/job1").body == {"seq": 3}


def test_many_holders_racing_for_one_job_get_one_grant(store) -> None:
    path = store.path if isinstance(store, DocStore) else None
    url = getattr(store, "url", None)
    grants: list[int] = []
    errors: list[BaseException] = []

    def race(i: int) -> None:
        try:
            with DocStore(path) if path else PgDocStore(url, "_replicator") as mine:
                with mine.transaction() as tx:
                    fence, _ = lease_sql.acquire(tx, "hot", f"n{i}", "1", 30.0)
                if fence is not None:
                    grants.append(fence.token)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and grants == [1]


def test_holder_deadline_and_config(postgres_url) -> None:
    now = [1000.0]
    config = LeaseConfig(postgres_url, True, 3.0)
    holder = open_holder(config, "j", "a", "inc1", clock=lambda: now[0])
    other = open_holder(config, "j", "b", "inc2", clock=lambda: now[0])
    try:
        assert holder.try_acquire() and holder.deadline == 1000.0 + 3.0 - 1.0
        assert not other.try_acquire() and other.holder.node == "a"
        now[0] += 1.9
        assert not holder.must_stop()
        assert holder.renew() is True and holder.deadline == 1001.9 + 2.0
        now[0] += 2.0
        assert holder.must_stop()  # no renewal heard for ttl - margin: stop, whatever the store says
        holder.release()
        assert other.try_acquire() and other.fence.token == 2
        assert [r.node for r in read_runs(postgres_url, "j")] == ["a", "b"]
    finally:
        holder.close()
        other.close()
    with pytest.raises(InvalidSetting, match="store"):
        LeaseConfig(None, True)
    with pytest.raises(InvalidSetting, match="store"):
        LeaseConfig("/some/file.db", False)


def test_replication_documents_and_databases_by_url(postgres_url) -> None:
    rev = put_replication(postgres_url, "r1", "orders", "orders_copy", continuous=True)
    assert rev.startswith("1-")
    reader = ReplicatorDb(postgres_url)
    assert reader.poll()["r1"]["source"] == "orders"
    assert delete_replication(postgres_url, "r1") and not delete_replication(postgres_url, "r1")
    assert reader.poll() == {"r1": None}
    reader.close()
    with open_db("orders", store=postgres_url, create=True) as db:
        assert isinstance(db, PgDocStore) and db.name == "orders"
    with pytest.raises(ValueError, match="not by a URL"):
        open_db(postgres_url)
    assert "secret" not in redact("postgresql://u:secret@h:5432/db")


@pytest.mark.timeout(120)
def test_a_handle_reconnects_after_the_server_restarts(postgres_cluster, postgres_url) -> None:
    db = PgDocStore(postgres_url, "orders", create=True, op_timeout=5.0)
    reader = ReplicatorDb(postgres_url)
    try:
        db.put("a", {"v": 1})
        postgres_cluster.stop()
        try:
            with pytest.raises(StoreUnavailable):
                db.put("b", {"v": 2})
            assert reader.poll() == {} and reader.unreachable  # no crash, nothing new
        finally:
            postgres_cluster.start()
        db.put("b", {"v": 2})
        assert [c.id for c in db.changes()] == ["a", "b"]
    finally:
        db.close()
        reader.close()


def test_lease_times_from_config() -> None:
    assert LeaseConfig.from_config(_Cfg({})).enabled is False
    cfg = LeaseConfig.from_config(_Cfg({"store": "postgresql://x/y", "lease_ttl": "6"}))
    assert cfg.enabled and cfg.times == LeaseTimes(6.0, 1.5, 2.0)
    assert not LeaseConfig.from_config(_Cfg({"store": "postgresql://x/y", "lease": "false"})).enabled
    with pytest.raises(InvalidSetting, match="lease_ttl"):
        LeaseConfig.from_config(_Cfg({"store": "postgresql://x/y", "lease_ttl": "soon"}))


class _Cfg:
    def __init__(self, values: dict) -> None:
        self.values = values

    def section(self, name: str) -> dict:
        return self.values


def test_a_job_whose_lease_moved_on_cannot_checkpoint_or_copy(postgres_url) -> None:
    """The built-in job carries its fence on every write into the lease's store: once another
    holder took the lease, its checkpoint fails (`CheckpointError` from `Fenced`) and so does
    a batch, and the newer holder's checkpoint is the one in the store."""
    from actors.replicator import Rep, ReplicationJob
    from actors.replicator.replication import CheckpointError

    with open_db("src", store=postgres_url, create=True) as src:
        for k in range(5):
            src.put(f"d{k}", {"k": k})
    times = LeaseTimes.from_ttl(30.0)
    rep = Rep(id="j1", source="src", target="tgt", options={"create_target": True, "worker_batch_size": 2})
    old_holder = open_holder(LeaseConfig(postgres_url, True, 30.0), "j1", "a", "1")
    new_holder = open_holder(LeaseConfig(postgres_url, True, 30.0), "j1", "a", "2")
    job = ReplicationJob(rep, store=postgres_url)
    try:
        assert old_holder.try_acquire()
        job.fence, job.fence_store = old_holder.fence, old_holder.store_id
        job.start(0.0)
        job.process(job.next_batch())
        assert job.checkpoint(1.0)  # holds the lease: lands
        job.process(job.next_batch())  # copied, not yet checkpointed
        # the old holder is frozen past its lease; a new one takes over (its expiry is moved to the
        # past here, as the store's clock passing it would)
        with old_holder.store.transaction() as tx:
            tx.run("UPDATE repl_leases SET expires_at = 0 WHERE job = ?", ("j1",))
        assert new_holder.try_acquire() and new_holder.fence.token == old_holder.fence.token + 1
        with pytest.raises(Fenced):
            job.process(job.next_batch())
        with pytest.raises(CheckpointError, match="refused"):
            job.checkpoint(2.0)
        assert old_holder.renew() is False
    finally:
        job.abort()
        old_holder.close()
        new_holder.close()
    assert times.ttl == 30.0


def test_a_client_stalled_inside_a_transaction_does_not_hold_a_lease_row_for_ever(postgres_url) -> None:
    """A node frozen while it held a lease row locked (mid-renewal, mid-batch) must not keep the
    next holder out: the server ends its session once it sat idle in the transaction for
    ``min(op_timeout, 5 s)``.  Without that, the takeover below would wait until its own
    statement timeout and fail."""
    stalled = PgDocStore(postgres_url, "_replicator", create=True, op_timeout=1.0)
    other = PgDocStore(postgres_url, "_replicator", op_timeout=20.0)
    locked, thaw = threading.Event(), threading.Event()
    outcome: list[str] = []

    def freeze_holding_the_row() -> None:
        try:
            with stalled.transaction() as tx:
                tx.run("SELECT token FROM repl_leases WHERE job = ? FOR UPDATE", ("j",))
                locked.set()
                thaw.wait(30)  # the "frozen" client: no statement, no commit
        except StoreUnavailable:
            outcome.append("session ended by the server")

    try:
        with stalled.transaction() as tx:
            first, _ = lease_sql.acquire(tx, "j", "a", "1", 0.001)  # expired almost at once
        assert first is not None
        thread = threading.Thread(target=freeze_holding_the_row)
        thread.start()
        assert locked.wait(20)
        with other.transaction() as tx:
            taken, _ = lease_sql.acquire(tx, "j", "b", "2", 30.0)
        assert taken is not None and taken.token == 2
        thaw.set()
        thread.join(30)
        assert outcome == ["session ended by the server"]
    finally:
        thaw.set()
        stalled.close()
        other.close()
