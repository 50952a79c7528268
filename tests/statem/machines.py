"""State machines and a collector for the GenStatem and sys tests, importable in every host process."""

from __future__ import annotations

from typing import Any

from actors import ActorRef, GenServer, GenStatem, Stop, noreply
from actors.gen_statem import (
    EventTimeout,
    GenericTimeout,
    KeepState,
    NextEvent,
    NextState,
    Reply,
    StateTimeout,
    StopAndReply,
    postpone,
)


class Collector(GenServer):
    """Keeps what it is sent; ``("wait", n)`` answers with the first n once there are n."""

    def init(self) -> None:
        self.got: list[Any] = []
        self.waiting: list[tuple[int, Any]] = []

    def handle_info(self, message: Any) -> None:
        self.got.append(message)
        still = []
        for n, from_ in self.waiting:
            if len(self.got) >= n:
                self.reply(from_, self.got[:n])
            else:
                still.append((n, from_))
        self.waiting = still

    def handle_cast(self, request: Any) -> None:
        self.handle_info(request)

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "all":
            return list(self.got)
        _, n = request
        if len(self.got) >= n:
            return self.got[:n]
        self.waiting.append((n, from_))
        return noreply


def wait_for(collector: ActorRef, n: int, timeout: float = 20.0) -> list[Any]:
    """The first ``n`` things sent to ``collector``, once it has them."""
    return collector.call(("wait", n), timeout=timeout)


class CodeLock(GenStatem):
    """OTP's code lock with state enter calls, postpone and a state timeout.

    Buttons pressed while open are postponed: they are pressed again, in
    order, once the lock has locked itself."""

    state_enter = True

    def init(self, code: list[int], open_for: float, report: ActorRef | None = None) -> str:
        self.code = list(code)
        self.open_for = open_for
        self.report = report
        self.buttons: list[int] = []
        return "locked"

    def _tell(self, what: Any) -> None:
        if self.report is not None:
            self.report.send(what)

    def locked(self, event_type: Any, content: Any) -> Any:
        if event_type == "enter":
            self.buttons = []
            self._tell(("entered", "locked"))
            return None
        if event_type == "cast":
            _, digit = content
            self.buttons = (self.buttons + [digit])[-len(self.code) :]
            if self.buttons == self.code:
                return NextState("open")
            return None
        return self.common(event_type, content)

    def open(self, event_type: Any, content: Any) -> Any:
        if event_type == "enter":
            self._tell(("entered", "open"))
            return KeepState(StateTimeout(self.open_for, "lock"))
        if event_type == "state_timeout":
            return NextState("locked")
        if event_type == "cast":
            return KeepState(postpone)
        return self.common(event_type, content)

    def common(self, event_type: Any, content: Any) -> Any:
        if event_type[0] == "call":
            if content == "code_length":
                return KeepState(Reply(event_type[1], len(self.code)))
            if content == "state":
                return KeepState(Reply(event_type[1], self.state))
            if content == "crash":
                raise RuntimeError("asked to crash")
            if content == "stop":
                return StopAndReply("normal", Reply(event_type[1], "stopping"))
        return None


class Timers(GenStatem):
    """handle_event_function: does what it is cast, reports every event but its commands.

    ``("do", action, ...)`` carries out the actions; ``("goto", state, action, ...)`` changes state."""

    callback_mode = "handle_event_function"

    def init(self, report: ActorRef) -> Any:
        self.report = report
        return NextState(0)

    def handle_event(self, event_type: Any, content: Any, state: Any) -> Any:
        if event_type == "cast" and isinstance(content, tuple) and content[0] == "do":
            return KeepState(*content[1:])
        if event_type == "cast" and isinstance(content, tuple) and content[0] == "goto":
            return NextState(content[1], *content[2:])
        if type(event_type) is tuple and event_type[0] == "call":
            return KeepState(Reply(event_type[1], state))
        self.report.send((state, event_type, content))
        return None


class BadEnter(GenStatem):
    """An enter call that changes the state: OTP stops the machine."""

    state_enter = True

    def init(self) -> str:
        return "first"

    def first(self, event_type: Any, content: Any) -> Any:
        if event_type == "enter":
            return None
        return NextState("second")

    def second(self, event_type: Any, content: Any) -> Any:
        return NextState("first")


class Stopper(GenStatem):
    """Stops on request; tells ``report`` its terminate with the state it was in."""

    callback_mode = "handle_event_function"

    def init(self, report: ActorRef) -> Any:
        self.report = report
        return NextState("running", NextEvent("internal", "boot"))

    def handle_event(self, event_type: Any, content: Any, state: Any) -> Any:
        if event_type == "internal":
            return NextState("booted")
        if content == "stop":
            return Stop("asked")
        if content == "stop_and_reply":
            return StopAndReply(("shutdown", "asked"), Reply(event_type[1], "bye"))
        if event_type == "cast" and content == "idle":
            return KeepState(EventTimeout(0.05, "idle"))
        if event_type == "timeout":
            return Stop(("shutdown", "idle"))
        if event_type[0] == "call":
            return KeepState(Reply(event_type[1], state), GenericTimeout("g", None))
        return None

    def terminate(self, reason: Any) -> None:
        self.report.send(("terminate", reason, self.state))
