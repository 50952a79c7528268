"""What a supervisor tells the world: its log reports, its counters, its recent history.

OTP's supervisors write a report for every child that fails to start, exits,
is restarted or is killed at shutdown, and for their own escalation.  The
same reports here go to the ``supervision`` logger (with the fields as
``extra``, for structured handlers), to the node's stats (the restart and
escalation counters that `otpy status`, the observer and ``/metrics`` read)
and to a short list of recent reports that `Supervisor.status` returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from actors import stats as _stats

__all__ = ["RECENT_REPORTS", "RESTARTS_BY_CHILD", "Reports", "short", "status_snapshot"]

log = logging.getLogger("supervision")

#: How many recent reports and children `Supervisor.status` lists.
RECENT_REPORTS = 20
STATUS_CHILDREN = 200
#: The labelled counter of restarts per (supervisor, child): `actors.stats.Stats.increment_labelled`.
RESTARTS_BY_CHILD = "supervision.child_restarts"


def short(value: Any, limit: int) -> str:
    """``value`` as text of at most ``limit`` characters (and an ellipsis)."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class Reports:
    """One supervisor's reports.

    Written only from the supervisor's own thread; `recent` and `restarts`
    are read from others (the status command), so the list is a tuple
    swapped whole and the counter a plain int.
    """

    def __init__(self) -> None:
        self.restarts = 0
        self.recent: tuple[dict[str, Any], ...] = ()
        self._seq = 0

    def child_counter(self, supervisor: str, child_id: Any) -> None:
        """Create a child's restart counter at 0, so a series exists before its first increment
        (Prometheus' advice: one that appears only then hides its first rise from ``rate()``)."""
        _stats.current().increment_labelled(RESTARTS_BY_CHILD, (supervisor, short(child_id, 80)), 0)

    def report(
        self,
        supervisor: str,
        what: str,
        child_id: Any,
        reason: Any,
        action: str,
        *,
        template_id: Any = None,
        ref: Any = None,
        normal: bool = False,
        level: int = logging.ERROR,
    ) -> None:
        """Log, count and remember one report.

        ``normal``: the reason is a normal exit (a ``child_terminated`` with
        one is logged at INFO).  ``template_id`` names the children of a
        simple_one_for_one, which share their template's id."""
        stats = _stats.current()
        if action == "restarting":
            self.restarts += 1
            stats.increment(f"supervision.restarts.{supervisor}")
            child = child_id if child_id is not None else template_id
            stats.increment_labelled(RESTARTS_BY_CHILD, (supervisor, short(child, 80)))
        if what == "shutdown":
            stats.increment(f"supervision.escalations.{supervisor}")
        if what == "child_terminated" and normal:
            level = logging.INFO
        text = repr(reason)
        if len(text) > 1000:
            text = text[:1000] + "..."
        self._seq += 1
        entry = {
            "seq": self._seq,
            "time": time.time(),
            "supervisor": supervisor,
            "report": what,
            "child": None if child_id is None else short(child_id, 80),
            "reason": text[:200],
            "action": action,
        }
        self.recent = (self.recent + (entry,))[-RECENT_REPORTS:]
        log.log(
            level,
            "supervisor %s: %s child=%r ref=%r reason=%s action=%s",
            supervisor,
            what,
            child_id,
            ref,
            text,
            action,
            extra={"supervisor": supervisor, "report": what, "child_id": child_id, "reason": reason, "action": action},
        )


def status_snapshot(
    flags: Any, children: Sequence[Any], dynamic: bool, restarts: Sequence[float], now: float, reports: Reports
) -> dict[str, Any]:
    """`Supervisor.status`: scalars first (the status command prints those);
    ``detail`` holds each child's spec, state, restarts and last exit reason,
    the restart intensity used in the current period against its limit, and
    the recent reports.  It runs on another thread than the supervisor's, so
    it only copies (lists and tuples swapped whole).  ``dynamic``: the
    children of a simple_one_for_one, which have no ids of their own."""
    used = sum(1 for t in restarts if now - t <= flags.period)
    rows = [
        {
            "id": None if dynamic else short(child.spec.id, 80),
            "actor": getattr(child.ref, "id", None),
            "restart": child.spec.restart,
            "type": child.spec.type,
            "state": child.status,
            "restarts": max(0, child.starts - 1),
            "last_exit": None if child.last_exit is None else short(child.last_exit, 200),
        }
        for child in children[:STATUS_CHILDREN]
    ]
    return {
        "strategy": flags.strategy,
        "children": len(children),
        "restarts": reports.restarts,
        "detail": {
            "intensity": flags.intensity,
            "period": flags.period,
            "used": used,
            "children": rows,
            "reports": list(reports.recent),
        },
    }
