"""Replication between real SQLite stores: bookkeeping, checkpoints, resume."""

from __future__ import annotations

import pytest

from actors.clock import FakeClock
from actors.replicator.docstore import DocStore
from actors.replicator.records import Rep
from actors.replicator.replication import (
    ReplicationError,
    ReplicationJob,
    SchedulerJob,
    SeqTracker,
    compare_replication_logs,
)

pytestmark = pytest.mark.timeout(60)


def fill(path, n, start=0):
    with DocStore(path, create=True) as db:
        for i in range(start, start + n):
            db.put(f"doc{i:05d}", {"i": i})


def make_rep(tmp_path, **options):
    opts = {"worker_batch_size": 100, "worker_processes": 2, "create_target": True, **options}
    return Rep(
        id=("abc", "+continuous"),
        source=str(tmp_path / "src.db"),
        target=str(tmp_path / "tgt.db"),
        options=opts,
        db_name="_replicator",
    )


def target_docs(tmp_path):
    with DocStore(tmp_path / "tgt.db") as db:
        return {c.id: c.rev for c in db.changes()}, db.info()["doc_count"]


# -- the seed's sequence bookkeeping ------------------------------------------------


def test_seq_tracker_in_order():
    t = SeqTracker()
    t.report_seq((1, 10))
    t.report_seq((2, 20))
    t.report_seq_done((1, 10))
    assert t.current_through_seq == (1, 10)
    t.report_seq_done((2, 20))
    assert t.current_through_seq == (2, 20)
    assert t.highest_seq_done == (2, 20)
    assert t.seqs_in_progress == []


def test_seq_tracker_out_of_order_never_passes_an_unfinished_batch():
    t = SeqTracker((0, 5))
    for s in [(1, 10), (2, 20), (3, 30)]:
        t.report_seq(s)
    t.report_seq_done((3, 30))
    assert t.current_through_seq == (0, 5)
    assert t.highest_seq_done == (3, 30)
    t.report_seq_done((2, 20))
    assert t.current_through_seq == (0, 5)
    t.report_seq_done((1, 10))
    # nothing left in progress: through jumps to the highest done
    assert t.current_through_seq == (3, 30)
    assert t.needs_checkpoint


def test_compare_replication_logs():
    assert compare_replication_logs({}, {}) == (0, [])
    same = {"session_id": "s1", "source_last_seq": 42, "history": [{"session_id": "s1"}]}
    assert compare_replication_logs(same, dict(same)) == (42, [{"session_id": "s1"}])
    src = {
        "session_id": "s3",
        "history": [{"session_id": "s3", "recorded_seq": 30}, {"session_id": "s2", "recorded_seq": 20}],
    }
    tgt = {
        "session_id": "s9",
        "history": [{"session_id": "s9", "recorded_seq": 90}, {"session_id": "s2", "recorded_seq": 20}],
    }
    seq, history = compare_replication_logs(src, tgt)
    assert seq == 20 and history == []
    assert compare_replication_logs(
        {"session_id": "x", "history": [{"session_id": "x"}]}, {"session_id": "y", "history": [{"session_id": "y"}]}
    ) == (0, [])


# -- jobs ----------------------------------------------------------------------------


def test_replicating_1000_docs_one_shot(tmp_path):
    fill(tmp_path / "src.db", 1000)
    clock = FakeClock(100.0)
    job = ReplicationJob(make_rep(tmp_path))
    assert isinstance(job, SchedulerJob)
    assert job.run_to_completion(clock.now) == "done"
    assert job.state == "done"
    assert job.stats.docs_written == 1000
    docs, count = target_docs(tmp_path)
    assert count == 1000
    with DocStore(tmp_path / "src.db") as src:
        assert docs == {c.id: c.rev for c in src.changes()}
        source_log = src.get_local("_local/abc").body
    with DocStore(tmp_path / "tgt.db") as tgt:
        target_log = tgt.get_local("_local/abc").body
    assert source_log == target_log
    assert source_log["source_last_seq"] == 1000
    assert source_log["history"][0]["docs_written"] == 1000


def test_resume_after_stop_midway_loses_and_duplicates_nothing(tmp_path):
    fill(tmp_path / "src.db", 1000)
    clock = FakeClock(100.0)
    first = ReplicationJob(make_rep(tmp_path))
    first.start(clock.now())
    for _ in range(2):  # 2 steps x 2 workers x 100 docs
        assert first.step(clock.now()) == "progress"
    first.stop(clock.now())  # shutdown: final checkpoint
    assert first.state == "stopped"
    docs, count = target_docs(tmp_path)
    assert count == 400
    second = ReplicationJob(make_rep(tmp_path))
    second.start(clock.now())
    assert second.start_seq == (0, 400)
    assert second.run_to_completion(clock.now) == "done"
    assert first.stats.docs_written + second.stats.docs_written == 1000
    assert second.stats.missing_checked == 600
    docs, count = target_docs(tmp_path)
    assert count == 1000
    assert sorted(docs) == [f"doc{i:05d}" for i in range(1000)]


def test_resume_after_crash_redoes_only_uncheckpointed_batches(tmp_path):
    fill(tmp_path / "src.db", 1000)
    clock = FakeClock(0.0)
    first = ReplicationJob(make_rep(tmp_path, checkpoint_interval=1000))
    first.start(clock.now())
    first.step(clock.now())  # 200 docs, no checkpoint yet
    clock.advance(1.0)
    first.step(clock.now())  # 400 docs, periodic checkpoint at 400
    first.step(clock.now())  # 600 docs, not checkpointed
    first.abort()  # crash: no final checkpoint
    second = ReplicationJob(make_rep(tmp_path))
    second.start(clock.now())
    assert second.start_seq == (0, 400)
    second.run_to_completion(clock.now)
    # the 200 re-read changes were found present on the target: nothing rewritten
    assert second.stats.missing_checked == 600
    assert second.stats.docs_written == 400
    assert first.stats.docs_written + second.stats.docs_written == 1000
    assert target_docs(tmp_path)[1] == 1000


def test_out_of_order_batches_checkpoint_only_the_through_seq(tmp_path):
    fill(tmp_path / "src.db", 300)
    job = ReplicationJob(make_rep(tmp_path))
    job.start(0.0)
    b1, b2, b3 = job.next_batch(), job.next_batch(), job.next_batch()
    assert job.next_batch() is None
    job.process(b3)
    job.process(b2)
    assert job.checkpoint(1.0) is False  # through seq has not moved
    job.process(b1)
    assert job.checkpoint(2.0) is True
    assert job.tracker.committed_seq == (3, 300)
    job.stop(3.0)


def test_continuous_job_follows_new_changes_until_stopped(tmp_path):
    fill(tmp_path / "src.db", 50)
    clock = FakeClock(0.0)
    job = ReplicationJob(make_rep(tmp_path, continuous=True, checkpoint_interval=5000))
    job.start(clock.now())
    assert job.step(clock.now()) == "progress"
    assert job.step(clock.now()) == "idle"
    fill(tmp_path / "src.db", 25, start=50)
    assert job.step(clock.now()) == "progress"
    assert job.step(clock.now()) == "idle"
    assert target_docs(tmp_path)[1] == 75
    clock.advance(5.0)
    job.step(clock.now())  # idle, but the checkpoint interval passed
    assert job.tracker.committed_seq[1] == 75
    job.stop(clock.now())
    assert job.state == "stopped"


def test_missing_source_is_a_clear_error(tmp_path):
    job = ReplicationJob(make_rep(tmp_path))
    with pytest.raises(ReplicationError, match="could not open .*src.db") as info:
        job.start(0.0)
    assert info.value.reason[0] == "db_not_found"


def test_missing_target_without_create_target(tmp_path):
    fill(tmp_path / "src.db", 1)
    job = ReplicationJob(make_rep(tmp_path, create_target=False))
    with pytest.raises(ReplicationError, match="tgt.db"):
        job.start(0.0)


def test_since_seq_and_no_checkpoints(tmp_path):
    fill(tmp_path / "src.db", 100)
    job = ReplicationJob(make_rep(tmp_path, since_seq=60, use_checkpoints=False))
    assert job.run_to_completion(FakeClock(0.0).now) == "done"
    assert job.stats.docs_written == 40
    assert job.checkpoint_history == {"use_checkpoints": False}
    with DocStore(tmp_path / "src.db") as src:
        assert src.get_local("_local/abc") is None


def test_bad_options_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="worker_batch_size"):
        ReplicationJob(make_rep(tmp_path, worker_batch_size=0))


def test_deletions_replicate(tmp_path):
    with DocStore(tmp_path / "src.db", create=True) as src:
        rev = src.put("gone", {"x": 1})
        src.delete("gone", rev)
        src.put("kept", {"x": 2})
    ReplicationJob(make_rep(tmp_path)).run_to_completion(FakeClock(0.0).now)
    with DocStore(tmp_path / "tgt.db") as tgt:
        assert tgt.get("gone") is None
        assert tgt.get("gone", include_deleted=True).deleted
        assert tgt.get("kept").body == {"x": 2}
