"""The arithmetic of ``soak.py``: kills at a time, growth per 1,000 kills, verdicts.

Pure functions over the samples ``soak.py`` collects, so that the numbers a
reader quotes come from code that can be read on its own.  A sample is
``{"t": seconds, "procs": {pid: {"depth", "role", "rss_kb", "threads", "fds": {kind: n}}}}``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["LIMITS", "MIN_KILLS", "net_of_baseline", "growth_rows", "kills_at", "slope", "verdict"]

#: What counts as a leak, per 1,000 kills: fds and threads must stay flat (a
#: bounded cache shows up as a step before the warm-up ends, not a slope),
#: RSS may grow less than 5 MB.  A slope is only called a leak when the
#: process also ends the window holding more than `NET_SLACK` more than it
#: began with, so the sawtooth of hosts dying and coming back is not one.
LIMITS = {"fds": 2.0, "threads": 2.0, "sockets": 2.0, "rss_mb": 5.0}
NET_SLACK = {"fds": 4, "threads": 2, "sockets": 4, "rss_mb": 5.0}
#: Fewer kills in the window than this and a slope says nothing (``--quick``).
MIN_KILLS = 200


def kills_at(progress: Sequence[tuple[float, int]], t: float) -> float:
    """Kills done at time ``t``, interpolated between the run's progress lines."""
    if not progress or t <= progress[0][0]:
        return float(progress[0][1]) if progress and t >= progress[0][0] else 0.0
    for (t0, k0), (t1, k1) in zip(progress, progress[1:]):
        if t0 <= t <= t1:
            return k0 + (k1 - k0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)
    return float(progress[-1][1])


def slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The least-squares slope of ``ys`` over ``xs``; None when xs do not vary."""
    if len(xs) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var


def _metrics(proc: dict[str, Any]) -> dict[str, float]:
    fds = proc["fds"]
    return {
        "rss_mb": proc["rss_kb"] / 1024.0,
        "fds": float(sum(fds.values())),
        "threads": float(proc["threads"]),
        "sockets": float(fds.get("socket", 0)),
        **{f"fd:{kind}": float(n) for kind, n in fds.items()},
    }


def _row(
    label: str, role: str, kills: list[float], minutes: list[float], series: list[dict[str, float]]
) -> dict[str, Any]:
    keys = sorted({k for s in series for k in s})
    per_1k: dict[str, float | None] = {}
    per_min: dict[str, float | None] = {}
    for key in keys:
        ys = [m.get(key, 0.0) for m in series]
        s = slope(kills, ys)
        per_1k[key] = None if s is None else round(s * 1000.0, 2)
        s = slope(minutes, ys)
        per_min[key] = None if s is None else round(s, 3)
    head = series[: max(1, len(series) // 10)]
    tail = series[-max(1, len(series) // 10) :]
    net = {
        key: round(
            statistics.median(m.get(key, 0.0) for m in tail) - statistics.median(m.get(key, 0.0) for m in head), 2
        )
        for key in keys
    }
    start = {key: series[0].get(key, 0.0) for key in ("rss_mb", "fds", "threads", "sockets")}
    end = {key: series[-1].get(key, 0.0) for key in ("rss_mb", "fds", "threads", "sockets")}
    row = {
        "name": label,
        "role": role,
        "kills": round(kills[-1] - kills[0]),
        "minutes": round(minutes[-1] - minutes[0], 2),
        "samples": len(series),
        "per_1k_kills": per_1k,
        "per_minute": per_min,
        "net": net,
        "start": start,
        "end": end,
    }
    row["verdict"] = verdict(row)
    return row


def verdict(row: dict[str, Any]) -> str:
    """``flat``, or what grew: ``leak: fds +12.0/1k`` (see `LIMITS`)."""
    if row["kills"] < MIN_KILLS:
        return f"too few kills to tell (< {MIN_KILLS})"
    bad = []
    for key, limit in LIMITS.items():
        s = row["per_1k_kills"].get(key)
        grew = row["net"].get(key, 0.0) > NET_SLACK[key]
        if key in row.get("net_per_1k", {}):
            s = row["net_per_1k"][key]  # the no-kill run took out what time and the workload add
        if s is not None and s > limit and grew:
            bad.append(f"{key} {s:+.1f}/1k")
    return "leak: " + ", ".join(bad) if bad else "flat"


def growth_rows(
    samples: list[dict[str, Any]], progress: list[tuple[float, int]], warmup: float
) -> list[dict[str, Any]]:
    """One row per process that lived through the whole window (from ``warmup``
    to the last progress line), then ``tree``: the sum over every process of
    the tree, and the number of processes in it."""
    if not progress:
        return []
    end = progress[-1][0]
    window = [s for s in samples if warmup <= s["t"] <= end]
    if len(window) < 3:
        return []
    kills = [kills_at(progress, s["t"]) for s in window]
    minutes = [s["t"] / 60.0 for s in window]
    rows = []
    survivors = set(window[0]["procs"]).intersection(*(s["procs"] for s in window[1:]))
    for pid in sorted(survivors, key=lambda p: (window[0]["procs"][p]["depth"], int(p))):
        role = window[0]["procs"][pid]["role"]
        row = _row(f"{role} {pid}", role, kills, minutes, [_metrics(s["procs"][pid]) for s in window])
        row["pid"] = pid
        rows.append(row)
    totals = []
    for s in window:
        total: dict[str, float] = {"processes": float(len(s["procs"]))}
        for proc in s["procs"].values():
            for key, value in _metrics(proc).items():
                total[key] = total.get(key, 0.0) + value
        totals.append(total)
    rows.append(_row("tree (all processes)", "tree", kills, minutes, totals))
    return rows


def net_of_baseline(rows: list[dict[str, Any]], idle: list[dict[str, Any]], kills_per_minute: float) -> None:
    """Add ``net_per_1k``: a process's growth per 1,000 kills (RSS, fds,
    threads, sockets) less what the same process (same role) grew per
    minute in the run without kills.

    The main job's node also runs the workload, which remembers every write
    it must check at the end and opens new databases as it goes: that
    growth is the same with and without kills, and is not the runtime's.
    Only roles that name one process in both runs (node, zygote, controller,
    ``node n1``) are matched; the verdict then judges by the net figures.
    """

    def unique(rs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        seen: dict[str, list[dict[str, Any]]] = {}
        for r in rs:
            seen.setdefault(r["role"], []).append(r)
        return {role: rr[0] for role, rr in seen.items() if len(rr) == 1 and role != "host"}

    base = unique(idle)
    for role, row in unique(rows).items():
        other = base.get(role)
        if other is None or kills_per_minute <= 0:
            continue
        net: dict[str, float] = {}
        for key in LIMITS:
            killed, quiet = row["per_minute"].get(key), other["per_minute"].get(key)
            if killed is not None and quiet is not None:
                net[key] = round((killed - quiet) / kills_per_minute * 1000.0, 2)
        row["net_per_1k"] = net
        row["verdict"] = verdict(row)
