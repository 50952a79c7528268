"""An embedded node ends with its program: at exit, on SIGTERM/SIGINT, and after a crash.

Each scenario is a real child program in its own process group, as a user
would run it; the child prints its runtime directory and, where it must
wait for a signal, blocks on stdin, so the test synchronises on its output.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors._core.node import lifecycle as _lifecycle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = """
import sys
from actors import GenServer, Node

class Echo(GenServer):
    def handle_call(self, request, from_):
        return request

{before}
node = Node()
node.spawn(Echo, host="own")
node.spawn(Echo)
print(node.rundir, flush=True)
{after}
"""


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory short enough to hold a node's runtime directory:
    a unix socket's path has room for 107 bytes, and pytest's own temporary
    paths (longer still under a parallel run's per-worker directory) leave
    too little of it."""
    path = tempfile.mkdtemp(prefix="lc-", dir="/tmp")
    try:
        yield Path(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _start(before: str = "", after: str = "", tmpdir: str | None = None) -> tuple[subprocess.Popen[str], str]:
    code = textwrap.dedent(PROGRAM).format(before=before, after=after)
    env = dict(os.environ, PYTHONPATH=ROOT, **({"TMPDIR": tmpdir} if tmpdir else {}))
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert proc.stdout is not None
    rundir = proc.stdout.readline().strip()
    assert rundir, proc.communicate(timeout=20)
    return proc, rundir


def _finish(proc: subprocess.Popen[str], text: str = "") -> tuple[str, str]:
    """Feed stdin, wait, and read the rest of the output (through the same buffers as readline)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(text)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    proc.wait(timeout=30)
    return proc.stdout.read(), proc.stderr.read()


def _group_gone(pgid: int, seconds: float = 10.0) -> bool:
    """True once no process of the group is left (bounded poll)."""
    pause = threading.Event()
    for _ in range(int(seconds / 0.05)):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        pause.wait(0.05)
    return False


def test_unclosed_node_lets_the_program_end() -> None:
    proc, rundir = _start(after="print('end', flush=True)")
    out, err = _finish(proc)
    assert proc.returncode == 0, err
    assert out.strip() == "end"
    assert not os.path.exists(rundir)
    assert _group_gone(proc.pid)


def test_uncaught_exception_with_open_node_exits() -> None:
    proc, rundir = _start(after="raise RuntimeError('boom')")
    _out, err = _finish(proc)
    assert proc.returncode == 1
    assert "RuntimeError: boom" in err
    assert not os.path.exists(rundir)
    assert _group_gone(proc.pid)


def _signal_the_group(sig: int) -> tuple[subprocess.Popen[str], str, str]:
    """A program with an open node, sent ``sig`` to its whole process group
    once the node is up: the finished process, its rundir and its stderr."""
    proc, rundir = _start(after="sys.stdin.read()")
    assert os.path.exists(os.path.join(rundir, "node.json"))
    os.killpg(proc.pid, sig)
    _out, err = _finish(proc)
    return proc, rundir, err


def test_sigterm_to_the_process_group_cleans_up() -> None:
    proc, rundir, err = _signal_the_group(signal.SIGTERM)
    assert proc.returncode == 143, err
    assert not os.path.exists(rundir), os.listdir(rundir)
    assert _group_gone(proc.pid)


def test_sigint_to_the_process_group_cleans_up() -> None:
    proc, rundir, err = _signal_the_group(signal.SIGINT)
    assert proc.returncode in (130, -signal.SIGINT), err
    assert "KeyboardInterrupt" in err
    assert not os.path.exists(rundir)
    assert _group_gone(proc.pid)


def test_a_handler_the_program_installed_is_kept() -> None:
    # The child waits for the signal on a wakeup fd, not in a blocking read:
    # a signal that lands after the interpreter's last check for one but
    # before the read blocks would leave the handler waiting for the read to
    # return (CPython runs Python handlers between bytecodes only).
    before = textwrap.dedent("""
        import os, select, signal
        def mine(signum, frame):
            print("mine", flush=True)
        signal.signal(signal.SIGTERM, mine)
        woken, wake = os.pipe()
        os.set_blocking(wake, False)
        signal.set_wakeup_fd(wake)
    """)
    after = textwrap.dedent("""
        assert signal.getsignal(signal.SIGTERM) is mine
        select.select([woken], [], [], 30.0)
        sys.stdin.readline()
        print("after", flush=True)
    """)
    proc, rundir = _start(before=before, after=after)
    assert proc.stdout is not None
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.stdout.readline().strip() == "mine"  # the program's handler ran; the node is still open
    assert os.path.exists(os.path.join(rundir, "node.json"))
    out, err = _finish(proc, "go\n")
    assert proc.returncode == 0, err
    assert out.strip() == "after"
    assert not os.path.exists(rundir)


def test_sigterm_handler_only_from_the_main_thread() -> None:
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(_lifecycle.install_sigterm()))
    t.start()
    t.join(5)
    assert result == [False]


def test_sweep_removes_only_directories_of_dead_owners(tmp_path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    dead_pid = int(dead.stdout)

    def make(name: str, pid: int | None) -> str:
        path = tmp_path / name
        path.mkdir()
        (path / "n.sock").write_text("")
        if pid is not None:
            (path / "node.json").write_text(json.dumps({"pid": pid}))
        return str(path)

    stale = make("otpy-stale", dead_pid)
    live = make("otpy-live", os.getppid())
    fresh = make("otpy-fresh", None)  # being set up: no node.json yet
    other = make("other-stale", dead_pid)  # not a runtime directory
    corrupt = make("otpy-corrupt", None)
    (tmp_path / "otpy-corrupt" / "node.json").write_text("{not json")
    assert _lifecycle.sweep_stale(str(tmp_path)) == [stale]
    assert not os.path.exists(stale)
    for kept in (live, fresh, other, corrupt):
        assert os.path.exists(kept)


def test_new_node_sweeps_a_sigkilled_nodes_directory(short_tmp: Path) -> None:
    tmp_path = short_tmp
    # SIGKILL the node and its zygote together: nothing of theirs can clean up.
    # A private TMPDIR keeps other programs' new nodes from sweeping it first.
    proc, rundir = _start(after="sys.stdin.read()", tmpdir=str(tmp_path))
    assert rundir.startswith(str(tmp_path))
    os.killpg(proc.pid, signal.SIGKILL)
    _finish(proc)
    assert _group_gone(proc.pid)
    assert os.path.exists(os.path.join(rundir, "node.json"))
    new = subprocess.run(
        [sys.executable, "-c", "from actors import Node; Node().close()"],
        timeout=30,
        env=dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path)),
        capture_output=True,
        text=True,
    )
    assert new.returncode == 0, new.stderr
    assert not os.path.exists(rundir)


def test_sigterm_without_our_handler_still_removes_the_directory() -> None:
    # Node created off the main thread: no handler is installed, SIGTERM kills
    # the program outright; the zygote (which ignores SIGTERM) sees the
    # node's pipe close and removes the runtime directory.
    code = textwrap.dedent("""
        import sys, threading
        from actors import GenServer, Node
        class Echo(GenServer):
            def handle_call(self, request, from_):
                return request
        box = []
        t = threading.Thread(target=lambda: box.append(Node()))
        t.start(); t.join()
        # A host process exists only once the zygote has booted (and ignores SIGTERM).
        assert box[0].spawn(Echo, host="own").call("up") == "up"
        print(box[0].rundir, flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
        start_new_session=True,
    )
    assert proc.stdout is not None
    rundir = proc.stdout.readline().strip()
    assert os.path.exists(os.path.join(rundir, "node.json"))
    os.killpg(proc.pid, signal.SIGTERM)
    _finish(proc)
    assert proc.returncode == -signal.SIGTERM
    assert _group_gone(proc.pid)
    assert not os.path.exists(rundir)


def test_no_thread_of_ours_holds_the_interpreter() -> None:
    from actors import Node
    from tests.kernel.probes import Echo

    before = set(threading.enumerate())
    with Node() as node:
        node.spawn(Echo)
        node.spawn(Echo, host="own").call("seen")
        ours = [t for t in threading.enumerate() if t not in before]
        assert ours, "a node runs threads of its own"
        assert [t.name for t in ours if not t.daemon] == []


_CTRL_C_DURING_CLOSE = """
import os, signal, sys
from actors import GenServer, Node

class CtrlCWhenStopped(GenServer):
    # Its terminate runs inside node.close(): Ctrl-C pressed while the node closes.
    def init(self, pid):
        self.pid = pid

    def terminate(self, reason):
        os.kill(self.pid, signal.SIGINT)

node = Node()
node.spawn(CtrlCWhenStopped, os.getpid(), host="own")
print(node.rundir, flush=True)
steps = []
try:
    node.{close}
    steps.append("closed")
    sys.stdin.read()
except KeyboardInterrupt:
    steps.append("interrupted, rundir left: %s" % os.path.exists(node.rundir))
print(steps, flush=True)
"""


@pytest.mark.parametrize("close", ["close()", "spawn(CtrlCWhenStopped, os.getpid()); raise SystemExit(3)"])
def test_ctrl_c_during_close_comes_after_it(close: str) -> None:
    """A close cut in half would leave host processes and the zygote behind: SIGINT waits until it is done.

    Explicit ``close()``: the interrupt is raised out of it once the node is closed.  At exit (the program ends with
    the node open): the close runs to its end and the status is the program's own."""
    code = _CTRL_C_DURING_CLOSE.replace("{close}", close)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
        start_new_session=True,
    )
    assert proc.stdout is not None
    try:
        rundir = proc.stdout.readline().strip()
        out, err = _finish(proc)
    finally:
        if proc.poll() is None:  # a close cut in half hangs at exit: end the whole group this test started
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    if close == "close()":
        assert proc.returncode == 0, err
        assert out.strip() == "['interrupted, rundir left: False']", err
    else:
        assert proc.returncode == 3, err
        assert "KeyboardInterrupt" not in err, err
    assert rundir and not os.path.exists(rundir)
    assert _group_gone(proc.pid)


_SCRIPT_WITH_A_THREAD = """
import os, sys, threading
from actors import GenServer, Node

class Echo(GenServer):
    def handle_call(self, request, from_):
        return request

threading.Thread(target=threading.Event().wait, daemon=True).start()  # forking is unsafe from here on
node = Node()
print(node.rundir, flush=True)
print(node.spawn(Echo, host="own").call("answered", timeout=30), flush=True)
sys.stdin.read()
"""


def _run_script(tmp_path, text: str) -> subprocess.Popen[str]:
    """``python prog.py``: a script, not ``-c``, so ``__main__`` has a file a spawned child could re-run."""
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(text))
    return subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
        cwd=str(tmp_path),
        start_new_session=True,
    )


@pytest.mark.timeout(60)
def test_a_script_without_main_guard_creates_a_node_while_threads_run(tmp_path) -> None:
    """The zygote is then a fresh interpreter: it must not run the script again (which would create a second
    node in it, and leave this one waiting for hosts until it gives up)."""
    proc = _run_script(tmp_path, _SCRIPT_WITH_A_THREAD)
    try:
        assert proc.stdout is not None
        rundir = proc.stdout.readline().strip()
        answer = proc.stdout.readline().strip()
        out, err = _finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert answer == "answered", err
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    assert not os.path.exists(rundir)
    assert _group_gone(proc.pid)


@pytest.mark.timeout(60)
def test_sigterm_to_the_group_while_a_fresh_zygote_boots_cleans_up(tmp_path) -> None:
    """Sent as soon as the node exists: the zygote (a fresh interpreter, still importing) inherits the
    signals blocked, so it does not die before it can clean up."""
    proc = _run_script(tmp_path, _SCRIPT_WITH_A_THREAD)
    try:
        assert proc.stdout is not None
        rundir = proc.stdout.readline().strip()
        os.killpg(proc.pid, signal.SIGTERM)
        _out, err = _finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == 143, err
    assert rundir and not os.path.exists(rundir)
    assert _group_gone(proc.pid)


def _run_to_end(code: str, tmp_path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in its own session; kill its group if it is still there after (a hang)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(tmp_path),
        start_new_session=True,
        env=dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path)),
    )
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)
    assert _group_gone(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_rundir_too_long_for_its_sockets_is_refused_before_anything_starts(tmp_path) -> None:
    rundir = str(tmp_path / ("r" * 80))
    done = _run_to_end(
        f"""
        from actors import Node
        try:
            Node(rundir={rundir!r})
        except ValueError as exc:
            print(exc)
    """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "bytes long" in done.stdout and "shorter" in done.stdout
    assert not os.path.exists(rundir)


def test_a_node_whose_start_fails_after_the_zygote_leaves_nothing_behind(short_tmp: Path) -> None:
    """The zygote is up when the node's own sockets are bound: a failure there must not
    leave it waiting on its command pipe (the program would hang at exit)."""
    done = _run_to_end(
        """
        import os
        from actors._core.host import logs as _logging
        from actors._core.node import node as node_module
        from actors import Node

        class Refused(_logging.LogListener):
            def __init__(self, rundir):
                raise OSError("no socket for you")

        node_module.LogListener = Refused
        try:
            Node()
        except OSError as exc:
            print("refused:", exc, flush=True)
        print("end", flush=True)
    """,
        short_tmp,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["refused: no socket for you", "end"]
    assert "Traceback" not in done.stderr, done.stderr
    assert [p for p in os.listdir(short_tmp) if p.startswith("otpy-")] == []


_RUN_FOREVER = """
import os, signal, sys
import actors
from actors import GenServer, Node

class SignalWhenStopped(GenServer):
    # Its terminate runs inside the close that run_forever starts: a second signal meanwhile.
    def init(self, pid, signum):
        self.pid, self.signum = pid, signum

    def handle_call(self, request, from_):
        return request

    def terminate(self, reason):
        if self.signum:
            os.kill(self.pid, self.signum)

node = Node()
echo = node.spawn(SignalWhenStopped, os.getpid(), {again}, host="own")
assert echo.call("up") == "up"
status = actors.run_forever(node, on_ready=lambda: print(node.rundir, flush=True), timeout={timeout})
print("status", status, flush=True)
sys.exit(status)
"""


@pytest.mark.parametrize("again", [0, signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_run_forever_serves_until_a_signal_then_closes_the_node(signum: int, status: int, again: int) -> None:
    code = _RUN_FOREVER.replace("{again}", str(int(again))).replace("{timeout}", "None")
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        rundir = proc.stdout.readline().strip()
        assert rundir, proc.stderr.read()
        assert os.path.exists(os.path.join(rundir, "node.json"))  # ready: the node serves
        os.kill(proc.pid, signum)
        proc.wait(timeout=30)
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == status, err
    assert out.strip() == f"status {status}", err  # the second signal (if any) changed nothing
    assert "Traceback" not in err, err
    assert not os.path.exists(rundir)
    assert _group_gone(proc.pid)


@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_run_forever_given_a_signal_during_the_close_after_its_timeout(signum: int, status: int) -> None:
    """The wait ended by its timeout, the close is under way, and the first signal comes: the close
    still runs to its end, and the status is the signal's."""
    code = _RUN_FOREVER.replace("{again}", str(int(signum))).replace("{timeout}", "0.05")
    done = subprocess.run(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=60,
    )
    rundir, *rest = done.stdout.splitlines()
    assert done.returncode == status, done.stderr
    assert rest == [f"status {status}"], done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert not os.path.exists(rundir)


def test_run_forever_with_a_timeout_closes_the_node_and_returns_0() -> None:
    import actors

    node = actors.Node()
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert actors.run_forever(node, timeout=0.05) == 0
    assert not os.path.exists(node.rundir)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before  # no signal came


def test_run_forever_only_in_the_main_thread() -> None:
    import actors

    class Never:
        def close(self) -> None:
            raise AssertionError("closed")

    errors: list[BaseException] = []

    def run() -> None:
        try:
            actors.run_forever(Never())
        except RuntimeError as exc:
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join(5)
    assert len(errors) == 1 and "main thread" in str(errors[0])
