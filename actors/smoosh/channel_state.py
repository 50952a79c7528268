"""The logic of one `smoosh_channel`, as a plain class.

A channel owns a bounded priority queue of objects waiting to be
compacted, the jobs it is starting and the jobs running.  It starts jobs
while it is not paused and fewer than ``concurrency`` are starting or
running, re-checking each object's priority first (a database deleted while
it waited must not crash the channel); it suspends and resumes its jobs at
the edges of its time window when ``strict_window`` is set; a job that
fails is handed back to the server after a delay.

Methods take the inputs the seed's callbacks receive and return a list of
`actors.smoosh.effects` values for the actor to carry out.  ``priority_of``
(``key -> priority``) and ``running_job_of`` (``key -> job or None``) are
injected so that this module never touches the adapter.

The actor's timers (seconds, from `ServerSettings`): ``check_window`` every
`check_window_interval`, status refresh every `status_interval`, checkpoint
every `checkpoint_interval`, and one ``unpause`` after ``wait_secs``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from typing import Any

from actors.smoosh import persist
from actors.smoosh.effects import (
    AdoptJob,
    EnqueueLater,
    ResumeJob,
    StartJob,
    SuspendJob,
    WriteCheckpoint,
)
from actors.smoosh.policy import INDEX_CLEANUP, PriorityQueue, in_window, is_db_key, is_view_key, key_db, stringify
from actors.smoosh.settings import ChannelSettings

__all__ = ["ChannelState", "NORMAL_REASONS", "PriorityOf", "RunningJobOf"]

log = logging.getLogger(__name__)

PriorityOf = Callable[[Hashable], float]
RunningJobOf = Callable[[Hashable], Any]

#: Exit reasons of a job that mean "finished" (upstream ``normal``/``noproc``).
NORMAL_REASONS = frozenset({None, "normal", "noproc"})


class ChannelState:
    """State and decisions of one channel.  Not thread-safe: one actor owns it."""

    def __init__(
        self,
        settings: ChannelSettings,
        waiting: PriorityQueue | None = None,
        *,
        cleanup_index_files: bool = True,
        re_enqueue_delay: float = 5.0,
        ignore: frozenset[str] = frozenset(),
    ) -> None:
        self.settings = settings
        self.waiting = waiting if waiting is not None else PriorityQueue()
        # The channel starts paused and unpauses after wait_secs.
        self.paused = True
        # key -> job (the job handle the adapter returned, or its id)
        self.active: dict[Hashable, Any] = {}
        # keys whose StartJob is being carried out, in start order
        self.starting: dict[Hashable, None] = {}
        # True while a WriteCheckpoint is being carried out (upstream `cref`)
        self.checkpointing = False
        self.cleanup_index_files = cleanup_index_files
        self.re_enqueue_delay = re_enqueue_delay
        # ``[smoosh.ignore]`` databases: upstream `start_compact/2` checks
        # `ignore_db/1` again when a job starts, so a database ignored after
        # it was queued (or restored from a checkpoint) is not compacted.
        self.ignore = frozenset(ignore)

    @property
    def name(self) -> str:
        return self.settings.name

    # -- settings ----------------------------------------------------------

    def update_settings(self, settings: ChannelSettings, priority_of: PriorityOf) -> list:
        """New config for this channel; a raised concurrency may start jobs."""
        if settings.name != self.name:
            raise ValueError(f"settings for channel {settings.name!r} given to channel {self.name!r}")
        self.settings = settings
        return self.maybe_start_compaction(priority_of)

    # -- enqueue -----------------------------------------------------------

    def enqueue(self, key: Hashable, priority: float, priority_of: PriorityOf) -> list:
        """``{enqueue, Object, Priority}``: queue unless already running, then try to start."""
        if key not in self.active:
            log.debug("%s: enqueueing %s to compact with priority %s", self.name, stringify(key), priority)
            self.waiting.insert(key, priority, self.settings.capacity)
        return self.maybe_start_compaction(priority_of)

    def maybe_start_compaction(self, priority_of: PriorityOf) -> list:
        """Start queued jobs up to ``concurrency`` (`maybe_start_compaction/1`).

        Each key taken from the queue has its priority re-checked; zero (or
        an error computing it) drops the key, and so does a key whose
        database is now in ``[smoosh.ignore]`` (`start_compact/2` returns
        ``false``).  Every loop turn removes one key from the queue, so the
        loop ends.
        """
        if self.paused:
            return []
        effects: list = []
        while len(self.active) + len(self.starting) < self.settings.concurrency:
            key = self.waiting.out()
            if key is None:
                break
            if key in self.active or key in self.starting:
                continue
            try:
                priority = priority_of(key)
            except Exception as exc:  # defensive, as upstream: never crash the channel
                log.info("%s: failed to get priority for %s in queue: %r", self.name, stringify(key), exc)
                priority = 0
            if not priority:
                continue
            if key_db(key) in self.ignore:
                log.info("%s: not compacting %s: its database is ignored", self.name, stringify(key))
                continue
            log.info("%s: starting compaction for %s", self.name, stringify(key))
            self.starting[key] = None
            effects.append(StartJob(self.name, key))
            if is_view_key(key) and self.cleanup_index_files:
                # schedule_cleanup_index_files/1: one node holds every shard,
                # so upstream's 1/ShardCount chance is 1 here.
                effects.append(EnqueueLater((INDEX_CLEANUP, key_db(key)), 0.0))
        return effects

    # -- job lifecycle -----------------------------------------------------

    def job_started(self, key: Hashable, job: Any) -> list:
        """The adapter started (or adopted) ``job`` for ``key``: it is active now."""
        if key not in self.starting:
            return []
        del self.starting[key]
        self.active[key] = job
        if self.paused and self.settings.strict_window:
            # Started just as the window closed: keep it suspended with the rest.
            return [SuspendJob(job)]
        return []

    def job_start_failed(self, key: Hashable, reason: Any, priority_of: PriorityOf) -> list:
        """Starting ``key`` failed: hand it back to the server later, start another."""
        if key not in self.starting:
            return []
        del self.starting[key]
        log.warning("%s: failed to start compaction of %s: %s", self.name, stringify(key), reason)
        return [EnqueueLater(key, self.re_enqueue_delay), *self.maybe_start_compaction(priority_of)]

    def job_exited(
        self,
        job: Any,
        reason: Any,
        priority_of: PriorityOf,
        running_job_of: RunningJobOf | None = None,
    ) -> list:
        """A monitored job ended (the ``'DOWN'`` clauses of `handle_info/2`).

        A normal exit frees the slot.  An abnormal exit of a database
        compaction first asks whether a compaction of that database is still
        running (`maybe_remonitor_cpid/3`): if so it is adopted, else the
        key is re-enqueued after the delay, as for every other key.
        """
        key = next((k for k, j in self.active.items() if j == job), None)
        if key is None:
            return []
        del self.active[key]
        effects: list = []
        if reason not in NORMAL_REASONS:
            running = running_job_of(key) if (running_job_of is not None and is_db_key(key)) else None
            if running is not None and running != job:
                log.info("%s: %s compaction already running, monitoring it", self.name, stringify(key))
                self.active[key] = running
                effects.append(AdoptJob(self.name, key, running))
            else:
                log.warning("%s: exit for compaction of %s: %s", self.name, stringify(key), reason)
                effects.append(EnqueueLater(key, self.re_enqueue_delay))
        effects.extend(self.maybe_start_compaction(priority_of))
        return effects

    # -- pause, suspend, windows ---------------------------------------------

    def suspend(self) -> list:
        """Pause and suspend every running job (`handle_call(suspend, ...)`)."""
        self.paused = True
        return [SuspendJob(job) for job in self.active.values()]

    def resume(self, priority_of: PriorityOf | None = None) -> list:
        """Unpause and resume every running job; resuming is always safe.

        With ``priority_of`` the channel also starts waiting jobs at once
        (upstream waits for the next enqueue or job exit to do so).
        """
        self.paused = False
        effects: list = [ResumeJob(job) for job in self.active.values()]
        if priority_of is not None:
            effects.extend(self.maybe_start_compaction(priority_of))
        return effects

    def pause(self) -> list:
        self.paused = True
        return []

    def unpause(self, priority_of: PriorityOf) -> list:
        """The ``wait_secs`` delay after start is over."""
        self.paused = False
        return self.maybe_start_compaction(priority_of)

    def in_window(self, now_minutes: int) -> bool:
        return in_window(now_minutes, self.settings.from_, self.settings.to)

    def check_window(self, now_minutes: int, priority_of: PriorityOf | None = None) -> list:
        """The periodic window check (`handle_info(check_window, ...)`).

        Inside the window a paused channel resumes; outside it a running
        channel pauses, and with ``strict_window`` also suspends its jobs.
        ``now_minutes`` is minutes after UTC midnight.
        """
        running = not self.paused
        allowed = self.in_window(now_minutes)
        if running == allowed:
            return []
        if allowed:
            return self.resume(priority_of)
        if self.settings.strict_window:
            return self.suspend()
        self.paused = True
        return []

    # -- flush, checkpoint, status -------------------------------------------

    def flush(self, persist_enabled: bool = True) -> list:
        """Drop the waiting queue and persist the now empty state (deletes the file)."""
        self.waiting.flush()
        if not persist_enabled:
            return []
        return [WriteCheckpoint(self.name, {})]

    def checkpoint(self, persist_enabled: bool = True) -> list:
        """Periodic checkpoint; skipped while the previous one is still writing."""
        if not persist_enabled or self.checkpointing:
            return []
        self.checkpointing = True
        return [WriteCheckpoint(self.name, persist.snapshot(self.waiting, self.active, self.starting))]

    def checkpoint_done(self) -> None:
        self.checkpointing = False

    def status(self) -> dict[str, Any]:
        """``{"active": n, "starting": n, "waiting": {"size", "min", "max"}}``."""
        return {
            "active": len(self.active),
            "starting": len(self.starting),
            "waiting": self.waiting.info(),
        }
