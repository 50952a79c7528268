"""Values couch_jobs hands out, and how types and data are encoded in the store.

The seed keeps jobs as Erlang maps and packs types with the FDB tuple layer.
Here a job is a frozen dataclass (it travels between processes and must not
be mutated by the holder), and a type - a string, an integer or a tuple of
those - is encoded as canonical JSON text, so that ``("t1", 1024)`` and ``42``
compare and index the same way in every process.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple, Union

import orjson

from .errors import JsonEncodingError

__all__ = [
    "Job",
    "JobEvent",
    "JobState",
    "JobType",
    "PENDING_SEQ",
    "Subscription",
    "UNDEFINED_MAX_SCHEDULED_TIME",
    "decode_data",
    "decode_type",
    "encode_data",
    "encode_type",
    "check_job_id",
    "check_sched_time",
]

JobType = Union[str, int, tuple[Any, ...]]

#: ``?UNDEFINED_MAX_SCHEDULED_TIME``: accept any pending job, whatever its time.
UNDEFINED_MAX_SCHEDULED_TIME = 1 << 36

#: ``?PENDING_SEQ``: the sequence a pending job carries.
PENDING_SEQ = 0

_MAX_INT = (1 << 63) - 1


class JobState(enum.StrEnum):
    """A job's state; compares equal to the plain strings ``"pending"`` etc."""

    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class Job:
    """A job handle, as the seed's job map.

    ``jlock`` is set only on handles returned by `accept` (and the results of
    `update`/`resubmit` on them): it is the worker's proof of ownership, and
    every write through the handle is refused with `Halt` once the job's lock
    in the store differs.  ``seq`` is the activity sequence of the last
    accept/update (0 when pending, None when finished).
    """

    type: JobType
    id: str
    jlock: str | None = None
    seq: int | None = None
    stime: int | None = None
    resubmit: bool = False
    state: JobState | None = None
    data: dict[str, Any] | None = None


class JobEvent(NamedTuple):
    """What `wait` returns: ``{Type, Id, State, Data}``; state may also be ``"not_found"``."""

    type: JobType
    id: str
    state: str
    data: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Subscription:
    """A subscription to one job's state changes (the seed's ``{Server, Ref}``).

    ``server`` names whoever delivers the notifications: ``None`` for the
    in-process hub, a notifier actor's reference once the actor layer runs.
    """

    type: JobType
    id: str
    ref: str
    server: Any = None


def _check_type(value: Any, where: str) -> Any:
    if isinstance(value, bool):
        raise TypeError(f"{where}: a job type may not be a bool, got {value!r}")
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        if not -_MAX_INT - 1 <= value <= _MAX_INT:
            raise ValueError(f"{where}: integer {value} does not fit in 64 bits")
        return value
    if isinstance(value, tuple):
        return [_check_type(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise TypeError(
        f"{where}: a job type must be a str, an int or a tuple of those, got {type(value).__name__} {value!r}"
    )


def encode_type(job_type: JobType) -> str:
    """Canonical text for a job type: the key the store indexes it by."""
    return orjson.dumps(_check_type(job_type, "job type")).decode()


def _to_tuple(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_to_tuple(item) for item in value)
    return value


def decode_type(text: str) -> JobType:
    """Inverse of `encode_type`."""
    return _to_tuple(orjson.loads(text))


def encode_data(data: Any) -> str:
    """JSON text of job data; raises `JsonEncodingError` naming what was wrong.

    Job data must be a JSON object with string keys at every level, as the
    seed's jiffy encoding requires (``#{1 => 1}`` fails there too).
    """
    if not isinstance(data, dict):
        raise JsonEncodingError(f"job data must be a JSON object (dict), got {type(data).__name__}")
    try:
        return orjson.dumps(data).decode()
    except TypeError as exc:
        raise JsonEncodingError(f"job data is not encodable as JSON: {exc}") from None


def decode_data(text: str | None) -> dict[str, Any] | None:
    return None if text is None else orjson.loads(text)


def check_job_id(job_id: Any) -> str:
    if not isinstance(job_id, str):
        raise TypeError(f"job_id must be a str, got {type(job_id).__name__} {job_id!r}")
    return job_id


def check_sched_time(sched_time: Any, name: str = "sched_time") -> int:
    if isinstance(sched_time, bool) or not isinstance(sched_time, int):
        raise TypeError(f"{name} must be an int, got {type(sched_time).__name__} {sched_time!r}")
    if sched_time < 0:
        raise ValueError(f"{name} must not be negative, got {sched_time}")
    return sched_time
