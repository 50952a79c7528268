"""couch_jobs' metrics, per job type, recorded in the process that does the work (``actors.stats``).

The seed records none; these are named after its API and its activity
monitor so an operator finds them by the names the code uses:

* counters ``couch_jobs.<call>`` for each job the API's calls handled:
  ``add`` (added or re-added), ``accept`` (a worker took a job),
  ``finish``, ``resubmit`` and ``remove``; counted where the call ran (a
  worker's process), once the call's transaction was done;
* ``couch_jobs.activity_monitor.re_enqueued``: running jobs the type's
  activity monitor found idle for a whole timeout and put back to pending;
* gauges ``couch_jobs.jobs.running`` and ``couch_jobs.jobs.pending``: the
  type's jobs in each state as of the activity monitor's last check (every
  type timeout, so they lag by up to that).

A node's ``/metrics`` exposes them as ``couch_jobs_accept_total{type="..."}``
and so on (docs/metrics.md).
"""

from __future__ import annotations

from typing import Any

from actors.stats import Stats

__all__ = ["CALLS", "STATS_DESCRIPTIONS", "count", "jobs_now", "re_enqueued"]

_LABELS = ("type",)
#: The API calls counted: each its own counter.
CALLS = ("add", "accept", "finish", "resubmit", "remove")

#: Every name recorded here: ``(name, kind, description)``, as IOQ's table.
STATS_DESCRIPTIONS: tuple[tuple[str, str, str], ...] = (
    ("couch_jobs.add", "counter", "jobs added (or re-added, which resubmits them)"),
    ("couch_jobs.accept", "counter", "jobs a worker accepted (locked to run)"),
    ("couch_jobs.finish", "counter", "jobs finished by their worker"),
    ("couch_jobs.resubmit", "counter", "jobs resubmitted to run again"),
    ("couch_jobs.remove", "counter", "jobs removed"),
    (
        "couch_jobs.activity_monitor.re_enqueued",
        "counter",
        "running jobs found idle for a whole activity timeout and put back to pending",
    ),
    ("couch_jobs.jobs.running", "gauge", "running jobs, as of the activity monitor's last check"),
    ("couch_jobs.jobs.pending", "gauge", "pending jobs, as of the activity monitor's last check"),
)


def _label(job_type: Any) -> tuple[str]:
    return (job_type if isinstance(job_type, str) else repr(job_type),)


def count(stats: Stats, call: str, job_type: Any, amount: int = 1) -> None:
    """One of `CALLS` done for a job of ``job_type``."""
    stats.increment_labelled(f"couch_jobs.{call}", _label(job_type), amount, _LABELS)


def re_enqueued(stats: Stats, job_type: Any, amount: int) -> None:
    stats.increment_labelled("couch_jobs.activity_monitor.re_enqueued", _label(job_type), amount, _LABELS)


def jobs_now(stats: Stats, job_type: Any, running: int, pending: int) -> None:
    """The type's job counts as the activity monitor read them."""
    stats.update_labelled_gauge("couch_jobs.jobs.running", _label(job_type), running, _LABELS)
    stats.update_labelled_gauge("couch_jobs.jobs.pending", _label(job_type), pending, _LABELS)
