"""smoosh as actors: the seed's and upstream's integration cases on real SQLite files.

The tree runs in its host process ``smoosh``; compactions are VACUUMs in
worker processes.  Tests synchronise on calls and on the events an
`Observer` actor in this process receives, never on sleeps.
"""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from actors import Node
from actors.smoosh import (
    INDEX_CLEANUP,
    SQLiteAdapter,
    channel_ref,
    flush,
    handle_db_event,
    persist,
    resume,
    server_ref,
    start_smoosh,
    status,
    suspend,
    sync_enqueue,
)
from actors.smoosh import api as smoosh_api
from supervision import which_children

from .actor_util import (
    Events,
    Observer,
    exclusive_lock,
    file_size,
    now_minutes,
    proc_state,
    utc_hhmm,
    wait_proc_state,
)
from .sqlite_util import delete_rows, grow_db, make_db, row_count

SEVEN = ["index_cleanup", "ratio_dbs", "ratio_views", "slack_dbs", "slack_views", "upgrade_dbs", "upgrade_views"]

FAST = {"re_enqueue_delay": 0.3, "checkpoint_interval": 3600.0, "check_window_interval": 3600.0}


@pytest.fixture
def dirs(tmp_path):
    data, state = tmp_path / "data", tmp_path / "state"
    data.mkdir()
    state.mkdir()
    return str(data), str(state)


@contextmanager
def running_compaction(node, events: Events, path: str) -> Iterator[int]:
    """db1 enqueued on ratio_dbs and its compaction started, held inside its
    VACUUM by an exclusive lock on ``path`` until the block ends: yields the
    job's pid (a job that is really running, not one about to start)."""
    with exclusive_lock(path):
        assert sync_enqueue("db1", node) is True
        yield events.wait_for("started", "ratio_dbs", "db1")[4]


def configure(cfg, state: str) -> None:
    """The seed's setup/0: persistence on, ratio_dbs min_size 1 and min_priority 1."""
    cfg.set("smoosh", "persist", "true")
    cfg.set("smoosh", "state_dir", state)
    cfg.set("smoosh", "staleness", "0")
    cfg.set("smoosh", "wait_secs", "0")
    cfg.set("smoosh.ratio_dbs", "min_size", "1")
    cfg.set("smoosh.ratio_dbs", "min_priority", "1")


def launch(node, dirs, settings=(), overrides=None):
    """The seed's setup on ``dirs`` (data, state): `configure`, then each
    ``(section, key, value)`` of ``settings``, then `start`."""
    data, state = dirs
    configure(node.config, state)
    for section, key, value in settings:
        node.config.set(section, key, value)
    return start(node, data, overrides)


def start(node, data: str, overrides=None):
    q: queue.Queue = queue.Queue()
    observer = node.spawn(Observer, q)
    events = Events(q)
    adapter = SQLiteAdapter(data)
    sup = start_smoosh(node, adapter, overrides={**FAST, **(overrides or {})}, observer=observer)
    for _ in SEVEN:
        # A compaction restored from a checkpoint may start and end before
        # the last channel is up: its events stay for the test's own waits.
        events.wait_for("channel_started", keep=lambda e: e[1] not in ("channel_up", "channel_started"))
    return sup, adapter, events


def wait_channels(node, n: int) -> dict:
    result = status(node)
    assert len(result) == n, result
    return result


# -- the seed's tests ------------------------------------------------------------


def test_t_default_channels(node, dirs):
    launch(node, dirs)
    # 3 default ratios + 3 default views + 1 index cleanup = 7
    assert list(status(node)) == SEVEN
    for name in SEVEN:
        ref = channel_ref(name, node)
        assert ref is not None and ref.is_alive()


def test_t_channels_recreated_on_crash(node, dirs):
    _, _, events = launch(node, dirs)
    flush(node)
    old = channel_ref("ratio_dbs", node)
    node.kill(old)
    events.wait_for("channel_died", "ratio_dbs")
    _, _, new = events.wait_for("channel_started", "ratio_dbs")[1:4]
    assert new != old
    result = wait_channels(node, 7)
    assert list(result)[1] == "ratio_dbs"
    assert result["ratio_dbs"] == {"active": 0, "starting": 0, "waiting": {"size": 0}}
    assert channel_ref("ratio_dbs", node) == new


def test_t_can_create_and_delete_channels(node, dirs):
    _, _, events = launch(node, dirs)
    flush(node)
    node.config.set("smoosh", "db_channels", "mychan1")
    node.config.set("smoosh", "view_channels", "mychan2")
    node.config.set("smoosh", "cleanup_channels", "mychan3")
    for name in ("mychan1", "mychan2", "mychan3"):
        events.wait_for("channel_started", name)
    assert sorted(wait_channels(node, 10)) == sorted(SEVEN + ["mychan1", "mychan2", "mychan3"])
    node.config.delete("smoosh", "db_channels")
    node.config.delete("smoosh", "view_channels")
    node.config.delete("smoosh", "cleanup_channels")
    for name in ("mychan1", "mychan2", "mychan3"):
        events.wait_for("channel_closed", name)
    assert list(wait_channels(node, 7)) == SEVEN
    assert channel_ref("mychan1", node) is None


@pytest.mark.timeout(60)
def test_t_db_is_enqueued_and_compacted_on_disk(node, dirs):
    _, adapter, events = launch(node, dirs)
    path = adapter.db_path("db1")
    grow_db(path, rows=2500)
    delete_rows(path)  # the seed deletes doc1
    before, rows = file_size(path), row_count(path)
    handle_db_event("db1", "local_updated", node)
    channel, key, _ = events.wait_for("enqueued")[2:5]
    assert (channel, key) == ("ratio_dbs", "db1")
    events.wait_for("started", "ratio_dbs", "db1")
    _, _, _, _, reason = events.wait_for("exited", "ratio_dbs", "db1")
    assert reason == "normal"
    assert file_size(path) < before / 4
    assert row_count(path) == rows
    assert status(node)["ratio_dbs"] == {"active": 0, "starting": 0, "waiting": {"size": 0}}


# -- upstream's cases ---------------------------------------------------------------


@pytest.mark.timeout(60)
def test_suspend_and_resume_a_running_compaction(node, dirs):
    _, adapter, events = launch(node, dirs)
    path = adapter.db_path("db1")
    make_db(path)
    before = file_size(path)
    with running_compaction(node, events, path) as pid:
        assert status(node)["ratio_dbs"]["active"] == 1
        suspend(node)
        assert wait_proc_state(pid, {"T"}) == "T"
    # Unlocked but stopped: nothing happens until resume.
    assert proc_state(pid) == "T"
    assert file_size(path) == before
    resume(node)
    assert events.wait_for("exited", "ratio_dbs", "db1")[4] == "normal"
    assert file_size(path) < before / 4


@pytest.mark.timeout(60)
def test_window_checks(node, dirs):
    now = now_minutes()
    _, adapter, events = launch(
        node,
        dirs,
        settings=[
            ("smoosh.ratio_dbs", "from", utc_hhmm(now + 120)),
            ("smoosh.ratio_dbs", "to", utc_hhmm(now + 180)),
        ],
    )
    path = adapter.db_path("db1")
    make_db(path)
    before = file_size(path)
    assert sync_enqueue("db1", node) is True
    # Outside the window: queued, not started.
    ratio = channel_ref("ratio_dbs", node)
    info = ratio.call("info")
    assert info["paused"] is True and list(info["waiting"]) == ["db1"] and info["active"] == {}
    assert status(node)["ratio_dbs"]["waiting"]["size"] == 1
    # The window now includes the current time (crossing midnight if need be).
    node.config.set("smoosh.ratio_dbs", "from", utc_hhmm(now - 60))
    node.config.set("smoosh.ratio_dbs", "to", utc_hhmm(now + 60))
    events.wait_for("started", "ratio_dbs", "db1")
    assert events.wait_for("exited", "ratio_dbs", "db1")[4] == "normal"
    assert file_size(path) < before


@pytest.mark.timeout(60)
def test_strict_window_suspends_and_resumes_running_job(node, dirs):
    now = now_minutes()
    _, adapter, events = launch(node, dirs, settings=[("smoosh.ratio_dbs", "strict_window", "true")])
    path = adapter.db_path("db1")
    make_db(path)
    with running_compaction(node, events, path) as pid:
        # Leave the window: the running job is stopped in place.
        node.config.set("smoosh.ratio_dbs", "from", utc_hhmm(now + 120))
        node.config.set("smoosh.ratio_dbs", "to", utc_hhmm(now + 180))
        events.wait_for("suspended", "ratio_dbs")
        assert wait_proc_state(pid, {"T"}) == "T"
    assert proc_state(pid) == "T"
    # Enter the window again: resumed, and it finishes.
    node.config.set("smoosh.ratio_dbs", "from", utc_hhmm(now - 60))
    node.config.set("smoosh.ratio_dbs", "to", utc_hhmm(now + 60))
    events.wait_for("resumed", "ratio_dbs")
    assert events.wait_for("exited", "ratio_dbs", "db1")[4] == "normal"


def _corrupt_page(path: str, page: int, page_size: int = 4096) -> bytes:
    with open(path, "r+b") as fh:
        fh.seek((page - 1) * page_size)
        original = fh.read(page_size)
        fh.seek((page - 1) * page_size)
        fh.write(b"\xff" * page_size)
    return original


def _restore_page(path: str, page: int, original: bytes, page_size: int = 4096) -> None:
    with open(path, "r+b") as fh:
        fh.seek((page - 1) * page_size)
        fh.write(original)


@pytest.mark.timeout(60)
def test_failed_compaction_is_re_enqueued_after_delay(node, dirs):
    _, adapter, events = launch(node, dirs, overrides={"re_enqueue_delay": 0.3})
    path = adapter.db_path("db1")
    make_db(path)
    before = file_size(path)
    original = _corrupt_page(path, 2)  # the table's root page: VACUUM fails
    assert sync_enqueue("db1", node) is True
    events.wait_for("started", "ratio_dbs", "db1")
    reason = events.wait_for("exited", "ratio_dbs", "db1")[4]
    assert reason != "normal" and "malformed" in reason
    failed_at = time.monotonic()
    # Handed back to the server after the delay, and started again.
    events.wait_for("started", "ratio_dbs", "db1")
    assert time.monotonic() - failed_at >= 0.25
    _restore_page(path, 2, original)
    events.wait(lambda e: e[1] == "exited" and e[3] == "db1" and e[4] == "normal")
    assert file_size(path) < before
    assert row_count(path) > 0


@pytest.mark.timeout(60)
def test_already_running_compaction_is_adopted_not_started_twice(node, dirs):
    _, adapter, events = launch(node, dirs, settings=[("smoosh.ratio_dbs", "concurrency", "2")])
    path = adapter.db_path("db1")
    make_db(path)
    with running_compaction(node, events, path) as pid:
        # A second enqueue while it runs: not queued again, not started twice.
        sync_enqueue("db1", node)
        info = channel_ref("ratio_dbs", node).call("info")
        assert info["active"] == {"db1": pid} and info["waiting"] == {}
    assert events.wait_for("exited", "ratio_dbs", "db1")[4] == "normal"
    assert not any(e[1] == "started" and e[4] != pid for e in events.drain())


@pytest.mark.timeout(90)
def test_checkpoint_and_resume_after_node_restart(dirs):
    data, state = dirs
    dbs = [f"db{i}" for i in range(3)]
    with Node() as node:
        configure(node.config, state)
        node.config.set("smoosh", "wait_secs", "3600")  # nothing starts in this life
        _, adapter, events = start(node, data)
        sizes = {}
        for db in dbs:
            make_db(adapter.db_path(db), rows=600)
            sizes[db] = file_size(adapter.db_path(db))
            assert sync_enqueue(db, node) is True
        # The server cast them on; a call to the channel orders after those casts.
        assert channel_ref("ratio_dbs", node).call("status")["waiting"]["size"] == 3
        assert status(node)["ratio_dbs"]["waiting"]["size"] == 3
    # The final checkpoint of the orderly shutdown holds every entry.
    saved = persist.read(persist.file_path(state, "ratio_dbs"))
    assert sorted(saved) == dbs
    with Node() as node:
        configure(node.config, state)
        q: queue.Queue = queue.Queue()
        events = Events(q)
        start_smoosh(node, SQLiteAdapter(data), overrides=FAST, observer=node.spawn(Observer, q))
        up = events.wait_for("channel_up", "ratio_dbs")
        assert up[3] == 3  # restored
        done = set()
        for _ in dbs:
            event = events.wait(lambda e: e[1] == "exited" and e[2] == "ratio_dbs")
            assert event[4] == "normal"
            done.add(event[3])
        assert done == set(dbs)
        for db in dbs:
            assert file_size(os.path.join(data, db + ".sqlite")) < sizes[db]
    # Nothing left to do: the checkpoint file is gone.
    assert not os.path.exists(persist.file_path(state, "ratio_dbs"))


@pytest.mark.timeout(60)
def test_periodic_checkpoint_written_off_the_channel(node, dirs):
    _, state = dirs
    _, adapter, events = launch(
        node, dirs, settings=[("smoosh", "wait_secs", "3600")], overrides={"checkpoint_interval": 0.2}
    )
    make_db(adapter.db_path("db1"), rows=300)
    assert sync_enqueue("db1", node) is True
    # A periodic checkpoint may have been written before db1 was queued (on a
    # loaded machine the first one can come before the enqueue): the one
    # after it holds db1.
    entries: dict = {}
    for _ in range(20):
        events.wait(lambda e: e[1] == "checkpointed" and e[2] == "ratio_dbs")
        entries = persist.read(persist.file_path(state, "ratio_dbs"))
        if entries:
            break
    assert list(entries) == ["db1"]
    flush(node)
    assert status(node)["ratio_dbs"]["waiting"] == {"size": 0}
    # Checkpoints written before the flush may still be queued as events (one
    # every 0.2 s: on a loaded machine, many), so follow the periodic
    # checkpoints (a bounded number, each wait bounded) until one removes the file.
    path = persist.file_path(state, "ratio_dbs")
    for _ in range(200):
        events.wait(lambda e: e[1] == "checkpointed" and e[2] == "ratio_dbs")
        if not os.path.exists(path):
            break
    assert not os.path.exists(path)


def test_misconfigured_state_dir_reported_once(node, dirs, tmp_path):
    data, _ = dirs
    configure(node.config, str(tmp_path / "missing"))
    start(node, data)
    error = server_ref(node).call("setup_error")
    assert "state_dir" in error and "missing" in error
    assert list(status(node)) == SEVEN


@pytest.mark.timeout(60)
def test_helpers_restarted_when_they_die(node, dirs):
    _, adapter, events = launch(node, dirs)
    helpers = server_ref(node).call("helpers")
    node.kill(helpers["access_cleaner"])
    events.wait_for("helper_restarted", "access_cleaner")
    node.kill(helpers["event_listener"])
    events.wait_for("helper_restarted", "event_listener")
    new = server_ref(node).call("helpers")
    assert new["event_listener"] != helpers["event_listener"]
    assert new["access_cleaner"] != helpers["access_cleaner"]
    assert new["access_cleaner"].call("clean") == 0  # nothing enqueued yet: an empty table
    # Events still reach the (new) listener.
    make_db(adapter.db_path("db1"), rows=300)
    smoosh_api._cache.clear()
    handle_db_event("db1", "local_updated", node)
    assert events.wait_for("exited", "ratio_dbs", "db1")[4] == "normal"
    # The new cleaner sweeps the server's own table: db1's access time, older
    # than staleness 0, is the one entry it removes; a second sweep finds none.
    assert new["access_cleaner"].call("clean") == 1
    assert new["access_cleaner"].call("clean") == 0


@pytest.mark.timeout(60)
def test_server_crash_restarts_tree(node, dirs):
    sup, _, events = launch(node, dirs)
    old = server_ref(node)
    node.kill(old)
    for _ in SEVEN:
        events.wait_for("channel_started")
    new = server_ref(node)
    assert new != old
    assert [c.id for c in which_children(sup)] == ["smoosh_server"]
    assert list(status(node)) == SEVEN


@pytest.mark.timeout(60)
def test_directory_watcher_enqueues_changed_dbs(node, dirs):
    _, adapter, events = launch(node, dirs, settings=[("smoosh", "watch_interval", "0.05")])
    make_db(adapter.db_path("db1"))
    assert events.wait_for("exited", "ratio_dbs", "db1")[4] == "normal"


@pytest.mark.timeout(60)
def test_view_compaction_and_index_cleanup(node, dirs):
    _, adapter, events = launch(
        node,
        dirs,
        settings=[
            ("smoosh.ratio_views", "min_size", "1"),
            ("smoosh.ratio_views", "min_priority", "1"),
        ],
    )
    make_db(adapter.db_path("db1"), rows=300)
    index = adapter.register_index("db1", "by_name")
    make_db(index, rows=600)
    before = file_size(index)
    handle_db_event("db1", ("index_commit", "by_name"), node)
    assert events.wait_for("exited", "ratio_views", ("db1", "by_name"))[4] == "normal"
    assert file_size(index) < before
    # The database goes away: its index files are cleaned up.
    os.unlink(adapter.db_path("db1"))
    assert sync_enqueue((INDEX_CLEANUP, "db1"), node) is True
    assert events.wait_for("exited", "index_cleanup", (INDEX_CLEANUP, "db1"))[4] == "normal"
    assert not os.path.exists(os.path.dirname(index))


def test_bad_keys_rejected_in_the_caller(node, dirs):
    launch(node, dirs)
    with pytest.raises(ValueError):
        sync_enqueue(("a", "b", "c"), node)
    with pytest.raises(ValueError):
        handle_db_event(42, "local_updated", node)
    assert sync_enqueue("no_such_db", node) is False


def test_api_without_smoosh_running(node):
    smoosh_api._cache.clear()
    assert server_ref(node) is None
    from actors import Exit

    # Seed smoosh_server:status/0 answers {ok, []} when the server is gone.
    assert status(node) == {}
    with pytest.raises(Exit) as info:
        sync_enqueue("db1", node)  # a call to a missing server exits noproc
    assert info.value.reason == "noproc"
    handle_db_event("db1", "local_updated", node)  # dropped, never fails


def test_restored_entry_of_an_ignored_db_is_not_compacted(node, dirs):
    # The queue checkpointed before db1 was put in [smoosh.ignore] holds it
    # at the top; the seed's start_compact/2 checks ignore_db/1 again at
    # start, so only db2 is compacted.
    data, state = dirs
    adapter = SQLiteAdapter(data)
    for db in ("db1", "db2"):
        make_db(adapter.db_path(db), rows=600)
    before = file_size(adapter.db_path("db1"))
    persist.write({"db1": float("inf"), "db2": 3.0}, persist.file_path(state, "ratio_dbs"))
    _, _, events = launch(node, dirs, settings=[("smoosh.ignore", "db1", "true")])
    done = events.wait(lambda e: e[1] == "exited" and e[2] == "ratio_dbs")
    assert (done[3], done[4]) == ("db2", "normal")
    assert not [e for e in events.seen if e[1] == "started" and e[3] == "db1"]
    info = channel_ref("ratio_dbs", node).call("info")
    assert info["active"] == {} and info["waiting"] == {}
    assert file_size(adapter.db_path("db1")) == before


def test_bad_smoosh_value_takes_its_default_and_smoosh_runs(node, dirs):
    # config:get_integer/3 and get_boolean/3 answer the default for a value
    # that does not parse: the seed's smoosh starts with a bad staleness,
    # and a later change of another [smoosh] key still applies.
    _, _, events = launch(node, dirs, settings=[("smoosh", "staleness", "soon"), ("smoosh", "db_channels", "mychan")])
    # The server creates every channel (in handle_continue) before it answers.
    assert list(status(node)) == sorted(SEVEN + ["mychan"])
    node.config.set("smoosh", "persist", "maybe")
    node.config.set("smoosh", "view_channels", "mychan2")
    events.wait_for("channel_started", "mychan2")
    assert "mychan2" in status(node)
