"""A compaction's worker OS process, as smoosh's channel sees it (`CompactionJob`).

The VACUUM runs in its own process (`_worker.py`) so that smoosh can
suspend it (SIGSTOP), resume it (SIGCONT) and kill it outright, and so that
a compaction never holds the GIL of the node's process; the worker dies
with its parent.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Hashable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["WorkerJob"]

_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker.py")
_READY_TIMEOUT = 30.0


class _Launcher:
    """One long-lived thread per process that starts every worker.

    A worker's ``PR_SET_PDEATHSIG`` fires when the *thread* that forked it
    exits; starting workers from this thread, which lives as long as the
    process, ties them to the process rather than to whichever actor thread
    asked.  Recreated after a fork.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = -1
        self._executor: ThreadPoolExecutor | None = None

    def popen(self, argv: list[str], **kwargs: object) -> subprocess.Popen:
        with self._lock:
            if self._pid != os.getpid() or self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="smoosh-launcher")
                self._pid = os.getpid()
            executor = self._executor
        return executor.submit(subprocess.Popen, argv, **kwargs).result(timeout=_READY_TIMEOUT)  # type: ignore[arg-type]  # Popen is generic over its output type; kwargs pass through


_launcher = _Launcher()


class WorkerJob:
    """A worker OS process running one job."""

    def __init__(self, key: Hashable, argv: list[str]) -> None:
        self.key = key
        read_fd, self._write_fd = os.pipe()
        try:
            self._proc = _launcher.popen(
                [sys.executable, _WORKER, str(os.getpid()), str(read_fd), *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(read_fd,),
                close_fds=True,
                # Own process group: a terminal's ^C does not reach it, and
                # when the parent dies while the worker is stopped the group
                # is orphaned, so the kernel sends it SIGHUP and SIGCONT.
                process_group=0,
            )
        except BaseException:
            os.close(self._write_fd)
            raise
        finally:
            os.close(read_fd)
        self.pid = self._proc.pid
        self._lock = threading.Lock()
        self._stderr = ""
        self._ready = False

    def _await_ready(self) -> None:
        """Wait (bounded) until the worker has armed its parent-death checks."""
        if self._ready or self._proc.stdout is None:
            return
        fd = self._proc.stdout.fileno()
        line = b""
        for _ in range(64):
            readable, _, _ = select.select([fd], [], [], _READY_TIMEOUT)
            if not readable:
                raise TimeoutError(f"compaction worker {self.pid} did not start within {_READY_TIMEOUT} s")
            chunk = os.read(fd, 64)
            line += chunk
            if not chunk or b"\n" in line:
                break
        self._ready = True

    def is_alive(self) -> bool:
        return self._proc.poll() is None

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._finish()
        return self._proc.returncode

    def _finish(self) -> None:
        with self._lock:
            if self._write_fd >= 0:
                os.close(self._write_fd)
                self._write_fd = -1
            if self._proc.stdout is not None:
                self._proc.stdout.close()
                self._proc.stdout = None
            if self._proc.stderr is not None:
                self._stderr = self._proc.stderr.read().decode("utf-8", "replace").strip()
                self._proc.stderr.close()
                self._proc.stderr = None

    def exit_reason(self) -> str | None:
        code = self._proc.poll()
        if code is None:
            return None
        self._finish()
        if code == 0:
            return "normal"
        if code < 0:
            return f"killed by signal {-code}"
        return f"exit status {code}: {self._stderr}" if self._stderr else f"exit status {code}"

    def _signal(self, signum: int) -> None:
        if self._proc.poll() is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def suspend(self) -> None:
        with self._lock:
            if self._proc.poll() is None:
                self._await_ready()
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        self._signal(signal.SIGCONT)

    def __repr__(self) -> str:
        return f"WorkerJob(key={self.key!r}, pid={self.pid}, alive={self.is_alive()})"
