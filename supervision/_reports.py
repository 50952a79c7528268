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

__all__ = [
    "MAX_TRACEBACK",
    "RECENT_REPORTS",
    "REPEAT_WINDOW",
    "RESTARTS_BY_CHILD",
    "Reports",
    "short",
    "status_snapshot",
]

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


#: A report like one logged less than this many seconds ago (same report, child and reason)
#: is counted, not logged: a child in a restart loop gives a line per window, saying how many
#: it stands for, not its traceback hundreds of times a second.
REPEAT_WINDOW = 5.0
#: The most characters of a crash's traceback a report carries (its end: where it was raised).
MAX_TRACEBACK = 4000


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
        # (report, child, reason) -> (when it was last logged, how many like it since, not logged)
        self._logged: dict[tuple[str, str, str], tuple[float, int]] = {}

    def _repeat(self, key: tuple[str, str, str], now: float) -> int | None:
        """None when a report like this one was logged within `REPEAT_WINDOW` (it is
        counted instead); else how many like it were counted since that one."""
        last = self._logged.get(key)
        if last is not None and now - last[0] < REPEAT_WINDOW:
            self._logged[key] = (last[0], last[1] + 1)
            return None
        if len(self._logged) >= 1000:  # many children, each failing once: forget the oldest lines
            self._logged.clear()
        self._logged[key] = (now, 0)
        return 0 if last is None else last[1]

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
        now: float | None = None,
    ) -> None:
        """Log, count and remember one report.

        ``normal``: the reason is a normal exit (a ``child_terminated`` with
        one is logged at INFO).  ``template_id`` names the children of a
        simple_one_for_one, which share their template's id.  ``now`` (the
        supervisor's clock, monotonic seconds) spaces out the lines of a
        restart loop (`REPEAT_WINDOW`).  A crash's report is the one place
        its traceback is logged (the actor, linked to its supervisor, leaves
        it to the supervisor, as OTP's ``report_error``), cut to `MAX_TRACEBACK`."""
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
        shown = child_id if child_id is not None else template_id
        key = (what, short(shown, 80), type(reason).__name__ if hasattr(reason, "traceback") else text[:200])
        repeats = self._repeat(key, time.monotonic() if now is None else now)
        if repeats is None:
            return
        traceback = str(getattr(reason, "traceback", "") or "")
        if len(traceback) > MAX_TRACEBACK:
            traceback = "..." + traceback[-MAX_TRACEBACK:]
        if hasattr(reason, "traceback"):  # a Crash: its type and message here, its traceback below
            text = short(str(reason), 1000)
        log.log(
            level,
            "supervisor %s: %s child=%r ref=%r reason=%s action=%s%s%s",
            supervisor,
            what,
            child_id,
            ref,
            text,
            action,
            f" ({repeats} more like it in the last {REPEAT_WINDOW:g} s or more, not logged one by one)"
            if repeats
            else "",
            ("\n" + traceback.rstrip()) if traceback else "",
            extra={
                "event": "supervisor_report",
                "supervisor": supervisor,
                "report": what,
                "child_id": shown,
                "reason": reason,
                "action": action,
                "repeats": repeats,
            },
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
