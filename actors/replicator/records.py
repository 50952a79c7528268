"""Plain job records shared by the replicator policy, state and job layers.

The seed keeps one `#job{}` record per replication in an ets table and a
`#rep{}` record describing what to replicate.  Here both are frozen
dataclasses: the scheduler replaces a record instead of mutating it, so a
reader on another thread always sees a whole, consistent record (the reason
the seed's ets table has ``read_concurrency``).

Timestamps are seconds (floats).  History events are ``(event_type, when)``
tuples, newest first, where ``event_type`` is ``"added"``, ``"started"``,
``"stopped"`` or ``("crashed", reason)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

__all__ = [
    "ADDED",
    "CRASHED",
    "Event",
    "EventType",
    "Job",
    "MAX_BACKOFF",
    "Rep",
    "STARTED",
    "STARTING",
    "STOPPED",
    "crashed",
    "is_crash",
]

ADDED = "added"
STARTED = "started"
STOPPED = "stopped"
CRASHED = "crashed"

#: The exit reason of a job that gave up because the endpoint rate-limited it
#: (the seed's ``{shutdown, max_backoff}``).
MAX_BACKOFF = ("shutdown", "max_backoff")

EventType = Union[str, tuple]
Event = tuple  # (EventType, float)


def crashed(reason: Any) -> tuple:
    """The event type of a crash with ``reason``."""
    return (CRASHED, reason)


def is_crash(event_type: EventType) -> bool:
    return isinstance(event_type, tuple) and len(event_type) == 2 and event_type[0] == CRASHED


class _Starting:
    """Marks a job whose start was decided but whose process is not yet known.

    The scheduler returns a start effect and the actor layer reports back the
    process it started; in between the job already occupies a run slot, so it
    counts as running.
    """

    _instance: "_Starting | None" = None

    def __new__(cls) -> "_Starting":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "STARTING"

    def __reduce__(self) -> str:
        return "STARTING"


STARTING = _Starting()


@dataclass(frozen=True)
class Rep:
    """What a job does: the seed's ``#rep{}`` reduced to what scheduling needs.

    ``db_name`` is the owner database of a permanent job (one created from a
    replicator document); ``None`` marks a transient job, which is removed
    rather than retried when it crashes.
    """

    id: Any
    source: Any = None
    target: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
    db_name: str | None = None
    doc_id: str | None = None
    user: str | None = None
    start_time: float = 0.0

    def __post_init__(self) -> None:
        if self.id is None:
            raise ValueError("Rep.id must not be None")
        if not isinstance(self.options, Mapping):
            raise TypeError(f"Rep.options must be a mapping, got {type(self.options).__name__}")

    @property
    def continuous(self) -> bool:
        return bool(self.options.get("continuous", False))


@dataclass(frozen=True)
class Job:
    """One scheduled job: the seed's ``#job{}``.

    ``pid`` is whatever the actor layer uses to address the running job
    (``None`` while not running, `STARTING` between the decision and the
    report); ``monitor`` is its monitor reference, kept for demonitoring.
    """

    id: Any
    rep: Rep
    history: tuple = ()
    pid: Any = None
    monitor: Any = None

    @property
    def running(self) -> bool:
        return self.pid is not None
