"""Per-actor counts on the message path, summed per actor class on demand.

Each cell owns a `Meter` that only its own actor thread writes: a call
bumps two integers, adds its duration and one histogram bucket; a cast
bumps one integer.  No lock and no shared object is touched on the message
path, so two actors of one class in one process never contend and never
lose a count to a racing ``+=``.

`Meters` (one per process) sums the live cells' meters per class when
someone reads (`snapshot`), and folds a cell's meter into per-class totals
when the cell dies (`retire`), under one lock taken by both: a reader never
sees a dead actor's counts leave the sum before they reach the totals, so
per-class counters only ever grow for the life of the process.
"""

from __future__ import annotations

import threading
from typing import Any

from actors._core.wire.reasons import Crash

__all__ = ["CALL_BOUNDS", "EXIT_KINDS", "Meter", "Meters", "exit_kind"]

#: Upper bounds (seconds) of the call-duration histogram's buckets; one more
#: bucket above the last holds the rest (Prometheus' ``+Inf``).
CALL_BOUNDS: tuple[float, ...] = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
_NBUCKETS = len(CALL_BOUNDS) + 1

#: What an exit reason is counted as: a small fixed set, so a label built
#: from it never grows with the reasons' text.
EXIT_KINDS = ("normal", "shutdown", "killed", "noproc", "noconnection", "crash", "other")


def exit_kind(reason: Any) -> str:
    """The `EXIT_KINDS` entry of an exit reason (``("shutdown", term)`` is ``shutdown``;
    a `actors.Crash`, any exception a callback raised, is ``crash``)."""
    if isinstance(reason, str):
        return reason if reason in ("normal", "shutdown", "killed", "noproc", "noconnection") else "other"
    if isinstance(reason, tuple) and len(reason) == 2 and reason[0] == "shutdown":
        return "shutdown"
    if isinstance(reason, Crash):
        return "crash"
    return "other"


class Meter:
    """One actor's counts; written by its actor thread only."""

    __slots__ = ("calls", "casts", "call_seconds", "buckets")

    def __init__(self) -> None:
        self.calls = 0
        self.casts = 0
        self.call_seconds = 0.0
        #: Calls answered per duration bucket (not cumulative; see `CALL_BOUNDS`).
        self.buckets = [0] * _NBUCKETS


def _zero() -> dict[str, Any]:
    return {
        "actors": 0,
        "mailbox": 0,
        "handled": 0,
        "calls": 0,
        "casts": 0,
        "dropped": 0,
        "call_seconds": 0.0,
        "call_buckets": [0] * _NBUCKETS,
    }


def _add(into: dict[str, Any], meter: Meter, handled: int, dropped: int) -> None:
    into["handled"] += handled
    into["dropped"] += dropped
    into["calls"] += meter.calls
    into["casts"] += meter.casts
    into["call_seconds"] += meter.call_seconds
    buckets = into["call_buckets"]
    for i, n in enumerate(meter.buckets):
        buckets[i] += n


def _dropped(cell: Any) -> int:
    """What a cell's bounded mailbox dropped or refused (`actors._core.runtime.mailbox`; 0 unbounded)."""
    return getattr(cell.inbox, "dropped", 0)


class Meters:
    """This process's per-class sums: live cells read at `snapshot`, dead ones folded at `retire`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._retired: dict[str, dict[str, Any]] = {}
        self._exits: dict[str, dict[str, int]] = {}

    def retire(self, cells: dict[str, Any], cell: Any, reason: Any = None, exited: bool = True) -> None:
        """Take ``cell`` out of ``cells`` and keep its counts (and, when it had
        started, its exit under ``exit_kind(reason)``)."""
        cls = type(cell.server).__name__
        with self._lock:
            if cells.pop(cell.id, None) is None:
                return  # retired already: count it once
            totals = self._retired.get(cls)
            if totals is None:
                totals = self._retired[cls] = _zero()
            _add(totals, cell.meter, cell.messages_handled, _dropped(cell))
            if exited:
                by_kind = self._exits.setdefault(cls, {})
                kind = exit_kind(reason)
                by_kind[kind] = by_kind.get(kind, 0) + 1

    def snapshot(self, cells: dict[str, Any]) -> dict[str, Any]:
        """Plain data: ``{"call_bounds": [...], "classes": {class: sums}, "exits": {class: {kind: n}}}``;
        ``actors`` and ``mailbox`` count the live actors only, the rest since the process began."""
        with self._lock:
            classes = {cls: {**sums, "call_buckets": list(sums["call_buckets"])} for cls, sums in self._retired.items()}
            for cls in classes:
                classes[cls]["actors"] = classes[cls]["mailbox"] = 0
            for cell in list(cells.values()):
                cls = type(cell.server).__name__
                sums = classes.get(cls)
                if sums is None:
                    sums = classes[cls] = _zero()
                sums["actors"] += 1
                sums["mailbox"] += cell.inbox.qsize()
                _add(sums, cell.meter, cell.messages_handled, _dropped(cell))
            exits = {cls: dict(kinds) for cls, kinds in self._exits.items()}
        return {"call_bounds": list(CALL_BOUNDS), "classes": classes, "exits": exits}
