"""`actors.interrupt.wait_for_signal`: the main thread wakes whichever thread the signal was given to.

The kernel gives a signal sent to a process to any thread that does not
block it.  Each case here runs a fresh interpreter whose main thread waits
while another thread takes the signal (``pthread_kill`` to itself): with a
plain ``time.sleep`` the main thread would sleep on, and these would time out.
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
    return subprocess.run([sys.executable, "-c", _PROGRAM, *args], capture_output=True, text=True, timeout=30,
                          cwd=ROOT, env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"})


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
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=20, cwd=ROOT,
                          env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"})
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
