"""Spare hosts boot at the lowest CPU priority, and get the normal one back when used.

On a machine with few cores the boot of the next warm spare (the fork's
copy-on-write faults, a ZeroMQ context and its threads, the spawn path
walked once) lands in the middle of the restart that used the last one,
and competes with it for the CPU.  A spare booted under ``SCHED_IDLE`` only
runs when nothing else wants the CPU, so it never delays a restart; the
node puts every thread of it back to the normal policy when it places the
spare, before the first actor arrives.

Going back from ``SCHED_IDLE`` needs ``CAP_SYS_NICE`` or an ``RLIMIT_NICE``
that allows nice 0 (sched(7)); where it is not allowed, spares boot at the
normal priority, as they did before.
"""

from __future__ import annotations

import os
import threading

__all__ = ["Priority", "current", "idle_reversible", "lower", "restore"]

Priority = tuple[int, int]  # (policy, static priority) as os.sched_setscheduler takes them


def current() -> Priority:
    """The calling thread's policy and priority: what a placed spare goes back to."""
    return os.sched_getscheduler(0), os.sched_getparam(0).sched_priority


def idle_reversible(normal: Priority) -> bool:
    """Whether a thread of this process may go to ``SCHED_IDLE`` and back to ``normal``.

    Tried on a throwaway thread (Linux applies the policy per thread), so
    the caller's own priority is never at risk.
    """
    if not hasattr(os, "SCHED_IDLE"):
        return False
    result = [False]

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            return
        try:
            os.sched_setscheduler(0, normal[0], os.sched_param(normal[1]))
        except OSError:
            return
        result[0] = True

    thread = threading.Thread(target=probe, name="actors-sched-probe", daemon=True)
    thread.start()
    thread.join()
    return result[0]


def lower(pid: int) -> None:
    """Put a process at ``SCHED_IDLE`` (0: the caller), while it has one thread: the threads it starts inherit it."""
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except OSError:  # it is gone already
        pass


def restore(pid: int, normal: Priority) -> None:
    """Put every thread of process ``pid`` back to ``normal`` (the nice value is kept).

    A thread that ends meanwhile is skipped.  Threads started later by a
    restored thread inherit the normal policy.
    """
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:  # it is gone: its pidfd tells the node
        return
    param = os.sched_param(normal[1])
    for tid in tids:
        try:
            os.sched_setscheduler(int(tid), normal[0], param)
        except OSError:
            pass
