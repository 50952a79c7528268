"""OTP's shutdown protocol for a supervisor's children: unlink, ask, wait, then kill.

``shutdown`` in a child's spec is ``"brutal_kill"`` (killed at once),
``"infinity"`` (asked with ``shutdown`` and waited for without limit: a
supervisor child's default) or a number of seconds after which a child that
has not exited is killed.  Children stopped together (a simple_one_for_one's,
or the survivors of one_for_all) are all asked first and then waited for
against one deadline, so n children cost one timeout, not n.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from actors import ActorRef, is_normal_exit

__all__ = ["Stopper", "stop_refs"]


class _DownWait(Protocol):
    target: ActorRef

    def wait(self, timeout: float | None) -> tuple[Any, Any]: ...


class Stopper(Protocol):
    """What the protocol needs of the supervisor that runs it."""

    def monitor_wait(self, ref: ActorRef) -> Any: ...

    def unlink(self, ref: ActorRef) -> None: ...

    def exit(self, ref: ActorRef, reason: Any) -> None: ...

    def _report(self, what: str, child_id: Any, reason: Any, action: str, ref: Any = None) -> None: ...


def _limit(shutdown: Any) -> float | None:
    if shutdown in ("brutal_kill", "infinity"):
        return None
    return float(shutdown)


def stop_refs(sup: Stopper, refs: list[ActorRef], shutdown: Any, child_id: Any) -> None:
    """Stop ``refs`` (children of ``sup``) and wait until each is gone, reporting any
    that had to be killed or exited with another reason than the one asked."""
    monitors: list[_DownWait] = []
    for ref in refs:
        monitors.append(sup.monitor_wait(ref))
        sup.unlink(ref)
        sup.exit(ref, "kill" if shutdown == "brutal_kill" else "shutdown")
    limit = _limit(shutdown)
    deadline = None if limit is None else time.monotonic() + limit
    expected = "killed" if shutdown == "brutal_kill" else "shutdown"
    for mon in monitors:
        try:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            _, reason = mon.wait(remaining)
        except TimeoutError:
            sup.exit(mon.target, "kill")
            mon.wait(None)
            sup._report("shutdown_error", child_id, "killed", "killed after shutdown timeout", ref=mon.target)
            continue
        if reason not in (expected, "noproc") and not is_normal_exit(reason):
            sup._report("shutdown_error", child_id, reason, "exited with another reason", ref=mon.target)
