"""The application tree: every service starts under couch_sup, answers, restarts, and stops cleanly."""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
import time
from typing import Any

import pytest

import actors.couch_jobs as couch_jobs
import supervision
from actors import ActorRef, Exit, GenServer
from actors.app.couch import COUCH_SUP, SUBSYSTEMS, load_config, start_app
from actors.ioq import FileServer
from actors.ioq import call as ioq_call
from actors.replicator import DocStore, Rep
from actors.replicator import scheduler as sched
from actors.smoosh import handle_db_event, status

pytestmark = pytest.mark.timeout(60)

FAST = {
    "ioq2": {"enabled": "true", "servers": "2"},
    "smoosh": {"wait_secs": "0", "staleness": "0"},
    "smoosh.ratio_dbs": {"min_size": "16384"},
    "replicator": {"interval": "200", "max_jobs": "2"},
    "couch_jobs": {"type_check_period_msec": "500"},
}


class Probe(GenServer):
    """Lives in the test process; every info message goes into a queue."""

    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q

    def handle_info(self, message: Any) -> None:
        self.q.put(message)


def expect(q: "queue.Queue[Any]", pred: Any, timeout: float = 20.0, limit: int = 100_000) -> Any:
    deadline = time.monotonic() + timeout
    for _ in range(limit):
        message = q.get(timeout=max(0.01, deadline - time.monotonic()))
        if pred(message):
            return message
    raise AssertionError("no matching message")


def dirty_db(path: str) -> None:
    """A SQLite file that is three quarters free pages."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, b BLOB)")
        conn.executemany("INSERT INTO t (b) VALUES (?)", [(os.urandom(2048),) for _ in range(200)])
        conn.execute("DELETE FROM t WHERE id % 4 != 0")
    finally:
        conn.close()


@pytest.fixture
def app(node, tmp_path):
    q: "queue.Queue[Any]" = queue.Queue()
    observer = node.spawn(Probe, q)
    application = start_app(node, FAST, tmp_path / "state", smoosh_observer=observer)
    application.smoosh_events = q
    try:
        yield application
    finally:
        application.stop()


def test_tree_has_one_supervisor_per_service(app, node, tmp_path):
    assert node.whereis(COUCH_SUP) == app.top
    rows = supervision.which_children(app.top)
    assert [r.id for r in rows] == list(SUBSYSTEMS.values())
    assert all(r.type == "supervisor" and isinstance(r.child, ActorRef) for r in rows)
    for subsystem, name in SUBSYSTEMS.items():
        assert app.whereis(subsystem) == node.whereis(name) != None  # noqa: E711
    assert app.state_dir == str(tmp_path / "state")
    assert os.path.isfile(app.couch_jobs_path)
    assert app.couch_jobs_path == os.path.join(app.state_dir, "couch_jobs.sqlite")
    assert node.config.get("smoosh", "state_dir") == app.smoosh_state_dir
    # IOQ2 servers pinned one per core, smoosh in its own host process
    names = {a.get("registered"): a for a in node.actors()}
    assert names["ioq_server_1"]["cpus"] and names["ioq_server_2"]["cpus"]
    assert names["smoosh_server"]["pid"] != os.getpid()


def test_ioq_reads_real_bytes(app, node, tmp_path):
    path = tmp_path / "blob.bin"
    data = os.urandom(65536)
    path.write_bytes(data)
    f = node.spawn(FileServer, str(path), False)
    got = ioq_call(f, ("pread", 1000, 5000), ("interactive", "shards/00000000-1fffffff/t/db"), timeout=10)
    assert bytes(got) == data[1000:6000]


def test_smoosh_answers_and_compacts_a_database(app, node):
    assert {"ratio_dbs", "slack_dbs", "upgrade_dbs"} <= set(status(node))
    path = os.path.join(app.data_dir, "db1.sqlite")
    dirty_db(path)
    size_before = os.path.getsize(path)
    handle_db_event("db1", "local_updated", node)
    expect(app.smoosh_events, lambda m: m[1] == "exited" and m[3] == "db1")
    assert os.path.getsize(path) < size_before / 2


def test_replicator_job_added_and_completed(app, node, tmp_path):
    source = str(tmp_path / "src.db")
    with DocStore(source, create=True) as store:
        for i in range(30):
            store.put(f"d{i:03d}", {"n": i})
    q: "queue.Queue[Any]" = queue.Queue()
    sched.subscribe(node, node.spawn(Probe, q))
    rep = Rep(
        id="once",
        source=source,
        target=str(tmp_path / "tgt.db"),
        options={"continuous": False, "create_target": True},
        db_name="_replicator",
    )
    assert sched.add_job(node, rep) == "ok"
    expect(q, lambda m: m[1] == "completed" and m[2] == "once")
    with DocStore(rep.target) as target:
        assert target.info()["doc_count"] == 30
    assert sched.job(node, "once") is None


def test_couch_jobs_add_accept_finish(app, node):
    couch_jobs.set_type_timeout("app_t", 5)
    couch_jobs.add(None, "app_t", "j1", {"x": 1})
    job, data = couch_jobs.accept("app_t", timeout=5)
    assert (job.id, data) == ("j1", {"x": 1})
    couch_jobs.finish(None, job, {"x": 2})
    assert couch_jobs.get_job_state(None, "app_t", "j1") == "finished"
    assert couch_jobs.get_job_data(None, "app_t", "j1") == {"x": 2}


def test_a_killed_service_is_restarted_alone(app, node):
    old = {s: app.whereis(s) for s in SUBSYSTEMS}
    mon = node.monitor(old["smoosh"])
    node.kill(old["smoosh"])
    assert mon.wait(10)[1] == "killed"
    deadline = time.monotonic() + 20
    new = None
    while time.monotonic() < deadline:  # bounded: each round is a call to couch_sup
        rows = {r.id: r.child for r in supervision.which_children(app.top)}
        new = rows["smoosh_sup"]
        if isinstance(new, ActorRef) and new != old["smoosh"]:
            break
    assert isinstance(new, ActorRef) and new != old["smoosh"]
    for s in ("ioq", "couch_jobs", "replicator"):
        assert app.whereis(s) == old[s]
    assert {"ratio_dbs"} <= set(status(node))


def test_stop_stops_the_tree_and_closes_couch_jobs(node, tmp_path):
    application = start_app(node, FAST, tmp_path)
    top = application.top
    application.stop()
    assert not top.is_alive()
    assert all(node.whereis(name) is None for name in SUBSYSTEMS.values())
    assert couch_jobs.api._default is None
    application.stop()  # idempotent
    assert os.path.isfile(os.path.join(tmp_path, "couch_jobs.sqlite"))  # the state stays


def test_embedded_defaults_use_a_fresh_temporary_state_dir(node):
    application = start_app(node)
    try:
        assert application.owns_state_dir and os.path.isdir(application.state_dir)
        assert node.config.get("couch_jobs", "database_path").startswith(application.state_dir)
        # seeds' defaults apply to everything the app does not place
        assert node.config.get("replicator", "max_jobs") is None
    finally:
        application.stop()
    assert not os.path.exists(application.state_dir)


def test_config_from_an_ini_file(node, tmp_path):
    ini = tmp_path / "couch.ini"
    state = tmp_path / "from_ini"
    ini.write_text(f"[couch]\nstate_dir = {state}\n\n[replicator]\nmax_jobs = 7\n\n[ioq2]\nservers = 1\n")
    application = start_app(node, str(ini))
    try:
        assert application.state_dir == str(state)
        assert node.config.get("replicator", "max_jobs") == "7"
        assert [a for a in node.actors() if a.get("registered") == "ioq_server_1"]
        assert not [a for a in node.actors() if a.get("registered") == "ioq_server_2"]
    finally:
        application.stop()


def test_bad_config_is_refused_with_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.ini"):
        load_config(tmp_path / "nowhere.ini")
    with pytest.raises(TypeError, match="config must be"):
        load_config(42)


class _Child(GenServer):
    def init(self) -> None:
        pass


class _SlowParent(GenServer):
    """Spawns a linked child once ``gate`` opens, whatever happened to it meanwhile."""

    def init(self, entered: threading.Event, gate: threading.Event, done: threading.Event, out: list) -> None:
        self.entered, self.gate, self.done, self.out = entered, gate, done, out

    def handle_cast(self, msg: Any) -> None:
        self.entered.set()
        self.gate.wait(5)
        try:
            self.out.append(self.spawn_link(_Child, name="app_test_orphan"))
        except Exit as exc:  # refusing to spawn from a dead actor is a correct answer too
            self.out.append(exc)
        except BaseException as exc:  # any other error is a failure the test must see
            self.out.append(("unexpected", exc))
        self.done.set()


@pytest.mark.timeout(20)
def test_kernel_spawn_link_by_a_killed_actor_leaves_no_orphan(node):
    """Kernel bug found by the demo (smoosh_server killed during its handle_continue).

    ``kill`` marks an actor dead at once but its running callback goes on;
    a ``spawn_link`` it then makes succeeds and the child, linked to a dead
    parent, never gets the exit signal -- it lives on holding its name, so a
    restarted parent can never start its own.  OTP: a dead process spawns
    nothing; linking to a dead process delivers the exit at once.
    """
    entered, gate, done, out = threading.Event(), threading.Event(), threading.Event(), []
    parent = node.spawn(_SlowParent, entered, gate, done, out)
    parent.cast("go")
    assert entered.wait(5)
    mon = node.monitor(parent)
    node.kill(parent)
    assert mon.wait(5)[1] == "killed"
    gate.set()
    assert done.wait(5), "the callback did not finish"
    child = out[0]
    if isinstance(child, ActorRef):
        assert node.monitor(child).wait(5)[1] in ("killed", "noproc")
    else:  # refused: the dead parent's own exit reason, nothing else
        assert isinstance(child, Exit) and child.reason == "killed", child
    assert node.whereis("app_test_orphan") is None


def test_a_start_that_fails_halfway_leaves_couch_jobs_detached_and_can_be_tried_again(node, tmp_path):
    """The tree fails after couch_jobs attached this process (a clustered replicator on a node
    that is not distributed): the failure releases the attachment, so a later start (a node's
    next incarnation, after one that ended while it started) does not find it taken."""
    from actors.couch_jobs import process

    with pytest.raises(supervision.StartError):
        start_app(node, {"replicator": {"cluster": "true"}}, str(tmp_path / "first"))
    assert process.attachment() is None
    assert node.whereis(COUCH_SUP) is None
    app = start_app(node, {"replicator": {"cluster": "false"}}, str(tmp_path / "second"))
    try:
        assert process.attachment() is not None and node.whereis(COUCH_SUP) == app.top
    finally:
        app.stop()
