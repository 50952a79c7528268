"""From the node's dotted metric names to Prometheus' names (pure).

The node records under the seeds' names (``couchdb.io_queue2.queued``,
``couch_replicator.jobs.running``); Prometheus wants ``[a-zA-Z_:][a-zA-Z0-9_:]*``,
base units and a ``_total`` suffix on counters.  This module is the one
place that decides: a service's name keeps its seed name with every other
character made an underscore, and a name whose value is a time in another
unit is renamed and scaled to seconds.  The kernel's own names
(``actors.transport.dropped_frames``) take the ``otpy_`` prefix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DEFAULT_BIND", "PREFIX", "Mapped", "map_name", "safe_label", "safe_name"]

#: Where ``/metrics`` listens unless told: this machine only (metrics name the node's actors).
#: Here, not beside the server, so that reading a node's options does not import ``prometheus_client``.
DEFAULT_BIND = "127.0.0.1"
#: The prefix of every metric about the runtime itself.
PREFIX = "otpy_"

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
_RUNS = re.compile(r"_+")

#: Names recorded in another unit than the base one: dotted name -> (unit suffix, factor to it).
#: IOQ records its times in milliseconds (the seed's unit); the replicator's
#: ``avg_*`` gauges are ages in whole seconds.
UNITS: dict[str, tuple[str, float]] = {
    "couchdb.io_queue.latency": ("seconds", 0.001),
    "couchdb.io_queue2.submit_delay": ("seconds", 0.001),
    "couchdb.io_queue2.svctm": ("seconds", 0.001),
    "couchdb.io_queue2.iowait": ("seconds", 0.001),
    "couch_replicator.jobs.avg_pending": ("seconds", 1.0),
    "couch_replicator.jobs.avg_running": ("seconds", 1.0),
    "couch_replicator.jobs.avg_crashed": ("seconds", 1.0),
}

#: Kernel names (``actors.`` prefix) that become ``otpy_`` names.
_KERNEL_PREFIX = "actors."


@dataclass(frozen=True)
class Mapped:
    """A Prometheus family name (counters without ``_total``: the client adds it) and
    the factor that brings a recorded value to the name's unit."""

    name: str
    factor: float = 1.0


def safe_name(text: str) -> str:
    """``text`` with every character Prometheus does not allow in a name made ``_``
    (runs collapsed, none at either end; a leading digit gets a ``_`` before it)."""
    name = _RUNS.sub("_", _UNSAFE.sub("_", text)).strip("_")
    if not name:
        return "_"
    return "_" + name if name[0].isdigit() else name


def safe_label(value: object, limit: int = 120) -> str:
    """A label value: any text is allowed, but long ones are cut (a label is part of a
    series' identity, and a huge one is a bug upstream)."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def map_name(dotted: str, kind: str) -> Mapped:
    """The Prometheus name of a recorded metric: ``kind`` is ``counter``, ``gauge`` or
    ``summary``.  A counter's name is returned without ``_total`` (the client adds
    it; a recorded name ending in ``.total`` or ``.count`` keeps that word)."""
    if kind not in ("counter", "gauge", "summary"):
        raise ValueError(f"kind must be counter, gauge or summary, got {kind!r}")
    unit, factor = UNITS.get(dotted, ("", 1.0))
    if dotted.startswith(_KERNEL_PREFIX):
        base = PREFIX + safe_name(dotted[len(_KERNEL_PREFIX) :])
    else:
        base = safe_name(dotted)
    if unit and not base.endswith("_" + unit):
        base = f"{base}_{unit}"
    if kind == "counter" and base.endswith("_total"):
        # The client would strip a trailing _total and add it back: keep the
        # recorded word apart from the suffix (couch_replicator.jobs.total is a gauge anyway).
        base = base + "_count"
    return Mapped(base, factor)
