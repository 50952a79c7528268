"""The node's end of its zygote: the process every host is forked from, and its command pipe.

The node writes commands (``fork``, ``unidle``) down a pipe; closing the pipe
is how the zygote learns the node is gone (it kills its hosts, removes the
runtime directory and exits), so the pipe's write end must stay open exactly
as long as the node.  The zygote itself is `actors._core.host.host.zygote_main`.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import multiprocess

from actors._core.host.host import write_message, zygote_main
from actors._core.host.zygote_exec import ExecZygote

__all__ = ["Zygote"]


class Zygote:
    """A started zygote: its pid, a way to send it a command, and its end."""

    def __init__(self, rundir: str) -> None:
        """Fork the zygote from this process while it runs no other thread; else exec a fresh one
        (`actors._core.host.zygote_exec`).  The caller blocks the stop signals meanwhile."""
        read_fd, write_fd = os.pipe()
        self._fd = write_fd
        try:
            if threading.active_count() == 1:
                ctx = multiprocess.get_context("fork")
                self._proc: Any = ctx.Process(
                    target=zygote_main,
                    args=(read_fd, [write_fd], rundir, list(sys.path)),
                    name="actors-zygote",
                    daemon=False,
                )
                self._proc.start()
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
