"""The ``smoosh_channel`` actor: one per channel, a thin shell over `ChannelState`.

Every callback calls one `ChannelState` method and carries out the effects
it returns, in order (`tests/smoosh/harness.py` is the synchronous model of
this).  What the actor adds is the plumbing the state class leaves out:

* **timers** (`ServerSettings` intervals): ``check_window``,
  ``update_status``, ``checkpoint`` and the one ``unpause`` after
  ``wait_secs``;
* **jobs**: ``StartJob`` calls ``adapter.start_job`` on this thread (it
  only launches a process) and then watches the job with a small watcher
  thread per job, which waits on the process and sends ``("job_exit",
  job)`` to the channel when it ends.  A thread per job rather than polling
  with ``send_after``: the exit is noticed within milliseconds, the channel
  is never woken while nothing happens, and concurrency is small (a few
  jobs per channel).  The watcher waits in short slices so it also ends when
  the channel stops;
* **checkpoints** are written by a helper thread, one at a time per
  channel; a write asked for while one is running waits for it (the latest
  snapshot wins), so the channel's thread never touches the disk except in
  ``terminate``, where the final checkpoint is written synchronously so
  that an orderly shutdown loses nothing;
* **status** is published after every callback into a table shared with
  ``smoosh_server`` (both live in the same process), so ``status()`` never
  waits for a channel, as upstream's per-channel ETS status table.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable
from typing import Any

from actors import Exit, GenServer, Stop
from actors import config as _config
from actors import stats as _stats
from actors.config import ConfigError
from actors.smoosh import metrics, persist
from actors.smoosh.channel_state import ChannelState
from actors.smoosh.effects import AdoptJob, EnqueueLater, ResumeJob, StartJob, SuspendJob, WriteCheckpoint
from actors.smoosh.policy import stringify, utc_minutes
from actors.smoosh.server_state import compute_priority
from actors.smoosh.settings import ChannelSettings, ServerSettings

__all__ = ["SmooshChannel", "notify"]

log = logging.getLogger(__name__)

#: Seconds a job watcher waits per slice before checking whether to stop.
WATCH_SLICE = 0.25
#: Seconds ``terminate`` waits for a checkpoint being written before its own.
WRITER_JOIN = 30.0


def notify(observer: Any, *event: Any) -> None:
    """Tell an optional observer (tests, benchmarks) what happened; never fails."""
    if observer is not None:
        observer.send(("smoosh", *event))


def _watch(job: Any, channel: Any, stop: threading.Event) -> None:
    """Wait for ``job`` to end, then tell ``channel``; give up when ``stop`` is set."""
    while not stop.is_set():
        if job.wait(WATCH_SLICE) is not None:
            try:
                channel.send(("job_exit", job))
            except Exit:  # this process's runtime is shutting down: no channel left to tell
                pass
            return


def _channel_settings(cfg: Any, name: str) -> ChannelSettings:
    """The channel's settings; a bad value is logged and that key's default
    used (the others keep their values), so that a typo in config can
    neither make the channel crash in a loop nor reset its other keys."""

    def report(exc: ConfigError) -> None:
        log.error("smoosh channel %s: bad configuration, using the default: %s", name, exc)

    return ChannelSettings.from_config(cfg, name, on_error=report)


class SmooshChannel(GenServer):
    """One channel.  Started by ``smoosh_server`` with ``spawn_link``."""

    def init(
        self,
        name: str,
        settings: ServerSettings,
        adapter: Any,
        status_table: dict[str, dict],
        observer: Any = None,
    ) -> None:
        self.trap_exit = True
        self.server_settings = settings
        self.adapter = adapter
        self.status_table = status_table
        self.observer = observer
        self.cfg = _config.current()
        channel_settings = _channel_settings(self.cfg, name)
        waiting = persist.unpersist(settings.state_dir, name, channel_settings.capacity, settings.persist)
        self.state = ChannelState(
            channel_settings,
            waiting,
            cleanup_index_files=settings.cleanup_index_files,
            re_enqueue_delay=settings.re_enqueue_delay,
            ignore=settings.ignore,
        )
        self._stop_watchers = threading.Event()
        self._writer: threading.Thread | None = None
        self._pending_write: tuple[dict, bool] | None = None
        section = f"smoosh.{name}"
        me = self.ref
        self._listener = self.cfg.listen(
            lambda sec, key, value, persist_: me.cast(("settings_changed",)) if sec == section else None
        )
        self.send_after(settings.check_window_interval, "check_window")
        self.send_after(settings.status_interval, "update_status")
        self.send_after(settings.checkpoint_interval, "checkpoint")
        self.send_after(settings.wait_secs, "unpause")
        self._publish()
        notify(self.observer, "channel_up", name, len(waiting))

    @property
    def name(self) -> str:
        return self.state.name

    # -- helpers -------------------------------------------------------------------

    def _priority_of(self, key: Hashable) -> float:
        return compute_priority(self.state.settings, key, self.adapter)

    def _publish(self) -> None:
        status = self.state.status()
        self.status_table[self.name] = status
        metrics.publish_status(_stats.current(), self.name, status)

    def _now_minutes(self) -> int:
        return utc_minutes(time.time())

    def _apply(self, effects: list) -> None:
        """Carry out effects in order; some report back and yield more."""
        todo = list(effects)
        for _ in range(100_000):  # each effect is carried out once; bounded
            if not todo:
                break
            effect = todo.pop(0)
            if isinstance(effect, StartJob):
                todo[:0] = self._start_job(effect.key)
            elif isinstance(effect, AdoptJob):
                self._watch(effect.job)
                notify(self.observer, "adopted", self.name, effect.key, getattr(effect.job, "pid", None))
            elif isinstance(effect, SuspendJob):
                effect.job.suspend()
                notify(self.observer, "suspended", self.name, getattr(effect.job, "key", None))
            elif isinstance(effect, ResumeJob):
                effect.job.resume()
                notify(self.observer, "resumed", self.name, getattr(effect.job, "key", None))
            elif isinstance(effect, EnqueueLater):
                self._enqueue_later(effect.key, effect.delay)
            elif isinstance(effect, WriteCheckpoint):
                self._write(effect.entries, periodic=self.state.checkpointing)
            else:
                raise TypeError(f"smoosh channel {self.name}: unexpected effect {effect!r}")

    def _start_job(self, key: Hashable) -> list:
        try:
            job = self.adapter.start_job(key)
        except Exception as exc:  # a failed start is re-enqueued, never fatal
            notify(self.observer, "start_failed", self.name, key, repr(exc))
            metrics.count(_stats.current(), "start_failed", self.name)
            return self.state.job_start_failed(key, repr(exc), self._priority_of)
        effects = self.state.job_started(key, job)
        if key in self.state.active:
            log.info("%s: started compaction of %s (pid %s)", self.name, stringify(key), getattr(job, "pid", None))
            self._watch(job)
            metrics.count(_stats.current(), "started", self.name)
            self._publish()
            notify(self.observer, "started", self.name, key, getattr(job, "pid", None))
        return effects

    def _watch(self, job: Any) -> None:
        threading.Thread(
            target=_watch,
            args=(job, self.ref, self._stop_watchers),
            name=f"smoosh-watch-{self.name}",
            daemon=True,
        ).start()

    def _enqueue_later(self, key: Hashable, delay: float) -> None:
        """Hand ``key`` back to the server: a failed job after ``delay``
        (skipping the staleness filter), an index cleanup at once (through it)."""
        server = self.parent
        if server is None:
            return
        if delay > 0:
            self.send_after(delay, ("re_enqueue", key), dest=server)
        else:
            server.cast(("enqueue", key))

    def _write(self, entries: dict, periodic: bool) -> None:
        if self._writer is not None:
            previous = self._pending_write
            self._pending_write = (entries, periodic or (previous is not None and previous[1]))
            return
        path = persist.file_path(self.server_settings.state_dir, self.name)
        me = self.ref

        def run() -> None:
            error = None
            try:
                persist.write(entries, path)
            except OSError as exc:
                error = str(exc)
            me.send(("checkpoint_done", periodic, error))

        self._writer = threading.Thread(target=run, name=f"smoosh-checkpoint-{self.name}", daemon=True)
        self._writer.start()

    # -- callbacks -------------------------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        op = request[0] if isinstance(request, tuple) else request
        if op == "suspend":
            self._apply(self.state.suspend())
            reply: Any = "ok"
        elif op == "resume":
            self._apply(self.state.resume(self._priority_of))
            reply = "ok"
        elif op == "flush":
            self._apply(self.state.flush(self.server_settings.persist))
            reply = "ok"
        elif op == "status":
            reply = self.state.status()
        elif op == "info":
            reply = {
                "paused": self.state.paused,
                "active": {k: getattr(j, "pid", None) for k, j in self.state.active.items()},
                "starting": list(self.state.starting),
                "waiting": self.state.waiting.to_map(),
                "settings": self.state.settings,
            }
        elif op == "checkpoint_now":
            # Synchronous checkpoint for tests and operators.
            if self.server_settings.persist:
                self._join_writer()
                entries = persist.snapshot(self.state.waiting, self.state.active, self.state.starting)
                persist.write(entries, persist.file_path(self.server_settings.state_dir, self.name))
            reply = "ok"
        elif op == "close":
            return Stop("normal", reply="ok")
        else:
            raise ValueError(f"smoosh channel {self.name}: unknown call {request!r}")
        self._publish()
        return reply

    def handle_cast(self, request: Any) -> None:
        op = request[0]
        if op == "enqueue":
            _, key, priority = request
            notify(self.observer, "enqueued", self.name, key, priority)
            self._apply(self.state.enqueue(key, priority, self._priority_of))
        elif op == "settings_changed":
            settings = _channel_settings(self.cfg, self.name)
            self._apply(self.state.update_settings(settings, self._priority_of))
            # A new window takes effect at once, not at the next periodic check.
            self._apply(self.state.check_window(self._now_minutes(), self._priority_of))
        elif op == "server_settings":
            # [smoosh] or [smoosh.ignore] changed: persistence, state_dir,
            # cleanup_index_files, the ignored databases.
            self.server_settings = request[1]
            self.state.cleanup_index_files = self.server_settings.cleanup_index_files
            self.state.re_enqueue_delay = self.server_settings.re_enqueue_delay
            self.state.ignore = self.server_settings.ignore
        else:
            raise ValueError(f"smoosh channel {self.name}: unknown cast {request!r}")
        self._publish()

    def handle_info(self, message: Any) -> None:
        if message == "check_window":
            self._apply(self.state.check_window(self._now_minutes(), self._priority_of))
            self.send_after(self.server_settings.check_window_interval, "check_window")
        elif message == "update_status":
            self.send_after(self.server_settings.status_interval, "update_status")
        elif message == "checkpoint":
            self._apply(self.state.checkpoint(self.server_settings.persist))
            self.send_after(self.server_settings.checkpoint_interval, "checkpoint")
        elif message == "unpause":
            # Upstream unpauses unconditionally and waits for the next window
            # check; here a channel outside its window stays paused until
            # the window opens.
            if self.state.in_window(self._now_minutes()):
                self._apply(self.state.unpause(self._priority_of))
        elif isinstance(message, tuple) and message[0] == "job_exit":
            job = message[1]
            reason = job.exit_reason()
            key = getattr(job, "key", None)
            was_active = job in self.state.active.values()
            effects = self.state.job_exited(job, reason, self._priority_of, self.adapter.running_job)
            self._publish()
            if was_active:
                metrics.count(_stats.current(), "finished" if reason == "normal" else "failed", self.name)
                notify(self.observer, "exited", self.name, key, reason)
            self._apply(effects)
        elif isinstance(message, tuple) and message[0] == "checkpoint_done":
            _, periodic, error = message
            self._writer = None
            if periodic:
                self.state.checkpoint_done()
            if error is not None:
                log.error("smoosh channel %s: checkpoint failed: %s", self.name, error)
            notify(self.observer, "checkpointed", self.name, error)
            if self._pending_write is not None:
                entries, periodic = self._pending_write
                self._pending_write = None
                self._write(entries, periodic)
        elif isinstance(message, tuple) and message[0] == "EXIT":
            pass  # a linked helper ended; the parent's exit is handled by the kernel
        else:
            log.debug("smoosh channel %s: ignoring %r", self.name, message)
        self._publish()

    def _join_writer(self) -> None:
        writer = self._writer
        if writer is not None:
            writer.join(WRITER_JOIN)
            self._writer = None
            if self.state.checkpointing:
                self.state.checkpoint_done()

    def terminate(self, reason: Any) -> None:
        metrics.forget(_stats.current(), self.name)
        self.cfg.unlisten(self._listener)
        self._stop_watchers.set()
        # Erlang resumes a process when its suspender dies; do the same.
        for job in list(self.state.active.values()):
            try:
                job.resume()
            except Exception as exc:  # a job that is gone needs no resume
                log.debug("smoosh channel %s: resume on close: %r", self.name, exc)
        if self.server_settings.persist:
            self._join_writer()
            pending = self._pending_write
            self._pending_write = None
            entries = persist.snapshot(self.state.waiting, self.state.active, self.state.starting)
            try:
                persist.write(entries, persist.file_path(self.server_settings.state_dir, self.name))
            except OSError as exc:
                log.error("smoosh channel %s: final checkpoint failed: %s (pending %s)", self.name, exc, bool(pending))
