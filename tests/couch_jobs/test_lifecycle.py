"""couch_jobs setup and teardown in one process: stop clears the
per-process state, and the process agent is supervised."""

from __future__ import annotations

import os
import time

import pytest

import actors.couch_jobs as couch_jobs
import supervision
from actors.couch_jobs import CouchJobs, CouchJobsError, app, attachment, process
from actors.couch_jobs.client import force_check_types
from tests.couch_jobs.actor_fixtures import notifiers

pytestmark = pytest.mark.timeout(60)


def test_second_start_with_another_store_uses_that_store(node, tmp_path):
    app.start(node, tmp_path / "a.db")
    first = process.local_jobs()
    couch_jobs.set_type_timeout("t", 5)
    couch_jobs.add(None, "t", "only-in-a", {})
    app.stop(node)
    assert process.attachment() is None
    assert first.store.closed  # start opened it, stop closed it
    with pytest.raises(CouchJobsError, match="not configured"):
        couch_jobs.default()

    app.start(node, tmp_path / "b.db")
    try:
        second = process.local_jobs()
        assert second is not first
        assert second.store.path == str(tmp_path / "b.db")
        assert couch_jobs.get_jobs() == []
        assert couch_jobs.get_type_timeout("t") is None
    finally:
        app.stop(node)


def test_start_refuses_a_store_other_than_the_one_in_use(node, tmp_path):
    mine = CouchJobs(tmp_path / "mine.db")
    couch_jobs.set_default(mine)
    try:
        with pytest.raises(CouchJobsError, match="already uses store"):
            app.start(node, tmp_path / "other.db")
        assert process.attachment() is None
        assert node.whereis("couch_jobs_sup") is None
        app.start(node, tmp_path / "mine.db")  # the same store is fine
        app.stop(node)
        assert not mine.store.closed  # the caller's instance stays open and the default
        assert couch_jobs.default() is mine
    finally:
        couch_jobs.set_default(None)
        mine.close()


def test_stop_stops_the_process_agent_and_its_supervisor(node, tmp_path):
    app.start(node, tmp_path / "a.db")
    att = process.attachment()
    agent, agent_sup = att.agent, att.agent_sup
    watch_agent, watch_sup = node.monitor(agent), node.monitor(agent_sup)
    app.stop(node)
    assert watch_agent.wait(10)[1] == "normal"
    assert watch_sup.wait(10)[1] == "shutdown"


def test_a_killed_process_agent_is_restarted_and_serves_again(node, tmp_path):
    app.start(node, tmp_path / "a.db")
    try:
        att = attachment.attachment()
        old = att.agent
        sup = att.agent_sup
        assert [c.child for c in supervision.which_children(sup)] == [old]
        node.kill(old)
        deadline = time.monotonic() + 10
        new = old
        while new == old and time.monotonic() < deadline:
            rows = supervision.which_children(sup)  # a call: no sleeping
            new = rows[0].child if rows else old
        assert new != old and att.agent == new
        couch_jobs.set_type_timeout("t", 5)
        force_check_types()  # reaches the server through the new agent
        assert couch_jobs.get_notifier_server("t") in notifiers(node)
    finally:
        app.stop(node)


def test_start_without_a_store_uses_a_file_in_the_nodes_state_directory(node, tmp_path):
    """``[couch_jobs] store`` defaults to a file in the node's state
    directory: the node's own directory, or ``[couch] state_dir`` when set."""
    app.start(node)
    try:
        expected = os.path.join(node.rundir, app.DEFAULT_FILE)
        assert process.local_jobs().store.path == expected
        assert node.config.get("couch_jobs", "store") == expected  # what host processes open too
        couch_jobs.set_type_timeout("t", 5)
        couch_jobs.add(None, "t", "j", {})
        assert os.path.exists(expected)
    finally:
        app.stop(node)
    node.config.delete("couch_jobs", "store")  # start recorded the default: forget it
    node.config.delete("couch_jobs", "database_path")
    node.config.set("couch", "state_dir", str(tmp_path))
    app.start(node)
    try:
        assert process.local_jobs().store.path == str(tmp_path / app.DEFAULT_FILE)
    finally:
        app.stop(node)


@pytest.mark.parametrize("store", ["sqlite:///{missing}/jobs.db", "{missing}/jobs.db"])
def test_a_sqlite_store_that_cannot_be_opened_fails_start_naming_it(node, tmp_path, store):
    """A bad location for the embedded store: one `StoreUnavailable` line
    naming the file (not sqlite3's bare "unable to open database file")."""
    location = store.format(missing=tmp_path / "no" / "such" / "dir")
    with pytest.raises(couch_jobs.StoreUnavailable) as info:
        app.start(node, location)
    message = str(info.value)
    assert str(tmp_path / "no" / "such" / "dir" / "jobs.db") in message and "\n" not in message
    assert node.whereis("couch_jobs_sup") is None and process.attachment() is None
    with pytest.raises(CouchJobsError, match="not configured"):
        couch_jobs.default()
