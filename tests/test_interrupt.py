"""`actors.interrupt`: waiting for the stop signal, and steps a second signal must not cut short.

The kernel gives a signal sent to a process to any thread that does not
block it.  The `wait_for_signal` cases run a fresh interpreter whose main
thread waits while another thread takes the signal (``pthread_kill`` to
itself): with a plain ``time.sleep`` the main thread would sleep on, and
these would time out.  `stop_once` and `held` run in fresh interpreters too,
since they change the process's signal handlers.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parent.parent)

_PROGRAM = textwrap.dedent("""
    import signal, sys, threading, time
    from actors.interrupt import catch_sigterm, wait_for_signal
    catch_sigterm()
    signum = int(sys.argv[1])
    started = threading.Event()

    def take_the_signal():
        started.wait()
        signal.pthread_kill(threading.get_ident(), signum)  # given to this thread, not to the main one
        threading.Event().wait()  # stays alive (a daemon): the main thread never sees the signal itself

    threading.Thread(target=take_the_signal, daemon=True).start()
    started.set()
    t = time.monotonic()
    try:
        wait_for_signal()
    except KeyboardInterrupt as exc:
        print(type(exc).__name__, round(time.monotonic() - t, 1), flush=True)
        sys.exit(0)
    print("returned", flush=True)
    sys.exit(1)
""")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PROGRAM, *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum,raised", [(2, "KeyboardInterrupt"), (15, "Interrupted")])
def test_a_signal_taken_by_another_thread_wakes_the_main_thread(signum, raised):
    done = _run(str(signum))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == raised


@pytest.mark.timeout(30)
def test_the_timeout_returns_and_the_wakeup_fd_is_restored():
    program = textwrap.dedent("""
        import signal, time
        from actors.interrupt import wait_for_signal
        t = time.monotonic()
        wait_for_signal(0.05)
        waited = time.monotonic() - t
        assert 0.04 <= waited < 5, waited
        assert signal.set_wakeup_fd(-1) == -1  # nothing left registered
        print("ok")
    """)
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=20,
        cwd=ROOT,
        env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.timeout(10)
def test_only_the_main_thread_may_wait():
    import threading

    from actors.interrupt import wait_for_signal

    errors: list[BaseException] = []

    def other() -> None:
        try:
            wait_for_signal(0.01)
        except RuntimeError as exc:
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join(5)
    assert errors and "main thread" in str(errors[0])


def _program(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(text)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum,raised", [(2, "KeyboardInterrupt"), (15, "Interrupted")])
def test_stop_once_raises_the_first_signal_and_records_the_rest(signum, raised):
    done = _program(f"""
        import os, signal
        from actors.interrupt import catch_sigterm, stop_once
        catch_sigterm()
        with stop_once() as received:
            try:
                os.kill(os.getpid(), {signum})
                print("not raised")
            except KeyboardInterrupt as exc:
                print(type(exc).__name__)
                for _ in range(3):  # Ctrl-C pressed again during the stop: noted, not raised
                    os.kill(os.getpid(), signal.SIGINT)
                    os.kill(os.getpid(), signal.SIGTERM)
                print("stopped")
        print(received)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # on its way out: ignored until it exits
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)
        print("exits")
    """)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == raised and lines[1] == "stopped" and lines[3] == "exits"
    assert eval(lines[2]) == [signum] + [2, 15] * 3


@pytest.mark.timeout(30)
def test_stop_once_without_a_signal_gives_the_handlers_back():
    done = _program("""
        import signal
        from actors.interrupt import catch_sigterm, stop_once
        catch_sigterm()
        before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
        with stop_once():
            pass
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
        print("ok")
    """)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.timeout(30)
def test_held_delivers_each_signal_once_after_the_step():
    done = _program("""
        import os, signal
        from actors.interrupt import catch_sigterm, held
        catch_sigterm()
        steps = []
        try:
            with held():
                for _ in range(3):
                    os.kill(os.getpid(), signal.SIGINT)
                steps.append("finished")
        except KeyboardInterrupt:
            steps.append("interrupted after")
        print(steps)
        with held():
            pass  # nothing came: nothing delivered
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with held():
            os.kill(os.getpid(), signal.SIGTERM)  # ignored before: ignored still
        print("ok")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['finished', 'interrupted after']", "ok"]


@pytest.mark.timeout(30)
def test_stop_once_nested_is_the_outer_one_and_keeps_an_ignored_signal_ignored():
    done = _program("""
        import os, signal
        from actors.interrupt import catch_sigterm, stop_once
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell starts a background command
        with stop_once() as outer:
            catch_sigterm()  # inside stop_once: its handler stays in charge
            with stop_once() as inner:
                assert inner is outer
                os.kill(os.getpid(), signal.SIGINT)  # ignored before: ignored still
                try:
                    os.kill(os.getpid(), signal.SIGTERM)
                    print("not raised")
                except KeyboardInterrupt as exc:
                    print(type(exc).__name__)
                os.kill(os.getpid(), signal.SIGTERM)  # the second: noted
            print(outer)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        print("ok")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Interrupted", "[15, 15]", "ok"]
