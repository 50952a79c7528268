"""Monitors whose DOWN is waited for by a thread, not delivered to a mailbox.

The host program uses them (`Node.monitor`), and so does any actor that must
block until another actor is gone, as a supervisor does when it shuts a child
down: OTP does that with a selective receive, which a mailbox without one
replaces with this.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from actors._core.runtime.runtime import Runtime
from actors._core.wire.ref import ActorRef

__all__ = ["Monitor"]

_sink_ids = itertools.count(1)


class Monitor:
    """``wait(timeout)`` returns ``(ref, reason)`` once ``ref`` is dead."""

    def __init__(self, rt: Runtime, target: ActorRef) -> None:
        self._rt = rt
        self.target = target
        self.id = f"$mon.{rt.proc}.{next(_sink_ids)}"
        self.mref = (rt.node_id, rt.proc, self.id)  # unique across the cluster (see `GenServer.monitor`)
        self._event = threading.Event()
        self._result: tuple[ActorRef, Any] | None = None
        rt.sinks[self.id] = self
        rt.request_monitor(
            ActorRef(rt.node_id, rt.proc, self.id, rt.pid, port=rt.transport.tcp_port), target, self.mref
        )

    def __repr__(self) -> str:
        return f"<Monitor of {self.target!r}>"

    # -- sink protocol (called by the runtime) ---------------------------------

    def down(self, mref: Any, target: ActorRef, reason: Any) -> None:
        if self._result is None:
            self._result = (target, reason)
            self._rt.sinks.pop(self.id, None)
            self._event.set()

    def proc_down(self, proc: str, reason: Any) -> None:
        if self.target.proc == proc:
            self.down(self.mref, self.target, reason)

    def on_message(self, kind: int, body: Any) -> None:
        return None

    # -- use -------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> tuple[ActorRef, Any]:
        """Block until the DOWN arrives; raises `TimeoutError` after ``timeout``."""
        self._rt.flush_casts()
        with self._rt.scheduler.blocking():
            got = self._event.wait(timeout)
        if not got:
            raise TimeoutError(f"{self.target!r} still alive after {timeout} s")
        assert self._result is not None
        return self._result

    @property
    def fired(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> Any:
        return self._result[1] if self._result else None

    def cancel(self) -> None:
        if self._rt.sinks.pop(self.id, None) is not None:
            self._rt.request_demonitor(self.target, self.mref)
