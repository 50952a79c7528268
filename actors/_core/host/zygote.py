"""The node's end of its zygote: the process every host is forked from, and its command pipe.

The node writes commands (``fork``, ``unidle``) down a pipe; closing the pipe
is how the zygote learns the node is gone (it kills its hosts, removes the
runtime directory and exits), so the pipe's write end must stay open exactly
as long as the node.  The zygote itself is `actors._core.host.host.zygote_main`.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import traceback
from typing import Any

from actors._core.host.host import write_message, zygote_main
from actors._core.host.zygote_exec import ExecZygote

__all__ = ["Zygote"]


class ForkedZygote:
    """The zygote forked from this process with a bare ``os.fork``, with the part of a
    ``Process`` the node uses.

    Not through ``multiprocess``: importing it (and with it ``multiprocessing``,
    ``socket``, ``queue``...) in the node would put all of it in every host forked
    from the zygote, which is a copy of this process."""

    def __init__(self, cmd_fd: int, close_fds: list[int], rundir: str, sys_path: list[str]) -> None:
        pid = os.fork()
        if pid == 0:
            try:
                zygote_main(cmd_fd, close_fds, rundir, sys_path)  # ends with os._exit
            except BaseException:  # noqa: BLE001 - the child must never return into the program
                traceback.print_exc()
            finally:
                os._exit(1)
        self.pid = pid
        self._pidfd = os.pidfd_open(pid)
        self._status: int | None = None

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for it to exit, and reap it if it has."""
        if self._status is None and select.select([self._pidfd], [], [], timeout)[0]:
            self._reap()

    def is_alive(self) -> bool:
        if self._status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid:
                self._done(status)
        return self._status is None

    def kill(self) -> None:
        if self._status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def _reap(self) -> None:
        try:
            _pid, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            status = 0
        self._done(status)

    def _done(self, status: int) -> None:
        self._status = status
        os.close(self._pidfd)


class Zygote:
    """A started zygote: its pid, a way to send it a command, and its end."""

    def __init__(self, rundir: str) -> None:
        """Fork the zygote from this process while it runs no other thread; else exec a fresh one
        (`actors._core.host.zygote_exec`).  The caller blocks the stop signals meanwhile."""
        read_fd, write_fd = os.pipe()
        self._fd = write_fd
        try:
            if threading.active_count() == 1:
                self._proc: Any = ForkedZygote(read_fd, [write_fd], rundir, list(sys.path))
            else:
                self._proc = ExecZygote(read_fd, rundir, list(sys.path))
        finally:
            os.close(read_fd)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def send(self, message: Any) -> None:
        """One command down the pipe; `OSError` when the zygote is gone."""
        write_message(self._fd, message)

    def end(self) -> None:
        """Close its command pipe (on EOF it kills its hosts, removes the runtime directory
        and exits); kill it if it has not gone within 5 s."""
        try:
            os.close(self._fd)
        except OSError:
            pass
        self._proc.join(5.0)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(2.0)
