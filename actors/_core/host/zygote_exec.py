"""The zygote started as a fresh interpreter, for a node created while other threads run.

Forking a process that runs threads is unsafe (a lock another thread held
stays held in the child), so then the zygote is not forked from the program
but started with ``exec``.  Not through ``multiprocess``'s *spawn*: it runs
the program's main script again in the child (to find what the target
pickled from ``__main__``), and a script without the ``if __name__ ==
"__main__"`` guard would create its node again there, fail, and leave the
node waiting for hosts that never come.  The zygote needs nothing of the
program's: only ``actors._core.host.host.zygote_main`` and the program's ``sys.path``.
"""

from __future__ import annotations

import json
import subprocess
import sys

__all__ = ["ExecZygote"]

_BOOT = (
    "import json, sys; sys.path[:0] = [p for p in json.loads(sys.argv[3]) if p not in sys.path]; "
    "from actors._core.host.host import zygote_main; zygote_main(int(sys.argv[1]), [], sys.argv[2], [])"
)


class ExecZygote:
    """The zygote process, with the part of ``multiprocess.Process`` the node uses."""

    def __init__(self, cmd_fd: int, rundir: str, sys_path: list[str]) -> None:
        # subprocess's private helper is the one multiprocessing's spawn uses for the same job (-X, -W flags).
        flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
        argv = [sys.executable, *flags, "-c", _BOOT, str(cmd_fd), rundir, json.dumps(sys_path)]
        # The signal mask is inherited across exec: SIGINT/SIGTERM blocked by
        # the node meanwhile stay pending until zygote_main ignores them.
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, pass_fds=[cmd_fd], close_fds=True)
        self.pid = self._proc.pid

    def join(self, timeout: float | None = None) -> None:
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def is_alive(self) -> bool:
        return self._proc.poll() is None

    def kill(self) -> None:
        try:
            self._proc.kill()
        except OSError:
            pass
