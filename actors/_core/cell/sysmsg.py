"""System messages: what OTP's ``sys`` asks of any process, answered by the generic loop.

A system request travels as a call whose body is a `SysRequest`; the cell's
loop (`actors._core.cell.cell`) answers it ahead of the user's callbacks, so
it works the same for every behaviour (GenServer, GenStatem, supervisors),
from any process or node, and while the process is suspended.  What the
behaviour itself must say (its state, how to replace it, how to show it)
it says through four methods of `actors._core.cell.gen_server.GenServer`:
``system_get_state``, ``system_replace_state``, ``system_status`` and the
user's ``format_status``.

A process whose system state is all off has no `SysState` (the loop pays
one attribute test per message).  Once suspended, or with statistics or a
trace on, the loop hands every entry to its `SysState`: while suspended,
user messages are set aside in arrival order and handled after ``resume``;
system requests, stop requests and exit signals from the parent are not
held, as in OTP (``sys:terminate`` reaches a suspended process).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any, Callable, Protocol

from actors._core.cell.entries import M_CONTINUE, M_DOWN, M_EXIT
from actors._core.runtime.runtime import K_CALL, K_CAST, K_INFO, K_STOP, Runtime
from actors._core.wire.ref import ActorRef, From

__all__ = ["OPS", "SysCell", "SysError", "SysRequest", "SysState", "answer"]

log = logging.getLogger("actors.sys")

#: The kinds of mailbox entry a suspended process sets aside: its user messages.
_HELD = frozenset({K_CALL, K_CAST, K_INFO, M_DOWN, M_CONTINUE})


class SysError(Exception):
    """A system request the process refused or could not carry out (the process runs on)."""


class SysRequest:
    """The body of a system request: an operation of `OPS` and its argument."""

    __slots__ = ("op", "arg")

    def __init__(self, op: str, arg: Any = None) -> None:
        self.op = op
        self.arg = arg

    def __repr__(self) -> str:
        return f"SysRequest({self.op!r}, {self.arg!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (SysRequest, (self.op, self.arg))


class SysCell(Protocol):
    """What system requests need of a cell (`actors._core.cell.cell.Cell`)."""

    runtime: Runtime
    ref: ActorRef
    name: str | None
    parent: ActorRef | None
    server: Any
    lock: Any
    inflight: dict[tuple[str, int], From]
    inbox: Any
    trap_exit: bool
    alive: bool
    messages_handled: int
    idle_timeout: float | None
    sys_state: "SysState | None"

    def _handle_one(self, message: tuple[int, Any, Any]) -> None:
        """Handle one mailbox entry, system state included."""

    def _dispatch(self, message: tuple[int, Any, Any]) -> None:
        """Handle one mailbox entry with the user's callbacks."""


class _Statistics:
    __slots__ = ("start_time", "messages_in", "messages_out", "reductions", "cpu_seconds")

    def __init__(self) -> None:
        self.start_time = time.time()
        self.messages_in = 0
        self.messages_out = 0
        self.reductions = 0
        self.cpu_seconds = 0.0

    def snapshot(self) -> dict[str, Any]:
        return {
            "start_time": self.start_time,
            "current_time": time.time(),
            "messages_in": self.messages_in,
            "messages_out": self.messages_out,
            "reductions": self.reductions,
            "cpu_seconds": round(self.cpu_seconds, 6),
        }


class SysState:
    """One process's system state: suspended (with its held messages), statistics, trace."""

    __slots__ = ("held", "saved_idle", "stats", "tracer", "_who")

    def __init__(self, who: ActorRef) -> None:
        #: User messages set aside while suspended (None: running).
        self.held: deque[tuple[int, Any, Any]] | None = None
        self.saved_idle: float | None = None
        self.stats: _Statistics | None = None
        #: Called with ``(ref, event)`` for every event in and out; None: no trace.
        self.tracer: Callable[[ActorRef, tuple[Any, ...]], None] | None = None
        self._who = who

    @property
    def idle(self) -> bool:
        """Nothing on: the loop can forget this state."""
        return self.held is None and self.stats is None and self.tracer is None

    # -- the loop's hooks (actor thread) --------------------------------------------------

    def handle(self, cell: SysCell, message: tuple[int, Any, Any]) -> None:
        """One mailbox entry: a system request, a message to hold, or one to handle and record."""
        kind, body, from_ = message
        if kind == K_CALL and type(body) is SysRequest:
            answer(cell, body, from_)
            return
        held = self.held
        if held is not None and (kind in _HELD or (kind == M_EXIT and body[0] != cell.parent)):
            held.append(message)
            return
        if self.tracer is not None and not getattr(type(body), "sys_quiet", False):
            event = _event_in(kind, body, from_)
            if event is not None:
                self.event(event)
        stats = self.stats
        if stats is None:
            cell._dispatch(message)
            return
        if kind in _HELD or kind == M_EXIT:
            stats.messages_in += 1
            stats.reductions += 1
        started = time.thread_time()
        try:
            cell._dispatch(message)
        finally:
            stats.cpu_seconds += time.thread_time() - started

    def replied(self, from_: From, value: Any) -> None:
        """The process answered a call."""
        if self.stats is not None:
            self.stats.messages_out += 1
        if self.tracer is not None:
            self.event(("out", value, from_))

    def event(self, event: tuple[Any, ...]) -> None:
        """An event of the process (the loop's, or the behaviour's own: a state machine's
        transitions): traced, and counted as a reduction."""
        stats = self.stats
        if stats is not None and event[0] not in ("in", "out", "terminate"):
            stats.reductions += 1
        tracer = self.tracer
        if tracer is None:
            return
        try:
            tracer(self._who, event)
        except Exception:  # noqa: BLE001 - a broken tracer must not kill what it traces
            log.exception("sys trace of %s: the tracer raised; the trace is turned off", self._who)
            self.tracer = None


def _event_in(kind: int, body: Any, from_: Any) -> tuple[Any, ...] | None:
    if kind == K_CALL:
        return ("in", "call", body, from_)
    if kind == K_CAST:
        return ("in", "cast", body)
    if kind == K_INFO:
        return ("in", "info", body)
    if kind == M_EXIT:
        return ("in", "info", ("EXIT", body[0], body[1]))
    if kind == M_DOWN:
        return ("in", "info", ("DOWN", *body))
    if kind == M_CONTINUE:
        return ("in", "continue", body)
    if kind == K_STOP:
        return ("in", "stop", body)
    return None  # the kernel's own wake-ups


# -- the requests (actor thread) ---------------------------------------------------------


def answer(cell: SysCell, request: SysRequest, from_: From) -> None:
    """Carry out one system request and answer it ``("ok", value)`` or ``("error", SysError)``."""
    op = OPS.get(request.op)
    then: Callable[[], None] | None = None
    try:
        if op is None:
            raise SysError(f"unknown system request {request.op!r} (one of {', '.join(sorted(OPS))})")
        value = op(cell, request.arg)
        if type(value) is _Then:
            value, then = value.value, value.then
        result: tuple[str, Any] = ("ok", value)
    except SysError as exc:
        result = ("error", exc)
    except Exception as exc:  # noqa: BLE001 - a failed request is answered, never fatal
        result = ("error", SysError(f"{request.op}: {type(exc).__name__}: {exc}"))
    with cell.lock:
        cell.inflight.pop((from_.proc, from_.ref), None)
    try:
        cell.runtime.reply(from_, result)
    except Exception as exc:  # noqa: BLE001 - the value cannot be encoded for the caller's process
        cell.runtime.reply(from_, ("error", SysError(f"{request.op}: the answer cannot be sent: {exc}")))
    if then is not None:
        then()


class _Then:
    """An answer, and what to do once it is sent (``resume`` replays the held messages)."""

    __slots__ = ("value", "then")

    def __init__(self, value: Any, then: Callable[[], None]) -> None:
        self.value = value
        self.then = then


def _state_of(cell: SysCell) -> SysState:
    state = cell.sys_state
    if state is None:
        state = cell.sys_state = SysState(cell.ref)
    return state


def _settle(cell: SysCell) -> None:
    state = cell.sys_state
    if state is not None and state.idle:
        cell.sys_state = None
    _debug_changed(cell)


def _debug_changed(cell: SysCell) -> None:
    """Tell the behaviour where its own events go now (a state machine's transitions)."""
    state = cell.sys_state
    on = state is not None and (state.tracer is not None or state.stats is not None)
    cell.server.system_debug(state.event if on else None)  # type: ignore[union-attr]


def _get_state(cell: SysCell, _arg: Any) -> Any:
    return cell.server.system_get_state()


def _replace_state(cell: SysCell, fun: Any) -> Any:
    if not callable(fun):
        raise SysError(f"replace_state needs a function of the state, got {fun!r}")
    return cell.server.system_replace_state(fun)


def _get_status(cell: SysCell, _arg: Any) -> dict[str, Any]:
    server = cell.server
    cls = type(server)
    state = cell.sys_state
    status: dict[str, Any] = {
        "ref": cell.ref,
        "name": cell.name,
        "module": f"{cls.__module__}.{cls.__qualname__}",
        "behaviour": server.behaviour_name(),
        "suspended": state is not None and state.held is not None,
        "parent": cell.parent,
        "trap_exit": cell.trap_exit,
        "mailbox": cell.inbox.qsize(),
        "held": 0 if state is None or state.held is None else len(state.held),
        "handled": cell.messages_handled,
        "statistics": state is not None and state.stats is not None,
        "trace": state is not None and state.tracer is not None,
    }
    formatted = server.format_status(server.system_status())
    if not isinstance(formatted, dict):
        raise SysError(f"{cls.__name__}.format_status must return a dict, got {type(formatted).__name__}")
    status.update(formatted)
    return status


def _suspend(cell: SysCell, _arg: Any) -> str:
    state = _state_of(cell)
    if state.held is None:
        state.held = deque()
        state.saved_idle, cell.idle_timeout = cell.idle_timeout, None
    return "ok"


def _resume(cell: SysCell, _arg: Any) -> Any:
    state = cell.sys_state
    if state is None or state.held is None:
        return "ok"
    held = state.held
    state.held = None
    cell.idle_timeout = state.saved_idle
    state.saved_idle = None
    _settle(cell)

    def replay() -> None:
        # In arrival order, before anything that arrived after the resume request.
        while held and cell.alive:
            cell._handle_one(held.popleft())

    return _Then("ok", replay)


def _statistics(cell: SysCell, flag: Any) -> dict[str, Any] | None:
    if flag == "get":
        state = cell.sys_state
        return None if state is None or state.stats is None else state.stats.snapshot()
    if flag is True:
        _state_of(cell).stats = _Statistics()
    elif flag is False:
        if cell.sys_state is not None:
            cell.sys_state.stats = None
    else:
        raise SysError(f"statistics takes True, False or 'get', got {flag!r}")
    _settle(cell)
    return None


def _log_event(who: ActorRef, event: tuple[Any, ...]) -> None:
    log.info("%s %s", who.name or who.id, _short(event), extra={"event": "sys_trace", "actor": who.id})


def _short(value: Any, limit: int = 2000) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _trace(cell: SysCell, how: Any) -> None:
    if how is False or how is None:
        if cell.sys_state is not None:
            cell.sys_state.tracer = None
    elif how is True:
        _state_of(cell).tracer = _log_event
    elif isinstance(how, ActorRef):
        sink = how
        _state_of(cell).tracer = lambda who, event: sink.send(("trace", who, event))
    elif callable(how):
        _state_of(cell).tracer = how
    else:
        raise SysError(f"trace takes True, False, a function or an ActorRef, got {how!r}")
    _settle(cell)
    return None


#: The system requests, by name.
OPS: dict[str, Callable[[SysCell, Any], Any]] = {
    "get_state": _get_state,
    "replace_state": _replace_state,
    "get_status": _get_status,
    "suspend": _suspend,
    "resume": _resume,
    "statistics": _statistics,
    "trace": _trace,
}
