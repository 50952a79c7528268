"""One `ProcessAgent` per OS process that uses couch_jobs with the actor layer.

It is the process's mailbox for everything couch_jobs actors send it:

- ``["changed", [type_key, ...]]`` casts from the ``couch_jobs_wakeups`` hub:
  wake this process's blocked `accept`/`wait` callers (``waker.notify``) and
  tell the type monitors living here (they ``listen`` for their type);
- notification messages from notifier actors: file them in the process's
  `ActorSubscriptions` mailboxes and wake the `wait`-ers of that type.

It finds the hub by name, monitors it, and subscribes again when the hub
restarts (retrying on a timer, never in a loop).  Unknown messages are
logged and dropped: one stray message must not cost the process its
wake-ups.

The agent runs under its own `AgentSup` in its process (``one_for_one``,
the agent ``transient`` and ``significant``): a crashed agent is restarted
and re-registers itself in the attachment; ``["detach"]`` stops it normally,
which shuts the supervisor down with it (``auto_shutdown``).  After a
restart the type monitors of the process fall back to their periodic
re-check, and subscriptions delivered to the old agent are gone (the
notifiers monitored it), as a restarted Erlang process loses its mailbox.
"""

from __future__ import annotations

import logging
from typing import Any

from actors import ActorRef, CallTimeout, Exit, GenServer, Stop
from supervision import ChildSpec, Supervisor, SupFlags

from .actor_subscriptions import EVENT_TAG
from .attachment import Attachment, attachment
from .errors import CouchJobsError
from .naming import HUB_NAME

__all__ = ["AgentSup", "ProcessAgent"]

_log = logging.getLogger(__name__)

_RETRY_MIN = 0.02
_RETRY_MAX = 1.0


class AgentSup(Supervisor):
    """Supervises this process's `ProcessAgent` (restarts it; stops with it on detach)."""

    def init(self) -> tuple[SupFlags, list[ChildSpec]]:
        flags = SupFlags(strategy="one_for_one", intensity=10, period=10, auto_shutdown="any_significant")
        child = ChildSpec("couch_jobs_agent", (ProcessAgent, ()), restart="transient", significant=True, shutdown=5.0)
        return flags, [child]


class ProcessAgent(GenServer):
    def init(self) -> None:
        att = attachment()
        if att is None:
            raise CouchJobsError("couch_jobs is not attached in this process; call process.use()")
        self.attachment: Attachment = att
        att.agent = self.ref
        self.hub: ActorRef | None = None
        self.hub_mref: Any = None
        self.retry = _RETRY_MIN
        self.retry_timer: Any = None
        self.listeners: dict[str, dict[Any, ActorRef]] = {}  # type_key -> mref -> listener
        self.listener_keys: dict[Any, str] = {}  # mref -> type_key
        self.find_hub()

    # -- the hub -----------------------------------------------------------

    def find_hub(self) -> None:
        if self.hub is not None:
            return
        hub = self.whereis(HUB_NAME)
        if hub is not None:
            try:
                hub.call(["subscribe", self.ref], timeout=5.0)
            except (Exit, CallTimeout):
                hub = None
        if hub is None:
            if self.retry_timer is None:
                self.retry_timer = self.send_after(self.retry, "find_hub")
                self.retry = min(_RETRY_MAX, self.retry * 2)
            return
        self.hub = hub
        self.hub_mref = self.monitor(hub)
        self.retry = _RETRY_MIN
        self.attachment.hub = hub
        # Changes committed while no hub was known reached nobody here; the
        # type monitors re-read now, blocked callers at their next re-check.
        self.changed(list(self.listeners))

    # -- fan-out inside this process ----------------------------------------

    def changed(self, type_keys: list[str]) -> None:
        if type_keys:
            self.attachment.jobs.waker.notify_many(type_keys)
        for key in type_keys:
            for listener in list(self.listeners.get(key, {}).values()):
                listener.send(["changed", key])

    # -- callbacks ---------------------------------------------------------

    def handle_cast(self, request: Any) -> Any:
        if _tagged(request, "changed", 2):
            self.changed(list(request[1]))
        elif _tagged(request, "listen", 3):
            _, type_key, listener = request
            mref = self.monitor(listener)
            self.listeners.setdefault(type_key, {})[mref] = listener
            self.listener_keys[mref] = type_key
        elif request == "find_hub" or _tagged(request, "find_hub", 1):
            self.find_hub()
        else:
            _log.warning("couch_jobs process agent dropped unexpected cast %r", request)
        return None

    def handle_call(self, request: Any, from_: Any) -> Any:
        if _tagged(request, "whereis", 2):
            return self.whereis(request[1])
        if request == "hub":
            return self.hub
        if request == "detach":
            return Stop("normal", reply="ok")
        _log.warning("couch_jobs process agent refused unexpected call %r", request)
        return ("bad_call", request)

    def handle_info(self, message: Any) -> Any:
        if _tagged(message, EVENT_TAG, 6):
            type_key = self.attachment.subscriptions.deliver(message)
            if type_key is not None:
                self.attachment.jobs.waker.notify(type_key)
        elif message == "find_hub":
            self.retry_timer = None
            self.find_hub()
        elif _tagged(message, "DOWN", 4):
            self.down(message[1])
        else:
            _log.warning("couch_jobs process agent dropped unexpected message %r", message)
        return None

    def down(self, mref: Any) -> None:
        if mref == self.hub_mref:
            self.hub = self.hub_mref = None
            self.attachment.hub = None
            self.find_hub()
            return
        type_key = self.listener_keys.pop(mref, None)
        if type_key is not None:
            listeners = self.listeners.get(type_key, {})
            listeners.pop(mref, None)
            if not listeners:
                self.listeners.pop(type_key, None)

    def terminate(self, reason: Any) -> None:
        if self.attachment.agent == self.ref:
            self.attachment.hub = None
            self.attachment.agent = None


def _tagged(message: Any, tag: str, size: int) -> bool:
    return isinstance(message, (list, tuple)) and len(message) == size and message[0] == tag
