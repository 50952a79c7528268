"""``otpy node`` and ``otpy demo --nodes N``: real node processes over tcp on 127.0.0.1, real keys.

A node started by the command serves until SIGTERM/SIGINT and leaves no
process, runtime directory or temporary state behind; another node holding
the key connects to it and finds its application.  ``demo --nodes 3
--short`` SIGKILLs a whole node, restarts it, and still proves nothing was
lost; interrupted, it stops its nodes and reports a partial summary.
"""

from __future__ import annotations

import ctypes
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actors import Node
from actors._core.net.keys import write_new
from actors.app.demo_cluster import _descends_from, node_config
from actors.app.nodecmd import parse_ready
from actors.config import Config
from tests.postgres import HOW_TO_GET, postgres_missing

ROOT = str(Path(__file__).resolve().parent.parent.parent)
ENV = dict(os.environ, PYTHONPATH=ROOT)
CLI = [sys.executable, "-m", "actors"]


def _descendants(pid: int) -> set[int]:
    """Every live process under ``pid``, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: set[int] = set()
    frontier = [pid]
    for _ in range(10_000):
        if not frontier:
            break
        p = frontier.pop()
        for child, parent in parents.items():
            if parent == p and child not in found:
                found.add(child)
                frontier.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not yet reaped by its parent) is gone for our purpose
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone(pids: set[int], timeout: float = 20.0) -> set[int]:
    """The pids still alive after ``timeout``: each is waited on through a pidfd (readable once it exits)."""
    deadline = time.monotonic() + timeout
    left = set()
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if not poller.poll(max(0, int((deadline - time.monotonic()) * 1000))) and _alive(pid):
                left.add(pid)
        finally:
            os.close(fd)
    return left


def _start_node(tmp_path: Path, name: str, key: str, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [*CLI, "node", "--name", name, "--cluster-key", key, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=ROOT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the ready line, or EOF if it failed (then stderr says why)
    if parse_ready(line) is None:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        raise AssertionError(f"no ready line: {line!r} {err}")
    return proc, line


def _kill_if_running(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.communicate(timeout=30)


def _stop_node(proc: subprocess.Popen[str], signum: int = signal.SIGTERM) -> tuple[str, str]:
    """Send ``signum`` and wait for the node to exit; killed if it does not, or if signalling failed."""
    try:
        os.kill(proc.pid, signum)
        return proc.communicate(timeout=60)
    finally:
        _kill_if_running(proc)


# -- otpy node ----------------------------------------------------------------------------------


@pytest.mark.timeout(90)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_node_command_serves_a_connectable_node_until_a_signal_and_leaves_nothing(tmp_path, signum):
    key = str(tmp_path / "cluster.key")
    write_new(key)
    # The node joins the probe through --seeds: once the probe sees it up, it already sees the probe, so
    # the probe's calls are answered.  (The other way round, a call right after probe.connect() may
    # reach a node that does not see the probe yet, and its reply is lost: a known race of connect.)
    with Node(name="probe", listen="tcp://127.0.0.1:0", cluster_key=key) as probe:
        proc, line = _start_node(tmp_path, "n1", key, "--seeds", str(probe.address))
        try:
            ready = parse_ready(line)
            assert ready is not None and ready.name == "n1" and ready.pid == proc.pid
            assert re.fullmatch(r"tcp://127\.0\.0\.1:\d+", ready.address)
            assert os.path.isdir(ready.rundir) and os.path.isdir(ready.state_dir)
            assert probe.wait_for_node("n1", timeout=30.0)
            top = probe.whereis("couch_sup", node="n1", timeout=10.0)
            assert top is not None and top.os_pid == proc.pid  # the whole application is up there
            assert probe.whereis("couch_replicator_scheduler", node="n1", timeout=10.0) is not None
            hosts = _descendants(proc.pid)
            assert hosts, "the application's host processes"
        finally:
            out, err = _stop_node(proc, signum)
    assert proc.returncode == 0, err
    assert "node n1 stopped" in out
    assert "Traceback" not in err, err
    assert not _gone(hosts), "host processes outlived their node"
    assert not os.path.exists(ready.rundir), "runtime directory left behind"
    assert not os.path.exists(ready.state_dir), "temporary state directory left behind"


def _signal_threads_other_than_main(pid: int, signum: int) -> list[int]:
    """What the kernel may do with a signal sent to ``pid``: give it to a thread other than the main one.

    Every such thread not blocking the signal is sent it (``tgkill``), so the test does not hang on a thread
    that happened to be exiting (a signal sent to one thread dies with it); none is sent to the main thread.
    """
    tgkill = getattr(ctypes.CDLL(None, use_errno=True), "tgkill", None)
    if tgkill is None:
        pytest.skip("needs glibc 2.30 or later (tgkill) to signal one thread of another process")
    sent = []
    for task in sorted(os.listdir(f"/proc/{pid}/task")):
        try:
            with open(f"/proc/{pid}/task/{task}/status", encoding="ascii") as fh:
                blocked = int(next(line for line in fh if line.startswith("SigBlk:")).split()[1], 16)
        except OSError:
            continue  # the thread has just ended
        if int(task) != pid and not blocked & (1 << (signum - 1)) and tgkill(pid, int(task), signum) == 0:
            sent.append(int(task))
    assert sent, "no thread but the main one takes the signal: nothing to test"
    return sent


def _threads_of(pid: int) -> str:
    """Each thread's state, wait channel and signals, for a failure message."""
    rows = []
    for task in sorted(os.listdir(f"/proc/{pid}/task")):
        try:
            with open(f"/proc/{pid}/task/{task}/status", encoding="ascii") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
            with open(f"/proc/{pid}/task/{task}/wchan", encoding="ascii") as fh:
                wchan = fh.read().strip()
        except OSError:
            continue
        rows.append(
            f"{task} {fields['State'].strip()} wchan={wchan} pending={fields['SigPnd'].strip()} "
            f"blocked={fields['SigBlk'].strip()}"
        )
    return "\n".join(rows)


def _exited(proc: subprocess.Popen[str], after: str) -> tuple[str, str]:
    """The output of a node that exits within 60 s; else a failure listing each of its threads' state."""
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after {after}:\n{_threads_of(proc.pid)}") from None


@pytest.mark.timeout(90)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_node_command_stops_when_another_thread_takes_the_signal(tmp_path, signum):
    """The main thread waits for the stop signal; the kernel may give it to any of the node's threads."""
    key = str(tmp_path / "cluster.key")
    write_new(key)
    proc, line = _start_node(tmp_path, "n3", key)
    try:
        sent = _signal_threads_other_than_main(proc.pid, signum)
        out, err = _exited(proc, f"the signal went to threads {sent}")
    finally:
        _kill_if_running(proc)
    assert proc.returncode == 0, err
    assert "node n3 stopped" in out


@pytest.mark.timeout(60)
def test_node_command_keeps_a_given_state_dir_and_stops_with_its_parent(tmp_path):
    """``--stop-with-parent``: a node whose starter is gone stops cleanly on its own (demo SIGKILLed)."""
    key = str(tmp_path / "cluster.key")
    write_new(key)
    state = tmp_path / "state"
    # The starter is a shell that starts the node in the background (sharing our stdout pipe), says its
    # pid and waits for a line on stdin: closing stdin makes it exit, orphaning the node.
    shell = (
        f"{sys.executable} -m actors node --name n2 --cluster-key {key} --state-dir {state} "
        f"--stop-with-parent & echo PID $!; read line"
    )
    starter = subprocess.Popen(
        ["bash", "-c", shell], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT
    )
    assert starter.stdout is not None and starter.stdin is not None
    pid = ready = None
    try:
        for _ in range(10):
            line = starter.stdout.readline()
            if not line:
                break
            if line.startswith("PID "):
                pid = int(line.split()[1])
            ready = parse_ready(line) or ready
            if pid is not None and ready is not None:
                break
        assert pid is not None and ready is not None and ready.state_dir == str(state)
        starter.stdin.close()  # the starter exits: its child the node must follow
        starter.wait(timeout=10)
        rest = starter.stdout.read()  # EOF once the node, the last writer of the pipe, has exited
        assert not _gone({pid}, timeout=30), "the node outlived the process that started it"
    finally:
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)
        starter.stdout.close()
    assert "node n2 stopped" in rest
    assert state.is_dir(), "a state directory given by the user is kept"
    assert not os.path.exists(ready.rundir)


@pytest.mark.timeout(90)
def test_node_command_listens_where_the_ini_cluster_section_says(tmp_path):
    """docs/distribution.md's "the same [cluster] section everywhere": without
    --listen, the ini's ``[cluster] listen`` is used (not loopback on a free port)."""
    key = str(tmp_path / "cluster.key")
    write_new(key)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ini = tmp_path / "node.ini"
    ini.write_text(f"[cluster]\nlisten = tcp://127.0.0.1:{port}\nnet_ticktime = 5\n")
    proc, line = _start_node(tmp_path, "n3", key, "--config", str(ini))
    try:
        ready = parse_ready(line)
        assert ready is not None and ready.address == f"tcp://127.0.0.1:{port}"
    finally:
        _out, err = _stop_node(proc)
    assert proc.returncode == 0, err


def test_node_command_refuses_an_unsafe_key_in_one_line(tmp_path):
    key = tmp_path / "cluster.key"
    write_new(str(key))
    key.chmod(0o644)
    out = subprocess.run(
        [*CLI, "node", "--name", "n1", "--cluster-key", str(key)],
        capture_output=True,
        text=True,
        timeout=50,
        env=ENV,
        cwd=ROOT,
    )
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "mode 0644" in out.stderr, out.stderr


# -- pieces of demo --nodes, without processes ---------------------------------------------------


def test_node_ini_shares_the_jobs_store_but_not_the_state_dir(tmp_path):
    cfg = Config({"couch": {"state_dir": "/ctl/state", "intensity": "30"}, "replicator": {"max_jobs": "3"}})
    path = tmp_path / "node.ini"
    node_config(cfg, {"database_path": "/ctl/state/couch_jobs.sqlite"}, str(path), "/ctl/state/_replicator.sqlite")
    back = Config.from_ini(str(path))
    assert back.get("couch", "state_dir") is None
    assert back.get("couch", "intensity") == "30" and back.get("replicator", "max_jobs") == "3"
    assert back.get("couch_jobs", "database_path") == "/ctl/state/couch_jobs.sqlite"
    assert back.get("couch", "replicator_job_host") == "none"
    assert back.get("replicator", "cluster") == "true"
    assert back.get("replicator", "replicator_db") == "/ctl/state/_replicator.sqlite"
    assert back.get("replicator", "store") is None
    node_config(cfg, {"store": "postgresql://u@h/db"}, str(path), "postgresql://u@h/db", "postgresql://u@h/db")
    back = Config.from_ini(str(path))
    assert back.get("replicator", "store") == back.get("replicator", "replicator_db") == "postgresql://u@h/db"
    assert back.get("replicator", "lease_ttl") == "4"


def test_only_descendants_of_the_given_roots_may_be_sigkilled():
    me = os.getpid()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert _descends_from(child.pid, {me})
        assert not _descends_from(me, {child.pid})
        assert not _descends_from(child.pid, {child.pid + 10_000_000})
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)


# -- demo --nodes 3 ------------------------------------------------------------------------------


def _pids_in(text: str) -> set[int]:
    return {int(p) for p in re.findall(r"\bn\d+ \w+ pid (\d+)", text)}


@pytest.mark.timeout(120)
def test_demo_on_three_nodes_survives_a_node_kill_and_loses_nothing():
    out = subprocess.run(
        [*CLI, "demo", "--nodes", "3", "--short", "--no-live", "--seed", "5"],
        capture_output=True,
        text=True,
        timeout=110,
        env=ENV,
        cwd=ROOT,
    )
    text = out.stdout
    assert out.returncode == 0, text + out.stderr
    assert re.search(r"controller and 3 nodes up .*n1 up pid \d+; n2 up pid \d+; n3 up pid \d+", text)
    m = re.search(
        r"nodes: 3 node processes over tcp; (\d+) SIGKILLed whole, (\d+) of them restarted and "
        r"reconnected as a new incarnation",
        text,
    )
    assert m and int(m.group(1)) >= 1 and m.group(1) == m.group(2), text
    assert re.search(r"restarts per supervisor on the nodes \(current incarnations\): n1: .*; n2: .*; n3: ", text)
    per_node = re.search(r"finishes per node: (.*)", text).group(1)
    # Workers on every node; the node killed first may have finished nothing on a loaded machine, so
    # the finishes must come from at least two nodes.
    assert len({n for n, k in re.findall(r"(n\d) (\d+)", per_node) if int(k) > 0}) >= 2, per_node
    placed = re.search(r"last placement: ([^)]*)\)", text).group(1)
    assert len(placed.split(",")) >= 2, placed  # replications spread over the nodes
    assert "members seen: all agree on n1,n2,n3" in text  # a full mesh; the controller is no member
    node_reads = re.search(r"ioq on the nodes: .*", text).group(0)
    assert "0 wrong bytes" in node_reads and "0 hung" in node_reads, node_reads
    assert {"n1", "n2", "n3"} <= set(re.findall(r"\b(n\d) \d+", node_reads)), node_reads  # reads on every node
    assert "finished exactly once" in text and "0 missing" in text and "0 hung" in text
    # the readers were found as members of their process group; the Beacon is one, cluster-wide
    readers = re.search(r"by (\d+) readers", node_reads)
    assert readers and int(readers.group(1)) >= 3, node_reads  # one per node at least, found in the group
    singleton = re.search(r"singleton: .*", text).group(0)
    assert "0 found two live holders" in singleton and "name one live holder" in singleton, singleton
    sharded = re.search(r"sharding: (\d+) entity calls to \d+ counter entities .*", text)
    assert sharded and int(sharded.group(1)) > 0, text  # entities on the nodes, called from the controller
    assert "every acknowledged increment counted, 0 lost" in sharded.group(0), sharded.group(0)
    result = [line for line in text.splitlines() if line.startswith("RESULT:")]
    assert len(result) == 1 and result[0].startswith("RESULT: nothing lost -- checked 3 nodes up ("), result
    state_dir = re.search(r"state directory (\S+)", text).group(1)
    assert not os.path.exists(state_dir)
    for rundir in re.findall(r"runtime directory (\S+) \(attach", text):
        assert not os.path.exists(rundir), "a node's runtime directory was left behind"
    assert not _gone(_pids_in(text)), "node processes left behind"
    assert "Traceback" not in out.stderr, out.stderr


@pytest.mark.timeout(120)
def test_demo_on_nodes_interrupted_stops_its_nodes_and_prints_a_partial_summary():
    proc = subprocess.Popen(
        [*CLI, "demo", "--nodes", "2", "--no-live", "--duration", "60", "--seed", "6"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=ROOT,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines = []
    for _ in range(60):
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("workload (seed"):
            break
    head = "".join(lines)
    if not head.rstrip().splitlines() or not lines[-1].startswith("workload (seed"):
        proc.kill()
        raise AssertionError("demo never reached its load phase:\n" + head + proc.stderr.read())
    node_pids = _pids_in(head)
    everything = set(node_pids)
    for pid in node_pids:
        everything |= _descendants(pid)
    assert len(node_pids) == 2
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=100)
    out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.returncode == 143, head + out + err
    assert "PARTIAL summary" in out and "RESULT: interrupted after" in out
    assert "Traceback" not in err, err
    assert not _gone(everything), "node processes or their hosts left behind"
    state_dir = re.search(r"state directory (\S+)", head).group(1)
    assert not os.path.exists(state_dir)


@pytest.mark.timeout(200)
def test_demo_on_nodes_with_postgres_shares_one_store_and_no_job_runs_twice():
    """On PostgreSQL the nodes share couch_jobs' store and the replicator's (documents, databases,
    leases): the summary reads the audit of runs and finds no job that ran on two nodes at once."""
    if postgres_missing():
        pytest.skip(HOW_TO_GET)
    out = subprocess.run(
        [*CLI, "demo", "--nodes", "3", "--short", "--no-live", "--seed", "8", "--store", "postgres"],
        capture_output=True,
        text=True,
        timeout=190,
        env=ENV,
        cwd=ROOT,
    )
    text = out.stdout
    assert out.returncode == 0, text + out.stderr
    assert "couch_jobs store: PostgreSQL at" in text
    per_node = re.search(r"finishes per node: (.*)", text).group(1)
    assert re.search(r"n\d [1-9]", per_node), per_node
    assert "jobs from the _replicator database of the PostgreSQL store" in text
    leases = re.search(
        r"leases \(audit in the store\): (\d+) runs of (\d+) jobs .*overlapping runs of one job: (\d+) "
        r"-- no replication job ran on two nodes at once",
        text,
    )
    assert leases, text
    assert int(leases.group(1)) >= int(leases.group(2)) == 6 and leases.group(3) == "0"
    assert re.search(r"^RESULT: nothing lost -- checked 3 nodes up \(\d+ node kills\)", text, re.M), text


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_node_command_stops_cleanly_when_the_signal_comes_again_and_again(tmp_path, signum):
    """Ctrl-C pressed again and again while the node stops: the first starts the stop, the rest cannot cut it
    short (a node closed halfway keeps its zygote waiting for the rest of the close, forever)."""
    key = str(tmp_path / "cluster.key")
    write_new(key)
    proc, line = _start_node(tmp_path, "n4", key)
    ready = parse_ready(line)
    assert ready is not None
    hosts = _descendants(proc.pid)
    sent = 0
    try:
        for sent in range(1, 3001):  # every 5 ms until it has exited: at most 15 s of signals
            try:
                os.kill(proc.pid, signum)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=0.005)
                break
            except subprocess.TimeoutExpired:
                continue
        out, err = _exited(proc, f"{sent} signals")
    finally:
        _kill_if_running(proc)
    assert sent > 1, "it stopped before a second signal came: nothing tested"
    assert proc.returncode == 0, err
    assert "node n4 stopped" in out
    assert "Traceback" not in err, err
    assert not _gone(hosts), "host processes outlived their node"
    assert not os.path.exists(ready.rundir), "runtime directory left behind"


@pytest.mark.timeout(90)
def test_node_command_started_with_sigint_ignored_keeps_ignoring_it(tmp_path):
    """A shell without job control starts ``otpy node &`` with SIGINT ignored: it stays ignored (the node is
    stopped with SIGTERM), as in every program; the handler that stops the node takes SIGTERM alone."""
    key = str(tmp_path / "cluster.key")
    write_new(key)
    proc = subprocess.Popen(
        [*CLI, "node", "--name", "n5", "--cluster-key", key],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=ROOT,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert proc.stdout is not None
        assert parse_ready(proc.stdout.readline()) is not None
        with open(f"/proc/{proc.pid}/status", encoding="ascii") as fh:
            rows = (line.split(":") for line in fh if line.startswith(("SigIgn", "SigCgt")))
            masks = {k: int(v, 16) for k, v in rows}
        assert masks["SigIgn"] & (1 << (signal.SIGINT - 1)), "SIGINT no longer ignored"
        assert masks["SigCgt"] & (1 << (signal.SIGTERM - 1)), "SIGTERM not handled"
        out, err = _stop_node(proc, signal.SIGTERM)
    finally:
        _kill_if_running(proc)
    assert proc.returncode == 0, err
    assert "node n5 stopped" in out
