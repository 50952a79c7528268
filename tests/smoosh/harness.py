"""A synchronous stand-in for the smoosh actors, driving the state classes.

It carries out effects the way the actor layer will (one callback per
effect), with a fake clock and real files, so the seed's end-to-end tests
run without the kernel.  Delayed re-enqueues are kept in a list and fired
by `advance`.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from typing import Any

from actors.config import Config
from actors.smoosh import persist
from actors.smoosh.channel_state import ChannelState
from actors.smoosh.effects import (
    AdoptJob,
    CloseChannel,
    EnqueueLater,
    EnqueueToChannel,
    ResumeJob,
    StartChannel,
    StartJob,
    SuspendJob,
    WriteCheckpoint,
)
from actors.smoosh.server_state import ServerState, compute_priority
from actors.smoosh.settings import ChannelSettings, ServerSettings


class Harness:
    def __init__(self, cfg: Config, adapter: Any, now: float = 1000.0) -> None:
        self.cfg = cfg
        self.adapter = adapter
        self.now = now
        self.settings = ServerSettings.from_config(cfg)
        self.server = ServerState(self.settings)
        self.channels: dict[str, ChannelState] = {}
        self.later: list[tuple[float, Hashable]] = []
        self.started: list[tuple[str, Hashable]] = []
        self.log: list[Any] = []
        self._handles = itertools.count(1)
        self.setup_error = persist.check_setup(self.settings.state_dir, self.settings.persist)
        self.apply(self.server.create_missing_channels())
        cfg.listen(self._config_changed)

    # -- the actor callbacks ---------------------------------------------

    def _config_changed(self, section: str, key: str, value: Any, persist_: bool) -> None:
        if section == "smoosh" and key in ("db_channels", "view_channels", "cleanup_channels"):
            self.settings = ServerSettings.from_config(self.cfg)
            self.apply(self.server.config_changed(self.settings))

    def priority_of(self, channel: str, key: Hashable) -> float:
        return compute_priority(self.channels[channel].settings, key, self.adapter)

    def _chan_prio(self, channel: str):
        return lambda key: self.priority_of(channel, key)

    def apply(self, effects: list) -> None:
        for effect in effects:
            self.log.append(effect)
            if isinstance(effect, StartChannel):
                settings = ChannelSettings.from_config(self.cfg, effect.name)
                waiting = persist.unpersist(
                    self.settings.state_dir, effect.name, settings.capacity, self.settings.persist
                )
                self.channels[effect.name] = ChannelState(
                    settings,
                    waiting,
                    cleanup_index_files=self.settings.cleanup_index_files,
                    re_enqueue_delay=self.settings.re_enqueue_delay,
                    ignore=self.settings.ignore,
                )
                self.server.channel_started(effect.name, next(self._handles))
            elif isinstance(effect, CloseChannel):
                self.channels.pop(effect.name, None)
            elif isinstance(effect, EnqueueToChannel):
                ch = self.channels[effect.channel]
                self.apply(ch.enqueue(effect.key, effect.priority, self._chan_prio(effect.channel)))
            elif isinstance(effect, StartJob):
                ch = self.channels[effect.channel]
                try:
                    job = self.adapter.start_job(effect.key)
                except Exception as exc:
                    self.apply(ch.job_start_failed(effect.key, repr(exc), self._chan_prio(effect.channel)))
                else:
                    self.started.append((effect.channel, effect.key))
                    self.apply(ch.job_started(effect.key, job))
            elif isinstance(effect, EnqueueLater):
                self.later.append((self.now + effect.delay, effect.key))
            elif isinstance(effect, WriteCheckpoint):
                persist.write(effect.entries, persist.file_path(self.settings.state_dir, effect.channel))
                self.channels[effect.channel].checkpoint_done()
            elif isinstance(effect, SuspendJob):
                effect.job.suspend()
            elif isinstance(effect, ResumeJob):
                effect.job.resume()
            elif isinstance(effect, AdoptJob):
                pass  # the actor would monitor effect.job
            else:
                raise AssertionError(f"unexpected effect {effect!r}")

    # -- the public API of smoosh_server ---------------------------------

    def enqueue(self, obj: Any) -> None:
        key = self.server.should_enqueue(obj, self.now)
        if key is None or not self.server.begin_enqueue(key):
            return
        try:
            self.apply(self.server.enqueue_request(key, self.priority_of, self.now))
        finally:
            self.server.end_enqueue(key)

    def handle_db_event(self, db: str, event: Any) -> None:
        for key in self.server.handle_db_event(db, event, self.now):
            self.enqueue(key)

    def status(self) -> dict:
        return self.server.status(lambda name: self.channels[name].status() if name in self.channels else None)

    def flush(self) -> None:
        for ch in list(self.channels.values()):
            self.apply(ch.flush(self.settings.persist))

    def unpause_all(self) -> None:
        for name, ch in list(self.channels.items()):
            self.apply(ch.unpause(self._chan_prio(name)))

    def checkpoint_all(self) -> None:
        for ch in list(self.channels.values()):
            self.apply(ch.checkpoint(self.settings.persist))

    def crash_channel(self, name: str) -> Any:
        handle = self.server.channel_handle(name)
        self.channels.pop(name)
        self.apply(self.server.channel_died(handle, "killed"))
        return handle

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [key for at, key in self.later if at <= self.now]
        self.later = [(at, key) for at, key in self.later if at > self.now]
        for key in due:
            self.enqueue(key)

    def wait_jobs(self, timeout: float = 20.0) -> list[tuple[Hashable, str | None]]:
        """Wait for every running job and report its exit to its channel."""
        finished = []
        for name, ch in list(self.channels.items()):
            for key, job in list(ch.active.items()):
                job.wait(timeout)
                reason = job.exit_reason()
                finished.append((key, reason))
                self.apply(ch.job_exited(job, reason, self._chan_prio(name), self.adapter.running_job))
        return finished
