"""Weeks of uptime: nothing leaks when actors restart.

A node runs for weeks while its supervisors restart what crashes, so what
a restart opens must close with the incarnation that opened it.  Each test
here boots the whole application (IOQ, couch_jobs, smoosh, the replicator),
kills one kind of restartable worker `KILLS` times in a row, waiting each
time for its replacement to be up (a ``started`` notice, or the name
registered to a new ref), and then asks every process that lived through
the whole loop -- the node process, its zygote, the host processes that
were not killed -- whether it holds more than before: open fds by kind
(`actors.tools.census`: SQLite files, sockets, pipes, eventfds, pidfds...) and
threads, within `FD_SLACK` per kind and `THREAD_SLACK`.  The baseline is
taken after `WARMUP` kills, so that pools and caches have their size.

A leak of one fd per restart shows as +100 after the loop; the slack is
the few fds a pool or a peer in mid-restart may hold at any moment.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import actors.couch_jobs as couch_jobs
import supervision
from actors import ActorRef, GenServer, Node
from actors.app.couch import start_app
from actors.couch_jobs import process
from actors.ioq import FileServer
from actors.replicator import DocStore, Rep
from actors.replicator import scheduler as sched
from actors.tools.census import ProcessCensus, census_tree
from supervision import ChildSpec, SupFlags
from tests.polling import poll_until, take_first

pytestmark = pytest.mark.timeout(120)

KILLS = 100
WARMUP = 5
#: Per kind of fd, what a surviving process may hold above its baseline.
FD_SLACK = 3
THREAD_SLACK = 2
#: How long the tree may take to give back what the last restarts held (a
#: socket closing on its I/O thread, a host's pidfd once it is reaped).
SETTLE_S = 20.0
#: The node process's sockets per process it talks to (its own to the peer, and the peer's to it).
SOCKETS_PER_PEER = 2

CONFIG = {
    # The services' own supervisors give up after a few restarts in a few
    # seconds (the seeds' intensities); couch_sup then restarts the service:
    # a bigger restart, still one that must leave nothing behind.
    "couch": {"intensity": "100000", "period": "1", "ioq_pin": "false"},
    "ioq2": {"enabled": "true", "servers": "2"},
    "smoosh": {"wait_secs": "0", "staleness": "0"},
    "replicator": {
        "interval": "100",
        "max_jobs": "2",
        "health_threshold": "0.001",
        "backoff_interval": "0.001",
        "max_backoff_exponent": "0",
    },
    "couch_jobs": {"type_check_period_msec": "500"},
}


class Probe(GenServer):
    """Lives in the test process; every info message goes into a queue."""

    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q

    def handle_info(self, message: Any) -> None:
        self.q.put(message)


class JobWorker(GenServer):
    """A couch_jobs worker as a user writes one: each incarnation adds, accepts
    and finishes a job (so its thread has used the store), then says it is up."""

    def init(self, probe: ActorRef, tag: str) -> None:
        jobs = process.use(self)  # this process's store, as the demo's workers do
        job_id = f"{tag}-{self.ref.id}"
        jobs.add(None, "leak_t", job_id, {"by": tag})
        job, _ = jobs.accept("leak_t", timeout=10)
        jobs.finish(None, job, {"done": True})
        probe.send(("up", tag, self.ref))


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    node = Node()
    q: "queue.Queue[Any]" = queue.Queue()
    try:
        application = start_app(node, CONFIG, tmp_path_factory.mktemp("leaks"))
        try:
            couch_jobs.set_type_timeout("leak_t", 30)
            # The type's notifier and activity monitor start when the server
            # next looks for types: before any baseline, not in the middle of a loop.
            for sup in ("couch_jobs_notifier_sup", "couch_jobs_activity_monitor_sup"):
                poll_until(
                    lambda: supervision.count_children(node.whereis(sup))["active"] >= 1,
                    f"{sup} running a child for the test's job type",
                )
            probe = node.spawn(Probe, q)
            yield node, application, probe, q
        finally:
            application.stop()
    finally:
        node.close()


def _snapshot(node: Node) -> dict[int, ProcessCensus]:
    """The node's processes now: this one (the host program), the zygote
    (its child) and the hosts in use; the warm spares are left out, since a
    spare taken into use during the loop grows into a host."""
    hosts = {h["pid"] for h in node.hosts()}
    return {snap.pid: snap for depth, snap in census_tree(os.getpid()) if depth <= 1 or snap.pid in hosts}


def _live_peers(node: Node) -> int:
    """The host processes the node talks to now, warm spares included."""
    return sum(1 for h in list(node._pool.hosts.values()) if h.state != "dead")


def _thread_names() -> list[str]:
    return sorted(t.name for t in threading.enumerate())


def _grown(
    before: dict[int, ProcessCensus], after: dict[int, ProcessCensus], more_peers: dict[int, int] | None = None
) -> list[str]:
    """What each process alive in both holds above ``before`` beyond the slack.

    ``more_peers``: by pid, how many more live processes that process talks to
    now than at ``before`` (the node's warm spares come and go, a new one
    forked while the old is reaped); each holds `SOCKETS_PER_PEER` of its sockets."""
    out = []
    for pid in sorted(set(before) & set(after)):
        b, a = before[pid], after[pid]
        for kind in sorted(set(a.fds) | set(b.fds)):
            slack = FD_SLACK + (SOCKETS_PER_PEER * max(0, (more_peers or {}).get(pid, 0)) if kind == "socket" else 0)
            if a.fds.get(kind, 0) - b.fds.get(kind, 0) > slack:
                files = (
                    {f: n for f, n in a.files.items() if n > b.files.get(f, 0)} if kind in ("sqlite", "file") else ""
                )
                out.append(f"pid {pid}: {kind} {b.fds.get(kind, 0)} -> {a.fds[kind]} {files}")
        if a.threads - b.threads > THREAD_SLACK:
            out.append(f"pid {pid}: threads {b.threads} -> {a.threads}")
    return out


def _kill_loop(node: Node, kill_one: Callable[[int], None]) -> None:
    """`WARMUP` kills, the baseline, `KILLS` more, then everything back within the slack."""
    for i in range(WARMUP):
        kill_one(i)
    before, threads_before = _snapshot(node), _thread_names()
    channels_before = node._rt.transport.channels.names()
    peers_before = _live_peers(node)
    t0 = time.monotonic()
    for i in range(KILLS):
        kill_one(WARMUP + i)
    elapsed = time.monotonic() - t0
    deadline = time.monotonic() + SETTLE_S

    def measure() -> tuple[dict[int, ProcessCensus], list[str]]:
        more = {os.getpid(): _live_peers(node) - peers_before}
        now = _snapshot(node)
        return now, _grown(before, now, more)

    after, grown = measure()
    for _ in range(100_000):  # bounded in tries and time; each round reads /proc
        if not grown and len(after) <= len(before) or time.monotonic() > deadline:
            break
        after, grown = measure()
    assert os.getpid() in after
    assert len(after) <= len(before), (
        f"{len(before)} processes in use before the kills, {len(after)} after: "
        f"{sorted(set(after) - set(before))} are new"
    )
    names = _thread_names()
    extra = sorted(set(names) - set(threads_before)) if len(names) > len(threads_before) else []
    assert not grown, (
        f"after {KILLS} kills in {elapsed:.1f} s, still held {SETTLE_S:g} s later "
        f"(slack {FD_SLACK} fds per kind, {THREAD_SLACK} threads):\n"
        + "\n".join(grown)
        + (f"\nnew threads here: {extra}" if extra else "")
        + f"\nreply channels of this process: {len(channels_before)} -> "
        f"{len(node._rt.transport.channels.names())}; live host processes (spares too): "
        f"{peers_before} -> {_live_peers(node)}"
    )


def _await_new(node: Node, name: str, old: ActorRef | None, what: str) -> ActorRef:
    """The ref registered under ``name`` once it is not ``old`` (each try asks the registry)."""
    return poll_until(
        lambda: (lambda ref: ref if ref is not None and ref != old else None)(node.whereis(name)), what, seconds=30
    )


def test_couch_jobs_workers_restarted_100_times_leave_nothing(app):
    """Workers that used the store, in the node process and in a host process."""
    node, _, probe, q = app
    specs = [
        ChildSpec(id="w_node", start=(JobWorker, (probe, "w_node"))),
        ChildSpec(id="w_host", start=(JobWorker, (probe, "w_host")), host="leak_workers"),
    ]
    sup = supervision.start_supervisor(node, SupFlags("one_for_one", intensity=100_000, period=1), specs)
    try:
        refs = {}
        for tag in ("w_node", "w_host"):
            up = take_first(q, lambda m: m[:2] == ("up", tag), timeout=30)
            assert up is not None
            refs[tag] = up[2]

        def kill_one(i: int) -> None:
            tag = ("w_node", "w_host")[i % 2]
            node.kill(refs[tag])
            up = take_first(q, lambda m: m[:2] == ("up", tag) and m[2] != refs[tag], timeout=30)
            assert up is not None, f"{tag} was not restarted after kill {i}"
            refs[tag] = up[2]

        _kill_loop(node, kill_one)
    finally:
        node.stop(sup, timeout=30)


def test_ioq_servers_restarted_100_times_leave_nothing(app):
    node = app[0]
    names = ("ioq_server_1", "ioq_server_2", "ioq_server")

    def kill_one(i: int) -> None:
        name = names[i % len(names)]
        old = _await_new(node, name, None, f"{name} registered")
        node.kill(old)
        _await_new(node, name, old, f"{name} restarted after kill {i}")

    _kill_loop(node, kill_one)


def test_ioq_file_servers_killed_100_times_close_their_files(app, tmp_path):
    """A `FileServer` killed in a host that lives on (``kill`` runs no
    ``terminate``) must not leave its file open there."""
    node = app[0]
    names = [f"leak_file_{i}" for i in range(3)]
    specs = []
    for name in names:
        path = tmp_path / f"{name}.bin"
        path.write_bytes(b"x" * 4096)
        specs.append(ChildSpec(id=name, start=(FileServer, (str(path), False)), host="leak_files", name=name))
    sup = supervision.start_supervisor(node, SupFlags("one_for_one", intensity=100_000, period=1), specs)
    try:

        def kill_one(i: int) -> None:
            name = names[i % len(names)]
            old = _await_new(node, name, None, f"{name} registered")
            node.kill(old)
            _await_new(node, name, old, f"{name} restarted after kill {i}")

        _kill_loop(node, kill_one)
    finally:
        node.stop(sup, timeout=30)


def test_smoosh_channels_restarted_100_times_leave_nothing(app):
    node = app[0]
    names = ("smoosh_channel_ratio_dbs", "smoosh_channel_slack_dbs", "smoosh_channel_upgrade_dbs")

    def kill_one(i: int) -> None:
        name = names[i % len(names)]
        old = _await_new(node, name, None, f"{name} registered")
        node.kill(old)
        _await_new(node, name, old, f"{name} restarted after kill {i}")

    _kill_loop(node, kill_one)


def test_replication_jobs_restarted_100_times_leave_nothing(app, tmp_path):
    """Each job runs in a host process of its own: a kill ends the job, its host
    exits, and the scheduler starts it again in a new one."""
    node, _, probe, q = app
    sched.subscribe(node, probe)
    jobs: dict[str, ActorRef] = {}
    for k in range(2):
        source = str(tmp_path / f"src{k}.db")
        with DocStore(source, create=True) as store:
            for i in range(5):
                store.put(f"d{i}", {"n": i})
        rep = Rep(
            id=f"leak{k}",
            source=source,
            target=str(tmp_path / f"tgt{k}.db"),
            options={"continuous": True, "create_target": True},
            db_name="_replicator",
        )
        assert sched.add_job(node, rep) == "ok"
    for _ in range(2):
        started = take_first(q, lambda m: len(m) == 4 and m[1] == "started", timeout=30)
        assert started is not None
        jobs[started[2]] = started[3]
    try:

        def kill_one(i: int) -> None:
            job_id = sorted(jobs)[i % 2]
            node.kill(jobs[job_id])
            started = take_first(q, lambda m: len(m) == 4 and m[1] == "started" and m[2] == job_id, timeout=30)
            assert started is not None, f"{job_id} was not started again after kill {i}"
            jobs[job_id] = started[3]

        _kill_loop(node, kill_one)
    finally:
        for job_id in jobs:
            sched.remove_job(node, job_id)


def test_a_host_sigkilled_100_times_leaves_nothing_of_it(app):
    """SIGKILL the smoosh host process: couch_sup starts smoosh again in a new
    one, and the node keeps no socket, pidfd, eventfd or thread of the old."""
    node = app[0]

    def kill_one(i: int) -> None:
        old = _await_new(node, "smoosh_server", None, "smoosh_server registered")
        os.kill(old.os_pid, signal.SIGKILL)
        new = _await_new(node, "smoosh_server", old, f"smoosh restarted after SIGKILL {i}")
        assert new.os_pid != old.os_pid

    _kill_loop(node, kill_one)
