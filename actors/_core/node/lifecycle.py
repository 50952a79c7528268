"""How an embedded node ends with its program: at exit, on SIGTERM, and after a crash.

A program that creates a `Node` and never closes it must still exit, and
leave nothing behind: no runtime directory, no socket file, no process.

* **At exit.**  `track` registers the node with one `atexit` hook that
  closes every node still open: the zygote sees its pipe close and exits,
  and the close reaps it.  Nothing may wait for the zygote before that hook
  has run (the zygote waits for the node), so the zygote is not a
  ``multiprocess`` child, whose exit hook joins every child it started.
  For the same reason no signal may cut a close in half: `Node.close` holds SIGINT and
  SIGTERM back until it is done (`actors._core.node.interrupt.held`), and the exit
  hook drops those that come while it runs (the program is ending anyway).
* **On SIGTERM.**  When the program has not chosen what SIGTERM does (the
  handler is ``SIG_DFL``) and the node is created in the main thread, SIGTERM
  becomes ``SystemExit(143)``: ``finally`` blocks and ``with`` statements
  run, then the exit hook closes what is left.  A handler the program
  installed is never replaced; it stays in charge, and the exit hook still
  closes nodes when the program ends.  SIGINT needs nothing of ours: its
  default handler raises `KeyboardInterrupt`, which ends the program through
  the same exit hook.  (Host processes and the zygote ignore both signals, so
  a signal sent to the whole process group reaches the node alone, which
  shuts them down in order.)
* **After a crash.**  A node killed with SIGKILL cannot clean up; its
  zygote removes the runtime directory when it sees the node's pipe close,
  but if both died, the directory stays.  `sweep_stale` removes, when a new
  node starts, every ``otpy-*`` runtime directory in the temp folder that
  belongs to this user and whose ``node.json`` names a process that no
  longer exists.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import signal
import tempfile
import threading
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

from actors._core.node.interrupt import deferred

__all__ = [
    "RUNDIR_PREFIX",
    "SIGTERM_EXIT_STATUS",
    "STOP_SIGNALS",
    "install_sigterm",
    "stop_signals_blocked",
    "sweep_stale",
    "track",
    "untrack",
]

log = logging.getLogger("actors.lifecycle")

#: Private runtime directories are ``<tempdir>/otpy-XXXXXXXX``.
RUNDIR_PREFIX = "otpy-"
#: The shell's status for a process ended by SIGTERM (128 + 15).
SIGTERM_EXIT_STATUS = 128 + signal.SIGTERM


#: Signals the zygote and host processes ignore (the node shuts them down).
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


class _Closable(Protocol):
    def close(self, timeout: float = ...) -> None: ...


_open: "weakref.WeakSet[Any]" = weakref.WeakSet()
_lock = threading.Lock()
_hook_registered = False
_sigterm_installed = False


def track(node: _Closable) -> None:
    """Close ``node`` at interpreter exit unless it was closed before."""
    global _hook_registered
    with _lock:
        _open.add(node)
        if not _hook_registered:
            atexit.register(_close_all)
            _hook_registered = True


def untrack(node: _Closable) -> None:
    with _lock:
        _open.discard(node)


def _close_all() -> None:
    with _lock:
        nodes = list(_open)
    with deferred():  # the program is on its way out: a Ctrl-C now must not leave a node half-closed
        for node in nodes:
            _close_at_exit(node)


def _close_at_exit(node: _Closable) -> None:
    try:
        node.close(timeout=3.0)
    except Exception:  # pragma: no cover - best effort at interpreter exit
        log.exception("closing %r at exit failed", node)


@contextlib.contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """Block SIGINT/SIGTERM in this thread while the zygote starts.

    A child inherits the signal mask across fork and exec, so a signal sent
    to the process group while the zygote is still booting (a fresh
    interpreter takes a while) stays pending in it until it has chosen to
    ignore the signal (`actors._core.host.host.zygote_main`), instead of killing it
    before it could clean up.  Here a signal that arrives meanwhile is
    delivered when the mask is restored.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(SIGTERM_EXIT_STATUS)


def install_sigterm() -> bool:
    """Turn SIGTERM into ``SystemExit(143)`` if nobody chose otherwise; True if installed.

    Only from the main thread (Python allows handlers nowhere else), and
    only over ``SIG_DFL``: a handler the host program installed, or an
    inherited ``SIG_IGN``, is left as it is.
    """
    global _sigterm_installed
    if threading.current_thread() is not threading.main_thread():
        return False
    with _lock:
        current = signal.getsignal(signal.SIGTERM)
        if current is _on_sigterm:
            return True
        if current is not signal.SIG_DFL:
            return False
        signal.signal(signal.SIGTERM, _on_sigterm)
        _sigterm_installed = True
        return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(tmpdir: str | None = None) -> list[str]:
    """Remove runtime directories left by nodes whose process is gone; returns them.

    Only directories named ``otpy-*``, owned by this user, holding a readable
    ``node.json`` whose ``pid`` is not a live process: a directory still
    being set up (no ``node.json`` yet) or a live node's is never touched.
    """
    base = tmpdir or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    uid = os.getuid()
    for entry in entries:
        if not entry.name.startswith(RUNDIR_PREFIX):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            with open(os.path.join(entry.path, "node.json"), encoding="utf-8") as fh:
                pid = int(json.load(fh)["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if pid == os.getpid() or _pid_alive(pid):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    if removed:
        log.info("removed %d stale runtime directories: %s", len(removed), ", ".join(removed))
    return removed
