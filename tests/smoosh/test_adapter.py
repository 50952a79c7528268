"""The SQLite adapter on real files: sizes, priorities, VACUUM in a worker process."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap

import pytest

from actors.config import Config
from actors.smoosh.adapter import CompactionJob, SmooshAdapter, SQLiteAdapter, changed_dbs
from actors.smoosh.policy import INDEX_CLEANUP
from actors.smoosh.server_state import compute_priority
from actors.smoosh.settings import ChannelSettings

from .sqlite_util import make_db, row_count


@pytest.fixture
def adapter(tmp_path):
    a = SQLiteAdapter(tmp_path / "data")
    os.makedirs(a.data_dir)
    yield a
    a.close()


def ratio_dbs():
    return ChannelSettings.from_config(Config(), "ratio_dbs")


def test_sizes_from_pages(adapter):
    path = adapter.db_path("db1")
    make_db(path)
    info = adapter.object_info("db1")
    assert info.file_size == os.path.getsize(path)
    assert 0 < info.active_size < info.file_size / 5
    assert not info.needs_upgrade
    assert adapter.object_info("missing") is None
    assert adapter.databases() == ["db1"]


def test_priority_above_threshold(adapter):
    make_db(adapter.db_path("db1"))
    priority = compute_priority(ratio_dbs(), "db1", adapter)
    assert priority > ratio_dbs().min_priority
    assert compute_priority(ratio_dbs(), "missing", adapter) == 0


@pytest.mark.timeout(30)
def test_compaction_in_worker_shrinks_file(adapter):
    path = adapter.db_path("db1")
    make_db(path)
    before = os.path.getsize(path)
    rows = row_count(path)
    job = adapter.start_job("db1")
    assert isinstance(job, CompactionJob) and job.pid != os.getpid()
    assert adapter.start_job("db1") is job or not job.is_alive()  # adopted, not started twice
    assert job.wait(20) == 0
    assert job.exit_reason() == "normal"
    assert os.path.getsize(path) < before / 5
    assert row_count(path) == rows
    assert compute_priority(ratio_dbs(), "db1", adapter) == 0
    assert adapter.running_job("db1") is None


@pytest.mark.timeout(60)
def test_suspend_and_resume_a_running_vacuum(adapter):
    path = adapter.db_path("big")
    make_db(path, rows=12000, row_bytes=4096, keep_every=3)
    before = os.path.getsize(path)
    job = adapter.start_job("big")
    job.suspend()
    # Block until the kernel reports the worker stopped (or, unexpectedly, exited).
    info = os.waitid(os.P_PID, job.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
    assert info.si_code == os.CLD_STOPPED
    assert job.is_alive()
    with open(f"/proc/{job.pid}/stat") as fh:
        assert fh.read().rsplit(")", 1)[1].split()[0] == "T"
    assert adapter.running_job("big") is job
    job.resume()
    assert job.wait(50) == 0
    assert os.path.getsize(path) < before


@pytest.mark.timeout(30)
def test_failed_compaction_reports_reason(adapter):
    path = adapter.db_path("broken")
    with open(path, "wb") as fh:
        fh.write(b"this is not a database" * 100)
    job = adapter.start_job("broken")
    assert job.wait(20) == 1
    assert "DatabaseError" in job.exit_reason()
    with pytest.raises(FileNotFoundError):
        adapter.start_job("missing")


@pytest.mark.timeout(30)
def test_killed_compaction(adapter):
    make_db(adapter.db_path("db1"))
    job = adapter.start_job("db1")
    job.suspend()
    job.kill()
    assert job.wait(20) == -signal.SIGKILL
    assert job.exit_reason() == f"killed by signal {signal.SIGKILL}"
    assert adapter.object_info("db1") is not None  # file intact


def test_needs_upgrade_and_upgrade_compaction(tmp_path):
    a = SQLiteAdapter(tmp_path, page_size=8192)
    try:
        make_db(a.db_path("old"), rows=50)
        info = a.object_info("old")
        assert info.needs_upgrade
        upgrade = ChannelSettings.from_config(Config(), "upgrade_dbs")
        assert compute_priority(upgrade, "old", a) == 1
        assert a.start_job("old").wait(20) == 0
        assert not a.object_info("old").needs_upgrade
        assert compute_priority(upgrade, "old", a) == 0
    finally:
        a.close()


def test_index_files_compaction_and_cleanup(adapter):
    path = adapter.register_index("db1", "by_name")
    make_db(path)
    make_db(adapter.db_path("db1"), rows=10)
    views = ChannelSettings.from_config(Config(), "ratio_views")
    assert adapter.indexes("db1") == ["by_name"]
    assert compute_priority(views, ("db1", "by_name"), adapter) > 2
    before = os.path.getsize(path)
    assert adapter.start_job(("db1", "by_name")).wait(20) == 0
    assert os.path.getsize(path) < before
    # the database still exists: nothing to clean
    assert not adapter.needs_cleanup("db1")
    assert compute_priority(views, (INDEX_CLEANUP, "db1"), adapter) == 0
    os.unlink(adapter.db_path("db1"))
    assert adapter.orphaned_index_dbs() == ["db1"]
    assert compute_priority(views, (INDEX_CLEANUP, "db1"), adapter) == 1
    assert adapter.start_job((INDEX_CLEANUP, "db1")).wait(20) == 0
    assert not os.path.exists(path) and adapter.orphaned_index_dbs() == []


def test_names_are_checked(adapter):
    for bad in ("", "../x", ".hidden", "a/b", INDEX_CLEANUP):
        with pytest.raises(ValueError, match="name"):
            adapter.db_path(bad)
    with pytest.raises(ValueError, match="page_size"):
        SQLiteAdapter(adapter.data_dir, page_size=1000)


def test_adapter_satisfies_protocol(adapter):
    assert isinstance(adapter, SmooshAdapter)


@pytest.mark.timeout(30)
def test_worker_survives_the_thread_that_started_it(adapter):
    """Workers are tied to the process, not to an actor thread that may stop."""
    import threading

    make_db(adapter.db_path("db1"))
    jobs = []

    def start():
        job = adapter.start_job("db1")
        job.suspend()
        jobs.append(job)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join(20)
    [job] = jobs
    os.waitid(os.P_PID, job.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
    assert job.is_alive()
    job.resume()
    assert job.wait(20) == 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("suspended", [True, False])
def test_worker_dies_with_its_parent(tmp_path, suspended):
    """A host process that dies (SIGKILL) takes its compaction workers with it."""
    make_db(str(tmp_path / "db1.sqlite"), rows=12000, keep_every=3)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {root!r})
        from actors.smoosh.adapter import SQLiteAdapter
        job = SQLiteAdapter({str(tmp_path)!r}).start_job("db1")
        if {suspended!r}:
            job.suspend()
        print(job.pid, flush=True)
        os.kill(os.getpid(), 9)
        """
    )
    host = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=20)
    assert host.returncode == -signal.SIGKILL, host.stderr.decode()
    worker = int(host.stdout.split()[0])
    try:
        fd = os.pidfd_open(worker)
    except ProcessLookupError:
        return  # already gone and reaped
    try:
        ready, _, _ = select.select([fd], [], [], 20)
        assert ready, f"worker {worker} outlived its parent"
    finally:
        os.close(fd)


def test_scan_for_a_directory_watcher(adapter):
    make_db(adapter.db_path("a"), rows=10)
    first = adapter.scan()
    assert changed_dbs({}, first) == ["a"]
    make_db(adapter.db_path("b"), rows=10)
    from .sqlite_util import grow_db

    grow_db(adapter.db_path("a"), rows=5)
    assert changed_dbs(first, adapter.scan()) == ["a", "b"]


_DIE_MID_WRITE = textwrap.dedent("""
    import os, signal, sqlite3, sys
    con = sqlite3.connect(sys.argv[1], isolation_level=None)
    con.execute("PRAGMA cache_size = 1")  # spill changed pages into the file: the journal is needed
    con.execute("BEGIN IMMEDIATE")
    con.execute("UPDATE docs SET body = zeroblob(length(body))")
    os.kill(os.getpid(), signal.SIGKILL)  # as a VACUUM killed with its host leaves the file
""")


@pytest.mark.timeout(30)
def test_sizes_of_a_file_left_with_a_hot_journal(adapter):
    """A writer killed mid-transaction (a compaction killed with its host) leaves
    a hot rollback journal; a read-only connection cannot roll it back and
    fails with "attempt to write a readonly database".  The sizes must still
    come (the journal rolled back first), or the server skips the database
    for every channel and it is never compacted again."""
    path = adapter.db_path("db1")
    make_db(path)
    expected = adapter.object_info("db1")
    proc = subprocess.run([sys.executable, "-c", _DIE_MID_WRITE, path], timeout=20)
    assert proc.returncode == -signal.SIGKILL
    assert os.path.exists(path + "-journal")
    info = adapter.object_info("db1")
    assert info == expected
    assert compute_priority(ratio_dbs(), "db1", adapter) > ratio_dbs().min_priority
    assert row_count(path) == 200
