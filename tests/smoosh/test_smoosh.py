"""The seed's smoosh_tests, on the state classes, real SQLite files and real workers.

`Harness` carries out effects as the actors will.  Setup mirrors the seed's
`setup/0`: persistence on, ``[smoosh.ratio_dbs] min_size = 1`` and
``min_priority = 1``, one database with a large document.
"""

from __future__ import annotations

import math
import os
import sqlite3

import pytest

from actors.config import Config
from actors.smoosh.adapter import SQLiteAdapter
from actors.smoosh.effects import StartJob, SuspendJob
from actors.smoosh.policy import INDEX_CLEANUP

from .harness import Harness
from .sqlite_util import delete_rows, grow_db, make_db

SEVEN = ["index_cleanup", "ratio_dbs", "ratio_views", "slack_dbs", "slack_views", "upgrade_dbs", "upgrade_views"]


@pytest.fixture
def env(tmp_path):
    data, state = tmp_path / "data", tmp_path / "state"
    data.mkdir()
    state.mkdir()
    cfg = Config(
        {
            "smoosh": {"persist": "true", "state_dir": str(state), "staleness": "0"},
            "smoosh.ratio_dbs": {"min_size": "1", "min_priority": "1"},
        }
    )
    adapter = SQLiteAdapter(data)
    db = "db1"
    grow_db(adapter.db_path(db), rows=2500)  # the seed's 10 MB doc1
    yield cfg, adapter, db
    adapter.close()


def status_names(h):
    return list(h.status())


# -- the seed's current tests ---------------------------------------------------


def test_t_default_channels(env):
    cfg, adapter, _ = env
    h = Harness(cfg, adapter)
    # 3 default ratios + 3 default views + 1 index cleanup = 7
    assert status_names(h) == SEVEN


def test_t_channels_recreated_on_crash(env):
    cfg, adapter, _ = env
    h = Harness(cfg, adapter)
    h.flush()
    old = h.crash_channel("ratio_dbs")
    assert [e.name for e in h.log[-1:]] == ["ratio_dbs"]
    assert status_names(h) == SEVEN
    assert status_names(h)[1] == "ratio_dbs"
    assert h.server.channel_handle("ratio_dbs") != old


def test_t_can_create_and_delete_channels(env):
    cfg, adapter, _ = env
    h = Harness(cfg, adapter)
    h.flush()
    cfg.set("smoosh", "db_channels", "mychan1")
    cfg.set("smoosh", "view_channels", "mychan2")
    cfg.set("smoosh", "cleanup_channels", "mychan3")
    assert len(h.status()) == 10
    assert {"mychan1", "mychan2", "mychan3"} <= set(h.channels)
    cfg.delete("smoosh", "db_channels")
    cfg.delete("smoosh", "view_channels")
    cfg.delete("smoosh", "cleanup_channels")
    assert status_names(h) == SEVEN


@pytest.mark.timeout(30)
def test_t_db_is_enqueued(env):
    cfg, adapter, db = env
    h = Harness(cfg, adapter)
    h.flush()
    h.unpause_all()
    before = os.path.getsize(adapter.db_path(db))
    delete_rows(adapter.db_path(db), keep_every=10)  # delete doc1
    h.advance(1)
    h.handle_db_event(db, "local_updated")
    assert ("ratio_dbs", db) in h.started  # wait_to_enqueue
    assert h.status()["ratio_dbs"]["active"] == 1
    assert h.wait_jobs() == [(db, "normal")]  # wait_compact_done: DOWN normal
    assert os.path.getsize(adapter.db_path(db)) < before / 5
    assert h.status()["ratio_dbs"] == {"active": 0, "starting": 0, "waiting": {"size": 0}}


# -- the seed's earlier tests (commented out in the seed, kept upstream) --------


def test_should_enqueue(env):
    cfg, adapter, db = env
    h = Harness(cfg, adapter)  # channels still paused: the object waits
    delete_rows(adapter.db_path(db))
    h.enqueue(db)
    assert db in h.channels["ratio_dbs"].waiting


def test_should_persist_queue(env):
    cfg, adapter, db = env
    h = Harness(cfg, adapter)
    delete_rows(adapter.db_path(db))
    make_db(adapter.db_path("db2"), rows=400)
    h.enqueue(db)
    h.enqueue("db2")
    h.checkpoint_all()
    q0 = h.channels["ratio_dbs"].waiting.to_map()
    # application:stop(smoosh), application:start(smoosh)
    h2 = Harness(cfg, adapter)
    q1 = h2.channels["ratio_dbs"].waiting.to_map()
    assert q0 and q1 == q0


def test_should_call_recover(env, tmp_path):
    cfg, adapter, db = env
    h = Harness(cfg, adapter)
    delete_rows(adapter.db_path(db))
    h.enqueue(db)
    h.checkpoint_all()
    assert (tmp_path / "state" / "ratio_dbs.smooshq").exists()
    assert db in Harness(cfg, adapter).channels["ratio_dbs"].waiting


def test_should_not_call_recover(env):
    cfg, adapter, db = env
    h = Harness(cfg, adapter)
    delete_rows(adapter.db_path(db))
    h.enqueue(db)
    h.checkpoint_all()
    cfg.set("smoosh", "persist", "false")
    assert len(Harness(cfg, adapter).channels["ratio_dbs"].waiting) == 0


# -- real compactions: resume after a restart, crashes, windows, adoption ---------


@pytest.mark.timeout(30)
def test_checkpoint_and_resume_after_restart_running_job_first(env):
    cfg, adapter, db = env
    cfg.set("smoosh.ratio_dbs", "strict_window", "true")
    h = Harness(cfg, adapter)
    delete_rows(adapter.db_path(db))
    make_db(adapter.db_path("db2"), rows=400)
    h.unpause_all()
    h.enqueue(db)
    h.channels["ratio_dbs"].suspend()
    h.enqueue("db2")
    [job] = h.channels["ratio_dbs"].active.values()
    job.suspend()
    h.checkpoint_all()
    # the node dies: its workers die with it
    job.kill()
    job.wait(20)
    h2 = Harness(cfg, adapter)
    restored = h2.channels["ratio_dbs"].waiting.to_map()
    assert restored == {db: math.inf, "db2": restored["db2"]}
    h2.unpause_all()
    assert h2.started == [("ratio_dbs", db)]  # the interrupted job restarts first
    assert h2.wait_jobs() == [(db, "normal")]
    assert h2.started[-1] == ("ratio_dbs", "db2")
    assert h2.wait_jobs() == [("db2", "normal")]


@pytest.mark.timeout(30)
def test_re_enqueue_on_crash(env):
    cfg, adapter, db = env
    h = Harness(cfg, adapter)
    delete_rows(adapter.db_path(db))
    h.unpause_all()
    h.enqueue(db)
    [job] = h.channels["ratio_dbs"].active.values()
    job.kill()
    assert h.wait_jobs() == [(db, f"killed by signal {9}")]
    assert h.later == [(h.now + 5.0, db)]
    h.advance(4.9)
    assert len(h.started) == 1
    h.advance(0.2)
    assert h.started == [("ratio_dbs", db), ("ratio_dbs", db)]
    assert h.wait_jobs() == [(db, "normal")]


@pytest.mark.timeout(30)
def test_window_suspends_and_resumes_a_real_compaction(env):
    cfg, adapter, db = env
    cfg.set("smoosh.ratio_dbs", "from", "01:00")
    cfg.set("smoosh.ratio_dbs", "to", "02:00")
    cfg.set("smoosh.ratio_dbs", "strict_window", "true")
    h = Harness(cfg, adapter)
    delete_rows(adapter.db_path(db))
    ch = h.channels["ratio_dbs"]
    h.apply(ch.check_window(90, h._chan_prio("ratio_dbs")))
    h.enqueue(db)
    [job] = ch.active.values()
    effects = ch.check_window(180)
    assert effects == [SuspendJob(job)]
    h.apply(effects)
    info = os.waitid(os.P_PID, job.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
    assert info.si_code == os.CLD_STOPPED
    h.apply(ch.check_window(60, h._chan_prio("ratio_dbs")))
    assert h.wait_jobs() == [(db, "normal")]


@pytest.mark.timeout(30)
def test_already_running_compaction_is_adopted(env):
    cfg, adapter, db = env
    h = Harness(cfg, adapter)
    delete_rows(adapter.db_path(db))
    # A writer holds the database: the compaction started below waits for it
    # (its busy timeout is a minute), so it is still running when smoosh
    # looks, however slowly this process gets there.
    blocker = sqlite3.connect(adapter.db_path(db), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        running = adapter.start_job(db)  # started by someone else
        running.suspend()
        h.unpause_all()
        h.enqueue(db)
        assert h.channels["ratio_dbs"].active == {db: running}
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    running.resume()
    assert h.wait_jobs() == [(db, "normal")]


@pytest.mark.timeout(30)
def test_view_compaction_and_index_cleanup(env):
    cfg, adapter, db = env
    h = Harness(cfg, adapter)
    make_db(adapter.register_index(db, "by_name"))
    make_db(adapter.register_index("gone", "old"), rows=10)
    h.unpause_all()
    h.handle_db_event(db, ("index_commit", "by_name"))
    assert [e for e in h.log if isinstance(e, StartJob)] == [StartJob("ratio_views", (db, "by_name"))]
    assert (h.now, (INDEX_CLEANUP, db)) in h.later  # scheduled, nothing to clean: db exists
    h.advance(0)
    assert len(h.started) == 1
    assert h.wait_jobs() == [((db, "by_name"), "normal")]
    h.enqueue((INDEX_CLEANUP, "gone"))
    assert h.started[-1] == ("index_cleanup", (INDEX_CLEANUP, "gone"))
    assert h.wait_jobs() == [((INDEX_CLEANUP, "gone"), "normal")]
    assert adapter.orphaned_index_dbs() == []


def test_misconfigured_state_dir_reported_once(env, tmp_path):
    cfg, adapter, _ = env
    cfg.set("smoosh", "state_dir", str(tmp_path / "nope"))
    h = Harness(cfg, adapter)
    assert "state_dir" in h.setup_error and "nope" in h.setup_error
