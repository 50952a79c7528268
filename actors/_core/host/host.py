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
import os
import pickle
import select
import shutil
import signal
import struct
import sys
import threading
import time
import traceback
from typing import Any

import cloudpickle

from actors._core.base import config as _config
from actors._core.base import stats as _stats
from actors._core.cell import spawn as _spawn
from actors._core.cell.cell import Cell
from actors._core.cell.gen_server import GenServer  # imported once in the zygote, so forks start warm
from actors._core.host import sched as _sched
from actors._core.host.logs import forward_host_logs
from actors._core.host.malloc import tune_for_big_frames
from actors._core.runtime.runtime import K_SYS, Runtime
from actors._core.runtime.scheduler import tune_host_process
from actors._core.wire import system as sysop
from actors._core.wire.codec import decode_frame, encode_frame
from actors._core.wire.plain import loads_plain

__all__ = ["host_main", "read_message", "write_message", "zygote_main"]

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Any:
    """libc's ``prctl``, looked up once here so a fork does not pay the dlopen."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()


def _die_with_parent() -> None:
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


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
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the node shuts us down (actors._core.node.lifecycle)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})  # blocked by the node at start
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    for entry in sys_path:
        if entry not in sys.path:
            sys.path.append(entry)
    # A zygote forked from the node process starts with the node's counters;
    # every host would then report them again, and `Node.stats` (which sums
    # the processes) would count them once per host.
    _stats.current().reset()
    # Every host is forked from here: their big frames' buffers are reused, not faulted in anew.
    tune_for_big_frames()
    # Everything a host needs is imported at the top of this module, once,
    # so forks start warm.  Hosts are forked with a bare os.fork: what
    # multiprocess's Process adds (its bootstrap, stdin to /dev/null, the
    # after-fork hooks) took ~0.7 ms off every spare's boot.
    # Spares boot at SCHED_IDLE until placed (actors._core.host.sched); one placed
    # while still booting is put back here, as the node does not know its
    # pid yet (and once more by the node when it is up, in case the child
    # had not lowered itself yet when this ran).  The zygote itself stays
    # at the normal priority, so a fresh fork or that request never waits
    # behind a spare's boot.
    normal = _sched.current()
    idle: dict[str, int] = {}  # proc -> pid, spares forked at SCHED_IDLE
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        readable, _, _ = select.select([cmd_fd, *children], [], [], 5.0)
        for fd in readable:
            if fd in children:
                pid = children.pop(fd)
                _reap(pid, fd)
                for proc in [p for p, q in idle.items() if q == pid]:
                    del idle[proc]
        if cmd_fd not in readable:
            continue
        message = read_message(cmd_fd)
        if message is None:
            break
        op, boot = message
        if op == "unidle":
            spare = idle.pop(boot, None)
            if spare is not None:
                _sched.restore(spare, normal)
        elif op == "fork":
            pid = _fork_host(boot, [cmd_fd, *children])
            if boot.get("idle"):
                idle[boot["proc"]] = pid
            try:
                children[os.pidfd_open(pid)] = pid
            except OSError:  # it is gone already
                _reap(pid, None)
    for pid in children.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + 5.0
    for fd, pid in children.items():
        if select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            _reap(pid, fd)
    shutil.rmtree(rundir, ignore_errors=True)
    os._exit(0)


def _fork_host(boot: dict[str, Any], zygote_fds: list[int]) -> int:
    """Fork a host running ``host_main(boot)``; the child never returns here.

    The child closes ``zygote_fds`` (the command pipe, its siblings' pidfds).
    """
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if boot.get("idle"):
                # Lowered by the child itself, while it has one thread: every
                # thread it starts (ZeroMQ's among them) inherits SCHED_IDLE.
                # Lowered from the zygote, threads started before that landed
                # stayed at the normal priority.
                _sched.lower(0)
            for fd in zygote_fds:
                os.close(fd)
            host_main(boot)
            code = 0
        except BaseException:  # noqa: BLE001 - the child must never return into the zygote's loop
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def _reap(pid: int, pidfd: int | None) -> None:
    """Collect an exited child (its pidfd said so; without one, only if it already has)."""
    try:
        os.waitpid(pid, 0 if pidfd is not None else os.WNOHANG)
    except ChildProcessError:
        pass
    if pidfd is not None:
        os.close(pidfd)


def _prefault(rt: Runtime) -> None:
    """Run the first spawn's code once on throwaway data, before the host says it is up.

    A fresh fork shares every page with the zygote; the first write to one
    (a reference count, a cache) copies it.  A spare that walks the spawn
    path ahead of time pays those copies off the path of the restart that
    will use it.
    """
    payload = cloudpickle.dumps(("warmup", GenServer, (), {}, None, None, False))
    _actor_id, cls, args, kwargs, name, parent, link = cloudpickle.loads(payload)
    sysop.decode(
        decode_frame(encode_frame(K_SYS, None, None, 1, rt.proc, sysop.encode(sysop.SpawnHere(rt.proc, 1, payload))))[5]
    )
    Cell(rt, _actor_id, cls(), args, kwargs, name, parent, link, lambda kind, detail: None)  # never started


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
    tune_host_process(_config.current())
    forward_host_logs(boot["rundir"], boot.get("log_level"), boot["proc"])  # records reach the node's logging
    rt = Runtime(boot["node_id"], boot["rundir"], boot["proc"], node_proc=boot["node_proc"])
    if not boot.get("trust_peers", True):  # ``[cluster] trust_peers = false``: plain data from other nodes
        rt.peer_loads = loads_plain
    if boot.get("tcp") is not None:
        rt.transport.enable_tcp(boot["tcp"], endpoint=True)  # frames from other nodes, straight here
    _spawn.install(rt, warm_thread=True)  # the first actor's thread, started off its path
    _prefault(rt)
    halted = threading.Event()

    def halt(src: str, msg: sysop.Halt) -> None:
        halted.set()

    def apply_config(src: str, msg: sysop.ApplyConfig) -> None:
        cfg = _config.current()
        if msg.value is None:
            cfg.delete(msg.section, msg.key)
        else:
            cfg.set(msg.section, msg.key, msg.value)

    exit_when_empty = [bool(boot.get("exit_when_empty"))]

    def configure(src: str, msg: sysop.Configure) -> None:
        """A warm spare learns its role just before its first actor arrives."""
        own, cpus = msg.own, msg.cpus
        exit_when_empty[0] = bool(own)
        if cpus:
            for tid in os.listdir("/proc/self/task"):
                try:
                    os.sched_setaffinity(int(tid), cpus)
                except OSError:
                    pass

    rt.register_sys(sysop.Halt, halt)
    rt.register_sys(sysop.EndIncarnation, lambda src, m: rt.end_incarnation(m.why, m.actors))
    rt.register_sys(sysop.Configure, configure)
    rt.register_sys(sysop.ApplyConfig, apply_config)
    emptied = [False]

    def on_gone(cell: Any) -> None:
        if exit_when_empty[0] and not rt.cells:
            emptied[0] = True
            halted.set()

    rt.on_cell_gone = on_gone
    rt.start()
    rt.sys_send(rt.node_proc, sysop.HostUp(rt.proc, os.getpid()))
    halted.wait()
    if emptied[0]:
        # The node must know this exit is clean before it sees the process
        # go, or it would report the actors here as killed.
        try:
            rt.sys_request(rt.node_proc, sysop.Halting(rt.proc), timeout=2.0)
        except Exception:
            pass
    rt.shutdown(linger=True)
    os._exit(0)
