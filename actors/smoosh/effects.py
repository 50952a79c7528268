"""What smoosh's state classes ask their actor to do.

The channel and server logic (`channel_state`, `server_state`) never
starts a process, sends a message or sets a timer itself: each method
returns a list of these values and the thin actor carries them out, in
order.  Tests assert on them directly.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AdoptJob",
    "CloseChannel",
    "Effect",
    "EnqueueLater",
    "EnqueueToChannel",
    "ResumeJob",
    "StartChannel",
    "StartJob",
    "SuspendJob",
    "WriteCheckpoint",
]


@dataclass(frozen=True)
class StartJob:
    """Start compacting ``key`` (or cleaning its indexes) through the adapter.

    The actor calls ``adapter.start_job(key)`` (which adopts a compaction
    already running for the key), monitors the job, and reports back with
    `ChannelState.job_started` or `ChannelState.job_start_failed`.
    """

    channel: str
    key: Hashable


@dataclass(frozen=True)
class AdoptJob:
    """A compaction of ``key`` is still running as ``job``: monitor it."""

    channel: str
    key: Hashable
    job: Any


@dataclass(frozen=True)
class SuspendJob:
    """Stop a running job in place (SIGSTOP for the SQLite worker)."""

    job: Any


@dataclass(frozen=True)
class ResumeJob:
    """Continue a suspended job (SIGCONT); harmless if it was not suspended."""

    job: Any


@dataclass(frozen=True)
class EnqueueLater:
    """Hand ``key`` back to `smoosh_server` after ``delay`` seconds (`re_enqueue/1`)."""

    key: Hashable
    delay: float


@dataclass(frozen=True)
class WriteCheckpoint:
    """Write ``entries`` for ``channel`` off the channel's thread, then call
    `ChannelState.checkpoint_done` (upstream spawns a checkpointer process)."""

    channel: str
    entries: dict = field(hash=False)


@dataclass(frozen=True)
class StartChannel:
    """Start (and link) the actor of channel ``name``."""

    name: str


@dataclass(frozen=True)
class CloseChannel:
    """Close channel ``name`` (`smoosh_channel:close/1`)."""

    name: str
    handle: Any = None


@dataclass(frozen=True)
class EnqueueToChannel:
    """Cast ``{enqueue, key, priority}`` to the channel actor."""

    channel: str
    key: Hashable
    priority: float


Effect = (
    StartJob
    | AdoptJob
    | SuspendJob
    | ResumeJob
    | EnqueueLater
    | WriteCheckpoint
    | StartChannel
    | CloseChannel
    | EnqueueToChannel
)
