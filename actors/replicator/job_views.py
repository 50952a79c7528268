"""The scheduler's jobs as plain data: the seed's ``job_ejson/1`` and ``job_summary/2``.

What `_active_tasks`, ``_scheduler/jobs`` and the status pages show of a
job, as dicts of text and numbers, safe to send anywhere.  Pure functions of
a `Job` record, apart from the scheduler's table (`scheduler_state`) and
from its read-only copy (`job_table`), which both answer with them.
"""

from __future__ import annotations

import time
from typing import Any

from . import policy
from .records import Job, is_crash

__all__ = ["iso8601", "job_id_text", "job_to_json", "rep_error_to_text", "summarize_job"]


def rep_error_to_text(reason: Any) -> str:
    """A crash reason as text for summaries (``couch_replicator_utils:rep_error_to_binary``)."""
    if isinstance(reason, bytes):
        return reason.decode("utf-8", "replace")
    if isinstance(reason, str):
        return reason
    if isinstance(reason, BaseException):
        return f"{type(reason).__name__}: {reason}"
    if isinstance(reason, tuple) and len(reason) == 2 and isinstance(reason[1], (str, bytes)):
        return f"{reason[0]}: {rep_error_to_text(reason[1])}"
    return repr(reason)


def iso8601(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def summarize_job(job: Job, health_threshold: float) -> dict:
    """The seed's ``job_summary/2`` for one record: running, pending or crashing."""
    errors = policy.consecutive_crashes(job.history, health_threshold)
    if job.pid is not None:
        state, info = "running", None
    elif errors == 0:
        state, info = "pending", None
    else:
        reason = next((e[0][1] for e in job.history if is_crash(e[0])), None)
        state, info = "crashing", rep_error_to_text(reason)
    rep = job.rep
    return {
        "source": _endpoint(rep.source),
        "target": _endpoint(rep.target),
        "state": state,
        "info": info,
        "error_count": errors,
        "last_updated": iso8601(job.history[0][1]) if job.history else None,
        "start_time": iso8601(rep.start_time),
        "proxy": None,
    }


def job_id_text(job_id: Any) -> str:
    """A job id as text: the seed's ``{BaseId, Ext}`` id reads ``BaseId ++ Ext``.

    ``job_ejson/1`` joins the two parts (``"abc+continuous"``), the form
    replication ids are shown in everywhere; a string id is itself and any
    other id its ``repr``.
    """
    if isinstance(job_id, str):
        return job_id
    if isinstance(job_id, tuple) and len(job_id) == 2 and all(isinstance(p, str) for p in job_id):
        return job_id[0] + job_id[1]
    return repr(job_id)


def job_to_json(job: Job, node: str) -> dict:
    """The seed's ``job_ejson/1``: plain data, safe to send anywhere."""
    history = []
    for etype, when in job.history:
        event: dict[str, Any] = {"timestamp": iso8601(when)}
        if is_crash(etype):
            event.update(type="crashed", reason=rep_error_to_text(etype[1]))
        else:
            event["type"] = etype
        history.append(event)
    rep = job.rep
    return {
        "id": job_id_text(job.id),
        "pid": None if job.pid is None else repr(job.pid),
        "source": _endpoint(rep.source),
        "target": _endpoint(rep.target),
        "database": rep.db_name,
        "user": rep.user,
        "doc_id": rep.doc_id,
        "history": history,
        "node": node,
        "start_time": iso8601(rep.start_time),
    }


def _endpoint(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float)):
        return value
    return str(value)
