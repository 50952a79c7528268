"""The page's picture of a node, built from snapshots (pure: data in, data out).

`tree_rows` lays the actors out as the supervision tree: a supervisor's
children in its own order, each row keyed by the supervisor's key and the
child's id, so a restarted child (a new actor, a new id) stays on the same
row and its restart count is seen to go up.  `host_rows` groups actors by
OS process.  `History` keeps the last minutes of restart and message
rates, and `ReportLog` the supervisors' recent reports, merged and
de-duplicated across polls.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable

__all__ = ["History", "ReportLog", "host_rows", "message_delta", "tree_rows"]


def _detail(entry: dict[str, Any]) -> dict[str, Any] | None:
    status = entry.get("status")
    if isinstance(status, dict) and isinstance(status.get("detail"), dict):
        return status["detail"]
    return None


def _id_key(actor_id: str) -> tuple[str, int]:
    proc, _, num = actor_id.partition(".")
    return (proc, int(num) if num.isdigit() else 0)


def _actor_fields(entry: dict[str, Any], rates: dict[str, float]) -> dict[str, Any]:
    detail = _detail(entry)
    status = entry.get("status") if isinstance(entry.get("status"), dict) else {}
    row: dict[str, Any] = {
        "actor": entry["id"],
        "class": entry.get("class"),
        "host": entry.get("host"),
        "proc": entry.get("proc"),
        "pid": entry.get("pid"),
        "mailbox": entry.get("mailbox", 0),
        "mailbox_limit": entry.get("mailbox_limit"),
        "overflow": entry.get("overflow"),
        "dropped": entry.get("dropped", 0),
        "rate": round(rates.get(entry["id"], 0.0), 1),
        "registered": entry.get("registered"),
    }
    if detail is not None:
        row.update(
            supervisor=True,
            strategy=status.get("strategy"),
            used=detail.get("used", 0),
            intensity=detail.get("intensity"),
            period=detail.get("period"),
        )
    return row


def tree_rows(actors: list[dict[str, Any]], rates: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Rows in display order, each with ``key``, ``depth`` and what the tree shows of it."""
    rates = rates or {}
    by_id = {a["id"]: a for a in actors}
    kids: dict[str | None, list[dict[str, Any]]] = {}
    for entry in actors:
        parent = entry.get("parent")
        kids.setdefault(parent if parent in by_id else None, []).append(entry)
    for group in kids.values():
        group.sort(key=lambda e: _id_key(e["id"]))
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(entry: dict[str, Any] | None, key: str, depth: int, spec: dict[str, Any] | None) -> None:
        row: dict[str, Any] = {"key": key, "depth": depth, "supervisor": False}
        if entry is not None:
            row.update(_actor_fields(entry, rates))
            row["state"] = "running"
            seen.add(entry["id"])
        if spec is not None:
            row.update(
                spec_id=spec.get("id"),
                restart=spec.get("restart"),
                type=spec.get("type"),
                restarts=spec.get("restarts", 0),
                last_exit=spec.get("last_exit"),
            )
            row["state"] = spec.get("state", row.get("state"))
            if spec.get("type") == "supervisor":
                row["supervisor"] = row.get("supervisor") or entry is None
        row["name"] = (entry or {}).get("registered") or (spec or {}).get("id") or (entry or {}).get("class")
        rows.append(row)
        if entry is not None:
            walk(entry, key, depth + 1)

    def walk(parent: dict[str, Any], key: str, depth: int) -> None:
        detail = _detail(parent)
        children = kids.get(parent["id"], [])
        if detail is not None:
            for spec in detail.get("children", []):
                child = by_id.get(spec.get("actor")) if spec.get("actor") else None
                if child is not None and child.get("parent") != parent["id"]:
                    child = None
                if spec.get("id") is None and child is None:
                    continue  # a simple_one_for_one child between lives: nothing to show
                child_key = f"{key}/{spec['id']}" if spec.get("id") is not None else f"{key}/{spec['actor']}"
                add(child, child_key, depth, spec)
        for child in children:
            if child["id"] not in seen:
                add(child, f"{key}/{child['id']}", depth, None)

    for root in kids.get(None, []):
        add(root, root.get("registered") or root["id"], 0, None)
    return rows


def host_rows(
    hosts: list[dict[str, Any]],
    actors: list[dict[str, Any]],
    node_pid: int,
    usage: dict[int, dict[str, float]],
    names: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The node's own process first, then each live host, with its actors and their mailboxes.

    ``names`` gives an actor the name the tree shows (its child id) where it has no registered one.
    """
    names = names or {}
    by_proc: dict[str, list[dict[str, Any]]] = {}
    for entry in actors:
        by_proc.setdefault(entry.get("proc") or "?", []).append(entry)
    procs = [{"proc": "n", "label": "node", "pid": node_pid, "cpus": None, "node": True}]
    procs += [
        {
            "proc": h["proc"],
            "label": h.get("label") or h["proc"],
            "pid": h.get("pid"),
            "cpus": h.get("cpus"),
            "node": False,
        }
        for h in hosts
        if h.get("state") == "up"
    ]
    rows = []
    for proc in procs:
        members = sorted(by_proc.get(proc["proc"], []), key=lambda e: (-e.get("mailbox", 0), _id_key(e["id"])))
        used = usage.get(proc["pid"] or 0, {})
        rows.append(
            {
                **proc,
                "cpu": used.get("cpu"),
                "rss": used.get("rss"),
                "count": len(members),
                "mailbox": sum(e.get("mailbox", 0) for e in members),
                "actors": [
                    {
                        "name": e.get("registered") or names.get(e["id"]) or e.get("class"),
                        "id": e["id"],
                        "mailbox": e.get("mailbox", 0),
                    }
                    for e in members[:12]
                ],
            }
        )
    return rows


def message_delta(previous: dict[str, int], actors: Iterable[dict[str, Any]]) -> tuple[int, dict[str, int]]:
    """Messages handled since ``previous`` (actor id -> count), and the new counts.

    Actors seen for the first time count in full; actors gone count nothing
    more, so a death does not read as a negative rate.
    """
    current = {a["id"]: int(a.get("handled", 0)) for a in actors}
    total = sum(max(0, n - previous.get(i, 0)) for i, n in current.items())
    return total, current


class History:
    """Samples of restarts and messages per second over the last ``window`` seconds."""

    def __init__(self, window: float = 300.0) -> None:
        self.window = window
        self._samples: deque[tuple[float, float, float]] = deque()

    def add(self, t: float, restarts: float, messages_per_s: float) -> None:
        self._samples.append((t, restarts, messages_per_s))
        while self._samples and self._samples[0][0] < t - self.window:
            self._samples.popleft()

    def series(self) -> dict[str, list[float]]:
        return {
            "t": [round(s[0], 2) for s in self._samples],
            "restarts": [s[1] for s in self._samples],
            "messages": [round(s[2], 1) for s in self._samples],
        }


class ReportLog:
    """The supervisors' recent reports, newest first, each once."""

    def __init__(self, keep: int = 200) -> None:
        self._seen: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.keep = keep

    def merge(self, actors: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for entry in actors:
            detail = _detail(entry)
            if detail is None:
                continue
            for report in detail.get("reports", []):
                key = (entry["id"], report.get("seq"))
                self._seen.setdefault(key, {**report, "actor": entry["id"]})
        if len(self._seen) > self.keep:
            newest = sorted(self._seen.items(), key=lambda kv: kv[1].get("time", 0), reverse=True)[: self.keep]
            self._seen = dict(newest)
        return sorted(self._seen.values(), key=lambda r: (r.get("time", 0), r.get("seq", 0)), reverse=True)
