"""Host processes and the zygote they are forked from.

Forking the node itself is unsafe once it runs threads (the I/O thread, actor
threads), and starting a fresh interpreter costs tens of milliseconds.  So
the node starts one clean, single-threaded *zygote* with the runtime already
imported, and every host process is a fork of it: a host is ready in a few
milliseconds, which is what lets a supervisor restart a SIGKILLed child fast.

Lifetimes are chained so nothing outlives the node, even under SIGKILL: the
zygote exits when its command pipe from the node reaches EOF (the node died or
closed), removing the runtime directory; hosts die with the zygote through
``PR_SET_PDEATHSIG``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import select
import shutil
import signal
import struct
import sys
import threading
import time
from typing import Any

import multiprocess

import actors.gen_server  # noqa: F401  - imported once in the zygote, so forks start warm
from actors import _spawn
from actors import config as _config
from actors._runtime import Runtime
from actors._logging import forward_host_logs

__all__ = ["host_main", "read_message", "write_message", "zygote_main"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def write_message(fd: int, message: Any) -> None:
    data = pickle.dumps(message, protocol=5)
    os.write(fd, struct.pack("!I", len(data)) + data)


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int) -> Any:
    head = _read_exact(fd, 4)
    if head is None:
        return None
    body = _read_exact(fd, struct.unpack("!I", head)[0])
    return None if body is None else pickle.loads(body)


def zygote_main(cmd_fd: int, close_fds: list[int], rundir: str, sys_path: list[str]) -> None:
    """Fork a host for each command; on EOF kill the hosts and remove ``rundir``."""
    # No PDEATHSIG here: when the node dies the zygote must outlive it long
    # enough to kill its hosts and remove the runtime directory (EOF below).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the node shuts us down (actors._lifecycle)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})  # blocked by the node at start
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    for entry in sys_path:
        if entry not in sys.path:
            sys.path.append(entry)
    # Everything a host needs is imported at the top of this module, once,
    # so forks start warm.
    ctx = multiprocess.get_context("fork")
    children: dict[int, Any] = {}
    while True:
        sentinels = {p.sentinel: pid for pid, p in children.items()}
        readable, _, _ = select.select([cmd_fd, *sentinels], [], [], 5.0)
        for fd in readable:
            if fd in sentinels:
                proc = children.pop(sentinels[fd])
                proc.join(0)
        if cmd_fd not in readable:
            continue
        message = read_message(cmd_fd)
        if message is None:
            break
        op, boot = message
        if op == "fork":
            proc = ctx.Process(target=host_main, args=(boot,), name=f"actors-host-{boot['proc']}")
            proc.start()
            children[proc.pid] = proc
    for proc in children.values():
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + 5.0
    for proc in children.values():
        proc.join(max(0.0, deadline - time.monotonic()))
    shutil.rmtree(rundir, ignore_errors=True)
    os._exit(0)


def host_main(boot: dict[str, Any]) -> None:
    """The body of a host process: a runtime that serves actors until halted."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    if os.getppid() != boot["zygote_pid"]:
        os._exit(1)
    if boot.get("cpus"):
        os.sched_setaffinity(0, boot["cpus"])
    _config.set_current(_config.Config(boot["config"]))
    forward_host_logs(boot["rundir"], boot.get("log_level"), boot["proc"])  # records reach the node's logging
    rt = Runtime(boot["node_id"], boot["rundir"], boot["proc"], node_proc=boot["node_proc"])
    _spawn.install(rt)
    halted = threading.Event()

    def halt(src: str = "") -> None:
        halted.set()

    def apply_config(src: str, section: str, key: str, value: str | None) -> None:
        cfg = _config.current()
        if value is None:
            cfg.delete(section, key)
        else:
            cfg.set(section, key, value)

    exit_when_empty = [bool(boot.get("exit_when_empty"))]

    def configure(src: str, own: bool, cpus: list[int] | None) -> None:
        """A warm spare learns its role just before its first actor arrives."""
        exit_when_empty[0] = bool(own)
        if cpus:
            for tid in os.listdir("/proc/self/task"):
                try:
                    os.sched_setaffinity(int(tid), cpus)
                except OSError:
                    pass

    rt.register_sys("halt", halt)
    rt.register_sys("configure", configure)
    rt.register_sys("config", apply_config)
    emptied = [False]

    def on_gone(cell: Any) -> None:
        if exit_when_empty[0] and not rt.cells:
            emptied[0] = True
            halted.set()

    rt.on_cell_gone = on_gone
    rt.start()
    rt.sys_send(rt.node_proc, "host_up", (rt.proc, os.getpid()))
    halted.wait()
    if emptied[0]:
        # The node must know this exit is clean before it sees the process
        # go, or it would report the actors here as killed.
        try:
            rt.sys_request(rt.node_proc, "halting", (rt.proc,), timeout=2.0)
        except Exception:
            pass
    rt.shutdown(linger=True)
    os._exit(0)
