"""Each running service's panel, read through the service's own status calls.

A probe runs only when its service's actors are in the node's actor list
(a panel is shown for a running service only), asks them what their
operators would ask (``get_queue_depths``, ``status``, ``jobs``, ``types``)
with a short timeout, and turns the answers into plain rows for the page.
couch_jobs keeps its counts in its store, not in an actor, so its probe
asks couch_jobs' `counts` on a read-only view of the store the node's
configuration names (`actors.tools.observer.jobs_view`), SQLite or PostgreSQL.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from actors.couch_jobs.model import decode_type
from actors.tools.observer.source import Source, ref_of

__all__ = ["PROBES", "panels", "replication_rows"]

CALL_TIMEOUT = 1.0
IOQ_CLASSES = ("Ioq1Server", "Ioq2Server")
SMOOSH_SERVER = "smoosh_server"
REPLICATOR_SCHEDULER = "couch_replicator_scheduler"
REPLICATOR_READER = "couch_replicator_scheduler_reader"
COUCH_JOBS_SERVER = "couch_jobs_server"


def _by_name(actors: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {a["registered"]: a for a in actors if a.get("registered")}


def ioq(source: Source, actors: list[dict[str, Any]]) -> dict[str, Any] | None:
    servers = sorted((a for a in actors if a.get("class") in IOQ_CLASSES), key=lambda a: a.get("registered") or a["id"])
    if not servers:
        return None
    rows = []
    for entry in servers:
        depths = source.call(ref_of(source.node_id, entry), "get_queue_depths", CALL_TIMEOUT)
        channels = {user: list(counts) for user, counts in sorted(depths.get("channels", {}).items())}
        rows.append(
            {
                "server": entry.get("registered") or entry["id"],
                "class": entry["class"],
                "compaction": depths.get("compaction", 0),
                "replication": depths.get("replication", 0),
                "low": depths.get("low", 0),
                "channels": channels,
                "mailbox": entry.get("mailbox", 0),
            }
        )
    return {"servers": rows}


def smoosh(source: Source, actors: list[dict[str, Any]]) -> dict[str, Any] | None:
    server = _by_name(actors).get(SMOOSH_SERVER)
    if server is None:
        return None
    status = source.call(ref_of(source.node_id, server), "status", CALL_TIMEOUT)
    rows = []
    for name, chan in sorted(status.items()):
        waiting = chan.get("waiting") or {}
        rows.append(
            {
                "channel": name,
                "active": chan.get("active", 0),
                "starting": chan.get("starting", 0),
                "queued": waiting.get("size", 0),
                "min": waiting.get("min"),
                "max": waiting.get("max"),
            }
        )
    return {"channels": rows}


def replication_rows(jobs: list[dict[str, Any]], backoffs: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
    """Running, pending or crashing, with the back-off the scheduler holds a crashing job to (pure).

    ``jobs`` is the reader's ``jobs`` reply, ``backoffs`` the scheduler's
    (`actors.replicator.scheduler.backoffs`): the scheduler alone knows its
    health threshold and back-off settings, so the page shows its reckoning,
    not a copy of it.  ``wait`` is what is left of the back-off at ``now``
    (the scheduler's clock: seconds since the epoch).
    """
    held = {b["id"]: b for b in backoffs}
    rows = []
    for job in jobs:
        job_id = str(job.get("id"))
        backoff = held.get(job_id)
        if job.get("pid") is not None:
            state = "running"
        elif backoff is not None:
            state = "crashing"
        else:
            state = "pending"
        crashes = backoff["crashes"] if backoff else 0
        wait = max(0.0, backoff["retry_at"] - now) if backoff else 0.0
        last = next((e.get("reason") for e in job.get("history", []) if e.get("type") == "crashed"), None)
        rows.append(
            {
                "id": job_id[:24],
                "source": job.get("source"),
                "target": job.get("target"),
                "state": state,
                "crashes": crashes,
                "backoff": backoff["backoff"] if backoff else 0.0,
                "wait": wait,
                "last_error": last,
            }
        )
    order = {"running": 0, "crashing": 1, "pending": 2}
    rows.sort(key=lambda r: (order[r["state"]], r["id"]))
    return rows


def replicator(source: Source, actors: list[dict[str, Any]]) -> dict[str, Any] | None:
    names = _by_name(actors)
    scheduler, reader = names.get(REPLICATOR_SCHEDULER), names.get(REPLICATOR_READER)
    if scheduler is None or reader is None:
        return None
    settings = source.call(ref_of(source.node_id, scheduler), ("settings",), CALL_TIMEOUT)
    backoffs = source.call(ref_of(source.node_id, scheduler), ("backoffs",), CALL_TIMEOUT)
    jobs = source.call(ref_of(source.node_id, reader), ("jobs",), CALL_TIMEOUT)
    rows = replication_rows(jobs, backoffs, time.time())
    counts = {state: sum(1 for r in rows if r["state"] == state) for state in ("running", "pending", "crashing")}
    return {"max_jobs": getattr(settings, "max_jobs", None), "counts": counts, "jobs": rows[:50]}


def couch_jobs(source: Source, actors: list[dict[str, Any]]) -> dict[str, Any] | None:
    server = _by_name(actors).get(COUCH_JOBS_SERVER)
    if server is None:
        return None
    types = source.call(ref_of(source.node_id, server), "types", CALL_TIMEOUT)
    stored = source.jobs.counts(source.config()) or {}
    counts = {t: {"pending": 0, "running": 0} for t in types}
    for key, by_state in stored.items():
        counts[key] = {"pending": by_state.get("pending", 0), "running": by_state.get("running", 0)}
    return {"types": [{"type": _type_label(t), **counts[t]} for t in sorted(counts)]}


def _type_label(key: str) -> str:
    """A job type as its user wrote it (the store keys types by their JSON text)."""
    try:
        value = decode_type(key)
    except ValueError:
        return key
    return value if isinstance(value, str) else repr(value)


PROBES: dict[str, Callable[[Source, list[dict[str, Any]]], dict[str, Any] | None]] = {
    "ioq": ioq,
    "smoosh": smoosh,
    "replicator": replicator,
    "couch_jobs": couch_jobs,
}


def panels(source: Source, actors: list[dict[str, Any]]) -> dict[str, Any]:
    """``{service: panel}`` for every running service; a probe that fails says why."""
    out: dict[str, Any] = {}
    for name, probe in PROBES.items():
        try:
            panel = probe(source, actors)
        except Exception as exc:  # one service's failure must not take the others' panels (or the poll) down
            panel = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        if panel is not None:
            out[name] = panel
    return out
