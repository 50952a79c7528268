"""The replication job's logic (``couch_replicator_scheduler_job``) as plain classes.

`ReplicationJob` copies documents from one `DocStore` to another:

* at start it reads the checkpoint documents (``_local/<rep id>``) on both
  sides and resumes from the newest sequence they agree on
  (`compare_replication_logs`, the seed's algorithm);
* `next_batch` reads the changes feed after the last sequence handed out and
  tags the batch with a report sequence ``(ts, seq)`` (the changes manager);
* `replicate_batch` is the worker: it asks the target which revisions it
  lacks, reads them from the source and writes them with their revisions;
* `SeqTracker` is the seed's bookkeeping of sequences in progress, highest
  done and the *through* sequence, the highest sequence below which every
  batch is done: only that one is safe to checkpoint when batches finish out
  of order;
* `checkpoint` records the through sequence on both sides (history of 50
  sessions, as the seed); `stop` takes a final checkpoint (``shutdown``);
  `finish` is the one-shot job's last checkpoint when it has caught up.

Nothing here owns a thread or a timer: ``now`` comes in, and the actor layer
(or `run_to_completion`, for tests and simple hosts) decides when to call.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any, Protocol, runtime_checkable

from actors.leases import Fence

from .docs_model import LOCAL_PREFIX, Change, DatabaseNotFound, DocStoreError
from .docstore import DocStore
from .docstore_sql import SQLDocStore
from .records import Rep
from .rep_history import LOWEST_SEQ, compare_replication_logs
from .stores import open_db

__all__ = [
    "Batch",
    "BatchStats",
    "CheckpointError",
    "DEFAULT_CHECKPOINT_INTERVAL",
    "LOWEST_SEQ",
    "REP_ID_VERSION",
    "ReplicationError",
    "ReplicationJob",
    "SchedulerJob",
    "SeqTracker",
    "compare_replication_logs",
    "replicate_batch",
]

log = logging.getLogger("actors.replicator.job")

REP_ID_VERSION = 3
#: Milliseconds, as the seed's ``DEFAULT_CHECKPOINT_INTERVAL``.
DEFAULT_CHECKPOINT_INTERVAL = 30000
DEFAULT_BATCH_SIZE = 500
DEFAULT_WORKERS = 4
_HISTORY_LIMIT = 50


class ReplicationError(Exception):
    """The job cannot run; ``reason`` is plain data for the scheduler's history."""

    def __init__(self, reason: Any, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class CheckpointError(ReplicationError):
    """``checkpoint_commit_failure``: a checkpoint could not be recorded."""

    def __init__(self, message: str) -> None:
        super().__init__(("checkpoint_commit_failure", message), message)


@runtime_checkable
class SchedulerJob(Protocol):
    """What the scheduler's job actor expects from a job class.

    ``cls(rep)`` builds it; `start` opens resources (raise to crash the job);
    `step` does a bounded amount of work and says ``"progress"``, ``"idle"``
    (continuous and caught up) or ``"done"`` (finished: the process exits
    ``normal``); `checkpoint` records progress; `stop` is the ``shutdown``
    path and takes a final checkpoint.  Every method gets ``now`` in seconds.
    """

    def start(self, now: float) -> None: ...

    def step(self, now: float) -> str: ...

    def checkpoint(self, now: float) -> bool: ...

    def stop(self, now: float) -> None: ...


# -- sequence bookkeeping ---------------------------------------------------------


class SeqTracker:
    """The seed's ``seqs_in_progress``/``highest_seq_done``/``current_through_seq``.

    Sequences are ``(ts, seq)`` pairs: ``ts`` numbers the batches so two
    batches ending at the same source sequence stay distinct.
    """

    def __init__(self, start_seq: tuple[int, Any] = (0, LOWEST_SEQ)) -> None:
        self.seqs_in_progress: list[tuple[int, Any]] = []
        self.highest_seq_done: tuple[int, Any] = (0, LOWEST_SEQ)
        self.current_through_seq = start_seq
        self.committed_seq = start_seq

    def report_seq(self, seq: tuple[int, Any]) -> None:
        """A batch ending at ``seq`` was handed to a worker (ordset insert)."""
        if seq not in self.seqs_in_progress:
            self.seqs_in_progress.append(seq)
            self.seqs_in_progress.sort()

    def report_seq_done(self, seq: tuple[int, Any]) -> None:
        """A worker finished the batch ending at ``seq`` (``report_seq_done``)."""
        in_progress = self.seqs_in_progress
        if not in_progress:
            through0, rest = seq, []
        elif in_progress[0] == seq:
            through0, rest = seq, in_progress[1:]
        else:
            through0, rest = self.current_through_seq, [s for s in in_progress if s != seq]
        highest = max(self.highest_seq_done, seq)
        self.current_through_seq = max(through0, highest) if not rest else through0
        self.seqs_in_progress = rest
        self.highest_seq_done = highest

    @property
    def needs_checkpoint(self) -> bool:
        return self.current_through_seq != self.committed_seq


# -- the worker -------------------------------------------------------------------


@dataclass
class BatchStats:
    missing_checked: int = 0
    missing_found: int = 0
    docs_read: int = 0
    docs_written: int = 0
    doc_write_failures: int = 0

    def add(self, other: "BatchStats") -> None:
        self.missing_checked += other.missing_checked
        self.missing_found += other.missing_found
        self.docs_read += other.docs_read
        self.docs_written += other.docs_written
        self.doc_write_failures += other.doc_write_failures


@dataclass(frozen=True)
class Batch:
    """Changes handed to a worker, tagged with the sequence to report when done."""

    report_seq: tuple[int, int]
    changes: tuple[Change, ...] = field(default_factory=tuple)


def replicate_batch(
    source: SQLDocStore, target: SQLDocStore, changes: Iterable[Change], fence: Fence | None = None
) -> BatchStats:
    """Copy the revisions of ``changes`` the target lacks (``couch_replicator_worker``);
    with ``fence``, the write is refused (`Fenced`) once the job's lease moved on."""
    changes = list(changes)
    stats = BatchStats(missing_checked=len(changes))
    missing = target.revs_diff({c.id: c.rev for c in changes})
    stats.missing_found = len(missing)
    if not missing:
        return stats
    # The source may have moved on since the change was read; its current
    # revision is written (the store keeps only winners, so this is safe).
    docs = source.open_docs(missing)
    stats.docs_read = len(docs)
    written = target.bulk_docs(docs, fence=fence)
    stats.docs_written = written
    return stats


# -- the job ----------------------------------------------------------------------


def _base_id(rep_id: Any) -> str:
    if isinstance(rep_id, tuple) and rep_id:
        return "".join(str(part) for part in rep_id[:1])
    return str(rep_id)


def _rfc1123(when: float) -> str:
    return formatdate(when, usegmt=True)


class ReplicationJob:
    """One replication between two SQLite document stores (`SchedulerJob`).

    ``rep.source``/``rep.target`` are database file paths.  Options (seed
    names): ``continuous``, ``worker_batch_size``, ``worker_processes``,
    ``checkpoint_interval`` (ms), ``create_target``, ``since_seq``,
    ``use_checkpoints``.

    ``store``: the PostgreSQL store URL where bare database names live
    (``[replicator] store``).  ``fence`` (set by whoever holds the job's
    lease) goes with every write into the store that holds the lease,
    ``fence_store``: a checkpoint or a batch written after the lease moved on
    is refused there.
    """

    def __init__(self, rep: Rep, *, opener: Callable[..., SQLDocStore] | None = None, store: str | None = None) -> None:
        self.rep = rep
        self.store = store
        self._opener = (
            opener
            if opener is not None
            else (DocStore if store is None else (lambda location, **kw: open_db(location, store=store, **kw)))
        )
        self.fence: Fence | None = None
        self.fence_store: str | None = None
        options = rep.options
        self.continuous = bool(options.get("continuous", False))
        self.batch_size = _positive_int(options, "worker_batch_size", DEFAULT_BATCH_SIZE)
        self.workers = _positive_int(options, "worker_processes", DEFAULT_WORKERS)
        self.checkpoint_interval = _positive_int(options, "checkpoint_interval", DEFAULT_CHECKPOINT_INTERVAL)
        self.use_checkpoints = bool(options.get("use_checkpoints", True))
        self.log_id = LOCAL_PREFIX + _base_id(rep.id)
        self.source: SQLDocStore | None = None
        self.target: SQLDocStore | None = None
        self.tracker = SeqTracker()
        self.stats = BatchStats()
        self.history: list[dict] = []
        self.checkpoint_history: dict = {}
        self.session_id = ""
        self.start_seq: tuple[int, Any] = (0, LOWEST_SEQ)
        self._read_seq = LOWEST_SEQ
        self._ts = 0
        self._started_at = 0.0
        self._last_checkpoint_at = 0.0
        self._src_starttime = ""
        self._tgt_starttime = ""
        self.state = "new"

    # -- lifecycle ----------------------------------------------------------------

    def start(self, now: float) -> None:
        """Open both databases and find where to resume (``init_state``)."""
        if self.state != "new":
            raise ReplicationError(("bad_state", self.state), f"job {self.rep.id!r} already {self.state}")
        try:
            self.source = self._opener(self.rep.source)
        except DatabaseNotFound as exc:
            raise ReplicationError(("db_not_found", str(self.rep.source)), f"could not open {self.rep.source}") from exc
        try:
            self.target = self._opener(self.rep.target, create=bool(self.rep.options.get("create_target", False)))
        except DatabaseNotFound as exc:
            self.source.close()
            raise ReplicationError(("db_not_found", str(self.rep.target)), f"could not open {self.rep.target}") from exc
        try:
            self._init_state(now)
        except BaseException:
            self._close("crashed")
            raise

    def _init_state(self, now: float) -> None:
        source_log = self.source.get_local(self.log_id)
        target_log = self.target.get_local(self.log_id)
        source_body = source_log.body if source_log else {}
        target_body = target_log.body if target_log else {}
        start_seq, self.history = compare_replication_logs(source_body, target_body)
        start_seq = self.rep.options.get("since_seq", start_seq)
        if not isinstance(start_seq, int) or start_seq < 0:
            raise ReplicationError(("bad_since_seq", start_seq), f"bad start sequence {start_seq!r}")
        self.start_seq = (0, start_seq)
        self.tracker = SeqTracker(self.start_seq)
        self._read_seq = start_seq
        self.checkpoint_history = {"no_changes": True, **source_body}
        self.session_id = uuid.uuid4().hex
        self._src_starttime = self.source.info()["instance_start_time"]
        self._tgt_starttime = self.target.info()["instance_start_time"]
        self._started_at = now
        self._last_checkpoint_at = now
        self.state = "running"
        log.info("replication %r: %s -> %s from seq %r", self.rep.id, self.rep.source, self.rep.target, start_seq)

    def next_batch(self) -> Batch | None:
        """The next batch of changes, or None when the source has no more yet."""
        self._require_running()
        changes = self.source.changes(self._read_seq, self.batch_size)
        if not changes:
            return None
        self._ts += 1
        report_seq = (self._ts, changes[-1].seq)
        self._read_seq = changes[-1].seq
        self.tracker.report_seq(report_seq)
        return Batch(report_seq, tuple(changes))

    def report_seq_done(self, seq: tuple[int, int], stats: BatchStats | None = None) -> None:
        self._require_running()
        self.tracker.report_seq_done(seq)
        if stats is not None:
            self.stats.add(stats)

    def process(self, batch: Batch) -> BatchStats:
        """Run one batch in this thread (what a worker actor does) and report it."""
        self._require_running()
        stats = replicate_batch(self.source, self.target, batch.changes, self.fence_for(self.target))
        self.report_seq_done(batch.report_seq, stats)
        return stats

    @property
    def caught_up(self) -> bool:
        return not self.tracker.seqs_in_progress and self._read_seq >= self.source.update_seq

    def step(self, now: float) -> str:
        """Up to ``worker_processes`` batches; ``"progress"``, ``"idle"`` or ``"done"``."""
        self._require_running()
        batches = []
        for _ in range(self.workers):
            batch = self.next_batch()
            if batch is None:
                break
            batches.append(batch)
        for batch in batches:
            self.process(batch)
        if batches:
            self.maybe_checkpoint(now)
            return "progress"
        if self.continuous:
            self.maybe_checkpoint(now)
            return "idle"
        self.finish(now)
        return "done"

    def maybe_checkpoint(self, now: float) -> bool:
        """Checkpoint when ``checkpoint_interval`` has passed since the last one."""
        if (now - self._last_checkpoint_at) * 1000.0 >= self.checkpoint_interval:
            return self.checkpoint(now)
        return False

    def checkpoint(self, now: float) -> bool:
        """Record the through sequence on source and target (``do_checkpoint``)."""
        self._require_running()
        self._last_checkpoint_at = now
        if not self.use_checkpoints:
            self.checkpoint_history = {"use_checkpoints": False}
            return False
        if not self.tracker.needs_checkpoint:
            return False
        try:
            src_time = self.source.ensure_full_commit()
        except DocStoreError as exc:
            raise CheckpointError(f"Failure on source commit: {exc}") from exc
        try:
            tgt_time = self.target.ensure_full_commit()
        except DocStoreError as exc:
            raise CheckpointError(f"Failure on target commit: {exc}") from exc
        if src_time != self._src_starttime and tgt_time != self._tgt_starttime:
            raise CheckpointError("Source and target databases out of sync.")
        if src_time != self._src_starttime:
            raise CheckpointError("Source database out of sync.")
        if tgt_time != self._tgt_starttime:
            raise CheckpointError("Target database out of sync.")
        new_seq = self.tracker.current_through_seq[1]
        entry = {
            "session_id": self.session_id,
            "start_time": _rfc1123(self._started_at),
            "end_time": _rfc1123(now),
            "start_last_seq": self.start_seq[1],
            "end_last_seq": new_seq,
            "recorded_seq": new_seq,
            "missing_checked": self.stats.missing_checked,
            "missing_found": self.stats.missing_found,
            "docs_read": self.stats.docs_read,
            "docs_written": self.stats.docs_written,
            "doc_write_failures": self.stats.doc_write_failures,
        }
        body = {
            "session_id": self.session_id,
            "source_last_seq": new_seq,
            "replication_id_version": REP_ID_VERSION,
            "history": ([entry] + self.history)[:_HISTORY_LIMIT],
        }
        for side, store in (("source", self.source), ("target", self.target)):
            try:
                store.put_local(self.log_id, body, fence=self.fence_for(store))
            except DocStoreError as exc:
                raise CheckpointError(f"Error updating the {side} checkpoint document: {exc}") from exc
        self.checkpoint_history = body
        self.tracker.committed_seq = self.tracker.current_through_seq
        log.info("recorded a checkpoint for %s -> %s at source seq %r", self.rep.source, self.rep.target, new_seq)
        return True

    def finish(self, now: float) -> None:
        """The one-shot job caught up: last checkpoint, then close (``do_last_checkpoint``)."""
        self._require_running()
        tracker = self.tracker
        if not tracker.seqs_in_progress and tracker.highest_seq_done[1] != LOWEST_SEQ:
            tracker.current_through_seq = tracker.highest_seq_done
            self.checkpoint(now)
        self._close("done")

    def stop(self, now: float) -> None:
        """The ``shutdown`` path: a final checkpoint (failure logged), then close."""
        if self.state != "running":
            self._close(self.state if self.state in ("done", "stopped") else "stopped")
            return
        try:
            self.checkpoint(now)
        except CheckpointError as exc:
            log.error("replication %r: failed last checkpoint: %s", self.rep.id, exc)
        self._close("stopped")

    def abort(self) -> None:
        """Close without a checkpoint (the job crashed)."""
        self._close("crashed")

    def status(self) -> dict[str, Any]:
        """Plain data like the seed's task status."""
        return {
            "replication_id": _base_id(self.rep.id),
            "state": self.state,
            "continuous": self.continuous,
            "source_seq": self.tracker.highest_seq_done[1],
            "through_seq": self.tracker.current_through_seq[1],
            "checkpointed_source_seq": self.tracker.committed_seq[1],
            "docs_read": self.stats.docs_read,
            "docs_written": self.stats.docs_written,
            "missing_revisions_found": self.stats.missing_found,
            "revisions_checked": self.stats.missing_checked,
            "doc_write_failures": self.stats.doc_write_failures,
        }

    def run_to_completion(self, now: Callable[[], float], max_steps: int = 1_000_000) -> str:
        """Drive a one-shot job in this thread until done (bounded by ``max_steps``)."""
        if self.state == "new":
            self.start(now())
        for _ in range(max_steps):
            result = self.step(now())
            if result != "progress":
                return result
        raise ReplicationError(("max_steps", max_steps), f"not finished after {max_steps} steps")

    # -- helpers -----------------------------------------------------------------

    def fence_for(self, store: SQLDocStore | None) -> Fence | None:
        """The fence to carry on a write to ``store``: the lease's, where the lease lives there."""
        if self.fence is None or store is None or store.store_id != self.fence_store:
            return None
        return self.fence

    def _require_running(self) -> None:
        if self.state != "running":
            raise ReplicationError(("bad_state", self.state), f"job {self.rep.id!r} is {self.state}")

    def _close(self, state: str) -> None:
        for store in (self.source, self.target):
            if store is not None:
                store.close()
        self.state = state


def _positive_int(options: Any, key: str, default: int) -> int:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"option {key} = {value!r}: must be a positive integer")
    return value
