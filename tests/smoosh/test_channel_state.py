"""smoosh_channel's logic: starting, windows, suspend/resume, failures, checkpoints."""

from __future__ import annotations

import math

from actors.smoosh.channel_state import ChannelState
from actors.smoosh.effects import AdoptJob, EnqueueLater, ResumeJob, StartJob, SuspendJob, WriteCheckpoint
from actors.smoosh.policy import INDEX_CLEANUP, PriorityQueue
from actors.smoosh.settings import ChannelSettings

INF = math.inf


def channel(**kw) -> ChannelState:
    return ChannelState(ChannelSettings(name="ratio_dbs", **kw))


def prio(table=None):
    table = table or {}
    return lambda key: table.get(key, 5)


def started(effects):
    return [e.key for e in effects if isinstance(e, StartJob)]


def test_starts_paused_and_unpauses():
    ch = channel()
    assert ch.paused
    assert ch.enqueue("a", 3, prio()) == []
    assert ch.status() == {"active": 0, "starting": 0, "waiting": {"size": 1, "min": 3, "max": 3}}
    assert started(ch.unpause(prio())) == ["a"]
    assert ch.status()["starting"] == 1 and ch.status()["waiting"] == {"size": 0}


def test_concurrency_is_never_exceeded():
    ch = channel(concurrency=2)
    ch.unpause(prio())
    effects = []
    for i in range(5):
        effects += ch.enqueue(f"db{i}", i + 1, prio())
    assert started(effects) == ["db0", "db1"]
    assert started(ch.job_started("db0", "job0")) == []
    assert len(ch.active) + len(ch.starting) == 2
    # a normal exit frees a slot for the highest waiting
    assert started(ch.job_exited("job0", "normal", prio())) == ["db4"]
    assert len(ch.active) + len(ch.starting) == 2


def test_priority_rechecked_before_start_zero_skips():
    ch = channel()
    ch.enqueue("gone", 9, prio())
    ch.enqueue("here", 3, prio())
    assert started(ch.unpause(prio({"gone": 0}))) == ["here"]
    assert "gone" not in ch.waiting


def test_priority_error_skips_without_crashing():
    ch = channel()
    ch.enqueue("bad", 9, prio())

    def boom(key):
        raise RuntimeError("db vanished")

    assert ch.unpause(boom) == []
    assert len(ch.waiting) == 0


def test_enqueue_of_active_key_is_ignored():
    ch = channel()
    ch.unpause(prio())
    ch.enqueue("a", 3, prio())
    ch.job_started("a", "j")
    assert ch.enqueue("a", 4, prio()) == []
    assert "a" not in ch.waiting


def test_failed_start_re_enqueued_after_delay():
    ch = channel()
    ch.unpause(prio())
    ch.enqueue("a", 3, prio())
    ch.enqueue("b", 2, prio())
    effects = ch.job_start_failed("a", "no file", prio())
    assert effects[0] == EnqueueLater("a", 5.0)
    assert started(effects) == ["b"]


def test_crashed_compaction_re_enqueued():
    ch = channel()
    ch.unpause(prio())
    ch.enqueue(("db", "idx"), 3, prio())
    ch.job_started(("db", "idx"), "j1")
    effects = ch.job_exited("j1", "exit status 1", prio(), running_job_of=lambda k: "other")
    # not a database: no re-monitoring, re-enqueue
    assert EnqueueLater(("db", "idx"), 5.0) in effects
    assert ch.active == {}


def test_still_running_compaction_is_adopted():
    ch = channel()
    ch.unpause(prio())
    ch.enqueue("db", 3, prio())
    ch.job_started("db", "j1")
    effects = ch.job_exited("j1", "killed", prio(), running_job_of=lambda k: "j2")
    assert effects == [AdoptJob("ratio_dbs", "db", "j2")]
    assert ch.active == {"db": "j2"}
    effects = ch.job_exited("j2", "killed", prio(), running_job_of=lambda k: None)
    assert effects == [EnqueueLater("db", 5.0)]


def test_unknown_job_exit_is_ignored():
    ch = channel()
    assert ch.job_exited("nobody", "killed", prio()) == []
    assert ch.job_started("never-started", "j") == []


def test_suspend_and_resume():
    ch = channel(concurrency=2)
    ch.unpause(prio())
    ch.enqueue("a", 3, prio())
    ch.enqueue("b", 3, prio())
    ch.job_started("a", "ja")
    ch.job_started("b", "jb")
    assert set(ch.suspend()) == {SuspendJob("ja"), SuspendJob("jb")}
    assert ch.paused
    ch.enqueue("c", 9, prio())
    assert ch.status()["waiting"]["size"] == 1
    assert set(ch.resume()) == {ResumeJob("ja"), ResumeJob("jb")}
    assert not ch.paused


def test_window_checks_pause_and_resume():
    ch = channel(from_=22 * 60, to=6 * 60)  # crosses midnight
    ch.unpause(prio())
    ch.enqueue("a", 3, prio())  # starts at once
    ch.job_started("a", "ja")
    assert ch.check_window(23 * 60) == []  # inside, running: nothing to do
    assert ch.check_window(12 * 60) == []  # leaves: paused, job keeps running
    assert ch.paused
    ch.enqueue("b", 3, prio())
    assert ch.status()["waiting"]["size"] == 1
    assert ch.check_window(12 * 60) == []  # still outside, already paused
    effects = ch.check_window(1 * 60, prio())  # re-enters after midnight
    assert ResumeJob("ja") in effects and not ch.paused


def test_strict_window_suspends_and_resumes_jobs():
    ch = channel(from_=60, to=120, strict_window=True, concurrency=2)
    ch.check_window(90)  # inside: resumes the initially paused channel
    ch.enqueue("a", 3, prio())
    ch.job_started("a", "ja")
    assert ch.check_window(200) == [SuspendJob("ja")]
    ch.enqueue("b", 3, prio())
    assert ch.starting == {}
    effects = ch.check_window(60, prio())
    assert effects[0] == ResumeJob("ja") and started(effects) == ["b"]


def test_view_compaction_enqueues_index_cleanup():
    ch = ChannelState(ChannelSettings(name="ratio_views"))
    ch.unpause(prio())
    effects = ch.enqueue(("db", "idx"), 3, prio())
    assert effects == [StartJob("ratio_views", ("db", "idx")), EnqueueLater((INDEX_CLEANUP, "db"), 0.0)]
    ch2 = ChannelState(ChannelSettings(name="ratio_views"), cleanup_index_files=False)
    ch2.unpause(prio())
    assert ch2.enqueue(("db", "idx"), 3, prio()) == [StartJob("ratio_views", ("db", "idx"))]


def test_capacity_bounds_waiting():
    ch = channel(capacity=2)
    for i in range(5):
        ch.enqueue(f"db{i}", i, prio())
    assert ch.waiting.to_map() == {"db4": 4, "db3": 3}


def test_flush_and_checkpoint():
    ch = channel()
    ch.unpause(prio())
    ch.enqueue("run", 3, prio())
    ch.job_started("run", "j")
    ch.pause()
    ch.enqueue("wait", 2, prio())
    [cp] = ch.checkpoint()
    assert cp == WriteCheckpoint("ratio_dbs", {"run": INF, "wait": 2})
    assert ch.checkpoint() == []  # previous checkpoint still writing
    ch.checkpoint_done()
    assert len(ch.checkpoint()) == 1
    assert ch.checkpoint(persist_enabled=False) == []
    assert ch.flush() == [WriteCheckpoint("ratio_dbs", {})]
    assert len(ch.waiting) == 0 and ch.active == {"run": "j"}


def test_restored_queue_starts_active_entries_first():
    restored = PriorityQueue.from_map({"was_running": INF, "waiting": 7.5})
    ch = ChannelState(ChannelSettings(name="ratio_dbs"), restored)
    assert started(ch.unpause(prio())) == ["was_running"]


def test_raising_concurrency_starts_more():
    ch = channel()
    ch.unpause(prio())
    for key in "abc":
        ch.enqueue(key, 3, prio())
    assert len(ch.starting) == 1
    effects = ch.update_settings(ChannelSettings(name="ratio_dbs", concurrency=3), prio())
    assert len(started(effects)) == 2


def test_ignored_database_is_not_started():
    # Seed smoosh_channel:start_compact/2 re-checks smoosh_utils:ignore_db/1
    # when a job starts: an object queued (or restored) before its database
    # was put in [smoosh.ignore] is dropped, not compacted.
    ch = ChannelState(ChannelSettings(name="ratio_views", concurrency=3), ignore=frozenset({"db1"}))
    ch.enqueue("db1", 9, prio())
    ch.enqueue(("db1", "idx"), 8, prio())
    ch.enqueue("db2", 3, prio())
    effects = ch.unpause(prio())
    assert started(effects) == ["db2"]
    assert not any(isinstance(e, EnqueueLater) for e in effects)  # no cleanup for the ignored index
    assert len(ch.waiting) == 0 and list(ch.starting) == ["db2"]
    ch.ignore = frozenset()
    assert started(ch.enqueue("db1", 9, prio())) == ["db1"]
