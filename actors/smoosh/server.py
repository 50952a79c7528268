"""The ``smoosh_server`` actor: channels, routing, staleness, helpers.

A thin shell over `ServerState`, like `SmooshChannel` over `ChannelState`.
It runs in the process of its supervisor (by default the host process
``smoosh``), and so do everything it starts with ``spawn_link``:

* one `SmooshChannel` per configured channel, registered as
  ``smoosh_channel_<name>``; a channel that exits is forgotten and, if
  still configured, recreated at once with a fresh status entry;
* the access cleaner, the event listener and (when ``[smoosh]
  watch_interval`` is set and the adapter can ``scan``) the directory
  watcher, each restarted when it dies, as upstream's server restarts its
  access cleaner and ``couch_event`` listener.

Keeping the channels in the server's process is a choice: the status
table and the access table are then plain shared objects (upstream's ETS
tables), status never waits for a channel, and the adapter object (with
its table of running jobs, which makes adopting a running compaction work)
is shared by all.  The compactions themselves run in worker OS processes.

Config changes arrive on the process's I/O thread; the listener only casts
``("config_changed", section, key)`` to the server.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable
from typing import Any

from actors import Continue, Exit, GenServer, SpawnError
from actors import config as _config
from actors.config import ConfigError
from actors.smoosh import persist
from actors.smoosh._names import SERVER, channel_name, register_self
from actors.smoosh.channel import SmooshChannel, _channel_settings, notify
from actors.smoosh.effects import CloseChannel, EnqueueToChannel, StartChannel
from actors.smoosh.helpers import AccessCleaner, EventListener
from actors.smoosh.policy import validate_key
from actors.smoosh.server_state import ServerState, compute_priority
from actors.smoosh.settings import ChannelSettings, ServerSettings
from actors.smoosh.watcher import DirWatcher, watch_interval

__all__ = ["SmooshServer", "CHANNEL_CALL_TIMEOUT"]

log = logging.getLogger(__name__)

#: Seconds the server waits for a channel to answer suspend/resume/flush/close.
CHANNEL_CALL_TIMEOUT = 60.0
#: Seconds before retrying a channel that failed to start.
CHANNEL_RETRY = 1.0


def _name_holder(exc: SpawnError) -> Any:
    """The actor holding the name a spawn wanted, if that is why it failed."""
    reason = exc.reason
    if isinstance(reason, tuple) and len(reason) == 2 and reason[0] in ("already_started", "already_registered"):
        return reason[1]
    return None


class SmooshServer(GenServer):
    """``smoosh_server``.  ``overrides`` set `ServerSettings` intervals (tests)."""

    def init(self, adapter: Any, overrides: dict[str, Any] | None = None, observer: Any = None) -> Any:
        register_self(self, SERVER)
        self.trap_exit = True
        self.adapter = adapter
        self.overrides = dict(overrides or {})
        self.observer = observer
        self.cfg = _config.current()
        self.settings = self._server_settings()
        self.state = ServerState(self.settings)
        # channel name -> its last published status (written by the channels)
        self.status_table: dict[str, dict] = {}
        self._channel_settings: dict[str, ChannelSettings] = {}
        self.setup_error: str | None = None
        self.cleaner: Any = None
        self.events: Any = None
        self.watcher: Any = None
        self._watch_interval = watch_interval(self.cfg)
        # monitor ref -> message to self when an old holder of a name is gone
        self._name_waits: dict[Any, Any] = {}
        me = self.ref

        def on_change(section: str, key: str, value: Any, persist_: bool) -> None:
            if section == "smoosh" or section.startswith("smoosh."):
                me.cast(("config_changed", section, key))

        self._listener = self.cfg.listen(on_change)
        return Continue("create_channels")

    def handle_continue(self, arg: Any) -> None:
        # Report a misconfigured state directory once, at start (upstream
        # check_setup/0), rather than at every checkpoint.
        self.setup_error = persist.check_setup(self.settings.state_dir, self.settings.persist)
        if self.setup_error is not None:
            log.error("%s", self.setup_error)
        self._apply(self.state.create_missing_channels())
        self._start_cleaner()
        self._start_events()
        self._start_watcher()

    # -- helpers ---------------------------------------------------------------------

    def _spawn_helper(self, what: str, cls: type, *args: Any) -> Any:
        """Start a linked helper; None (and a retry later) when its name is
        still held by the previous incarnation, which is stopping."""
        try:
            return self.spawn_link(cls, *args)
        except SpawnError as exc:
            holder = _name_holder(exc)
            if holder is None:
                raise
            self._after_holder_exits(holder, ("start_helper", what))
            return None

    def _start_cleaner(self) -> None:
        self.cleaner = self._spawn_helper(
            "access_cleaner", AccessCleaner, self.state.access, self.settings.access_clean_interval
        )

    def _start_events(self) -> None:
        self.events = self._spawn_helper("event_listener", EventListener, self.state.access, self.ref)

    def _start_watcher(self) -> None:
        self.watcher = None
        if self._watch_interval > 0 and callable(getattr(self.adapter, "scan", None)):
            self.watcher = self._spawn_helper("dir_watcher", DirWatcher, self.adapter, self._watch_interval)

    def _after_holder_exits(self, holder: Any, message: Any) -> None:
        """Send ``message`` to self once ``holder`` (an old actor keeping a
        name we need, e.g. a channel of the previous server writing its final
        checkpoint) is gone: monitored, no polling, no fixed delay."""
        mref = self.monitor(holder)
        self._name_waits[mref] = message

    def _server_settings(self) -> ServerSettings:
        """``[smoosh]``; a bad value is logged and that key's default used."""

        def report(exc: ConfigError) -> None:
            log.error("smoosh_server: bad [smoosh] configuration, using the default: %s", exc)

        return ServerSettings.from_config(self.cfg, on_error=report, **self.overrides)

    def _priority_of(self, channel: str, key: Hashable) -> float:
        settings = self._channel_settings.get(channel)
        if settings is None:
            settings = self._channel_settings[channel] = _channel_settings(self.cfg, channel)
        return compute_priority(settings, key, self.adapter)

    def _channel_ref(self, name: str) -> Any:
        record = self.state.channels.get(name)
        return None if record is None else record.handle

    def _apply(self, effects: list) -> None:
        for effect in effects:
            if isinstance(effect, EnqueueToChannel):
                ref = self._channel_ref(effect.channel)
                if ref is not None:
                    ref.cast(("enqueue", effect.key, effect.priority))
            elif isinstance(effect, StartChannel):
                self._start_channel(effect.name)
            elif isinstance(effect, CloseChannel):
                self.status_table.pop(effect.name, None)
                if effect.handle is not None:
                    try:
                        effect.handle.call("close", timeout=CHANNEL_CALL_TIMEOUT)
                    except Exit as exc:  # already gone
                        log.info("smoosh_server: closing channel %s: %s", effect.name, exc.reason)
                notify(self.observer, "channel_closed", effect.name)
            else:
                raise TypeError(f"smoosh_server: unexpected effect {effect!r}")

    def _start_channel(self, name: str) -> None:
        try:
            ref = self.spawn_link(
                SmooshChannel,
                name,
                self.settings,
                self.adapter,
                self.status_table,
                self.observer,
                name=channel_name(name),
            )
        except SpawnError as exc:
            holder = _name_holder(exc)
            if holder is not None:
                log.info("smoosh_server: channel %s still stopping; starting it once it is gone", name)
                self._after_holder_exits(holder, "create_channels")
            else:
                log.error("smoosh_server: channel %s failed to start: %s; retrying", name, exc.reason)
                self.send_after(CHANNEL_RETRY, "create_channels")
            return
        self.state.channel_started(name, ref)
        notify(self.observer, "channel_started", name, ref)

    def _enqueue(self, obj: Any, check_staleness: bool = True) -> bool:
        """Route one object to its channel; False when it was not enqueued."""
        try:
            key = validate_key(obj)
        except (TypeError, ValueError) as exc:
            log.warning("smoosh_server: not enqueueing %r: %s", obj, exc)
            return False
        now = time.monotonic()
        if check_staleness and not self.state.stale_enough(key, now):
            return False
        if not self.state.begin_enqueue(key):
            return False
        try:
            effects = self.state.enqueue_request(key, self._priority_of, now, check_staleness)
        finally:
            self.state.end_enqueue(key)
        self._apply(effects)
        return bool(effects)

    def _each_channel(self, request: str) -> None:
        for name in list(self.state.channel_names()):
            ref = self._channel_ref(name)
            if ref is None:
                continue
            log.debug("smoosh_server: %s %s", request, name)
            try:
                ref.call(request, timeout=CHANNEL_CALL_TIMEOUT)
            except Exit as exc:  # a channel that died meanwhile is recreated
                log.warning("smoosh_server: %s of channel %s failed: %s", request, name, exc.reason)

    def _config_changed(self, section: str) -> None:
        if section.startswith("smoosh.") and section != "smoosh.ignore":
            self._channel_settings.pop(section[len("smoosh.") :], None)
            return
        settings = self._server_settings()
        self.settings = settings
        self._apply(self.state.config_changed(settings))
        for name in self.state.channel_names():
            ref = self._channel_ref(name)
            if ref is not None:
                ref.cast(("server_settings", settings))
        interval = watch_interval(self.cfg)
        if interval != self._watch_interval:
            self._watch_interval = interval
            if self.watcher is not None:
                self.unlink(self.watcher)
                self.exit(self.watcher, "shutdown")
            self._start_watcher()

    # -- callbacks -------------------------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        op = request[0] if isinstance(request, tuple) else request
        if op == "enqueue":
            return self._enqueue(request[1])
        if op == "status":
            return self.state.status(self.status_table.get)
        if op in ("suspend", "resume", "flush"):
            self._each_channel(op)
            return "ok"
        if op == "channel":
            return self._channel_ref(request[1])
        if op == "channels":
            return {name: self._channel_ref(name) for name in self.state.channel_names()}
        if op == "setup_error":
            return self.setup_error
        if op == "helpers":
            return {what: self._helper(what) for what in ("access_cleaner", "event_listener", "dir_watcher")}
        raise ValueError(f"smoosh_server: unknown call {request!r}")

    def handle_cast(self, request: Any) -> None:
        op = request[0]
        if op == "enqueue":
            self._enqueue(request[1])
        elif op == "config_changed":
            self._config_changed(request[1])
        else:
            raise ValueError(f"smoosh_server: unknown cast {request!r}")

    def handle_info(self, message: Any) -> None:
        if message == "create_channels":
            self._apply(self.state.create_missing_channels())
        elif isinstance(message, tuple) and message[0] == "re_enqueue":
            # A failed job handed back by its channel (upstream re_enqueue/1).
            self._enqueue(message[1], check_staleness=False)
        elif isinstance(message, tuple) and message[0] == "EXIT":
            self._exited(message[1], message[2])
        elif isinstance(message, tuple) and message[0] == "DOWN" and message[1] in self._name_waits:
            self.handle_info(self._name_waits.pop(message[1]))
        elif isinstance(message, tuple) and message[0] == "start_helper":
            {
                "access_cleaner": self._start_cleaner,
                "event_listener": self._start_events,
                "dir_watcher": self._start_watcher,
            }[message[1]]()
            notify(self.observer, "helper_restarted", message[1], self._helper(message[1]))
        else:
            log.debug("smoosh_server: ignoring %r", message)

    def _helper(self, what: str) -> Any:
        return {"access_cleaner": self.cleaner, "event_listener": self.events, "dir_watcher": self.watcher}[what]

    def _exited(self, ref: Any, reason: Any) -> None:
        if ref == self.cleaner:
            log.info("smoosh_server: access cleaner died %s", reason)
            self._start_cleaner()
            notify(self.observer, "helper_restarted", "access_cleaner", self.cleaner)
        elif ref == self.events:
            log.info("smoosh_server: event listener died %s", reason)
            self._start_events()
            notify(self.observer, "helper_restarted", "event_listener", self.events)
        elif ref == self.watcher:
            log.info("smoosh_server: directory watcher died %s", reason)
            self._start_watcher()
            notify(self.observer, "helper_restarted", "dir_watcher", self.watcher)
        else:
            name = next((n for n, r in self.state.channels.items() if r.handle == ref), None)
            if name is not None:
                log.info("smoosh_server: channel %s died %s", name, reason)
                self.status_table.pop(name, None)
                notify(self.observer, "channel_died", name, ref, reason)
            self._apply(self.state.channel_died(ref, reason))

    def terminate(self, reason: Any) -> None:
        self.cfg.unlisten(self._listener)
        for helper in (self.cleaner, self.events, self.watcher):
            if helper is not None:
                self.unlink(helper)
                self.exit(helper, "shutdown")
        # Close the channels (each writes its final checkpoint), newest last.
        for name in list(self.state.channel_names()):
            ref = self._channel_ref(name)
            if ref is None:
                continue
            self.unlink(ref)
            try:
                ref.call("close", timeout=CHANNEL_CALL_TIMEOUT)
            except Exit as exc:
                log.info("smoosh_server: channel %s at shutdown: %s", name, exc.reason)
        log.debug("smoosh_server: stopped (%s)", reason)
