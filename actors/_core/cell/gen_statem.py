"""The gen_statem behaviour: OTP's state machine, as a GenServer feeding a pure engine.

`GenStatem` is a `GenServer`: same processes, placement, links, monitors,
supervision, calls and casts from anywhere, crash reports and system
messages.  Its ``handle_call``/``handle_cast``/``handle_info`` turn each
message into an event of OTP's types and hand it to the transition engine
(`actors._core.cell.statem_engine.Engine`), which holds the state, the
postponed events and the queue, and runs the user's state callbacks; what
it asks for outside -- replies, timers -- this module carries out with the
kernel's own calls.

Timers: the engine names each timeout it arms with a fresh token and
forgets it when the timeout is cancelled.  The kernel's timers are
cancelled lazily (a cancelled entry stays in the process's heap until its
deadline), and a machine that sets an event timeout on every event would
fill that heap, so the machine keeps its timeouts' deadlines itself and
holds at most one kernel timer, due at the earliest of them (`_Alarm`).
When it rings, every timeout whose deadline has passed goes to the engine
in deadline order; a ring superseded by an earlier timer, or tokens
cancelled meanwhile, are recognised and dropped.
"""

from __future__ import annotations

from functools import partial
from time import monotonic
from typing import Any, Callable, ClassVar

from actors._core.cell.gen_server import GenServer
from actors._core.cell.statem_engine import (
    STALE,
    Engine,
    KeepState,
    NextState,
    RepeatState,
    StatemError,
    StopAndReply,
)
from actors._core.cell.sysmsg import SysError
from actors._core.runtime.runtime import Timer
from actors._core.wire.reasons import Continue, Stop, Timeout, ignore, noreply
from actors._core.wire.ref import From

__all__ = ["GenStatem"]


class _Ring:
    """The message a machine's kernel timer delivers to it: ring number ``n``."""

    __slots__ = ("n",)
    #: Not traced as a message in (`actors._core.cell.sysmsg`): the timeout it brings is.
    sys_quiet = True

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"<statem timer {self.n}>"


class _Enter:
    __slots__ = ()
    sys_quiet = True


#: The ``handle_continue`` argument that starts the engine once ``spawn`` has returned.
_ENTER = _Enter()


class _Alarm:
    """The engine's `Effects`: replies through the cell, timeouts on one kernel timer."""

    __slots__ = ("_server", "deadlines", "_timer", "_due", "_rings")

    def __init__(self, server: "GenStatem") -> None:
        self._server = server
        #: Deadline of each armed token (the engine's clock: `time.monotonic`).
        self.deadlines: dict[int, float] = {}
        self._timer: Timer | None = None
        self._due = 0.0  # when the kernel timer rings
        self._rings = 0  # the number of the ring that counts

    def reply(self, from_: From, value: Any) -> None:
        self._server.reply(from_, value)

    def start_timer(self, token: int, seconds: float, deadline: float) -> None:
        due = deadline  # the engine's clock is `time.monotonic`
        self.deadlines[token] = due
        if self._timer is None or due < self._due:
            self._arm(due, seconds)

    def cancel_timer(self, token: int) -> None:
        # The kernel timer is left to ring: cancelling it would leave its heap entry
        # behind anyway, and it re-arms for what is still due then.
        self.deadlines.pop(token, None)

    def _arm(self, due: float, seconds: float) -> None:
        server = self._server
        if self._timer is not None:
            server.cancel_timer(self._timer)
        self._rings += 1
        self._due = due
        self._timer = server.send_after(seconds, _Ring(self._rings))

    def rang(self, ring: _Ring) -> list[int] | None:
        """The tokens now due, earliest first (None: a superseded ring); re-arms for the rest."""
        if ring.n != self._rings:
            return None
        self._timer = None
        now = monotonic()
        deadlines = self.deadlines
        due = sorted((d, t) for t, d in deadlines.items() if d <= now)
        for _, token in due:
            del deadlines[token]
        self.rearm()
        return [token for _, token in due]

    def rearm(self) -> None:
        """Arm the kernel timer for the earliest deadline, if none is armed."""
        if self._timer is None and self.deadlines:
            due = min(self.deadlines.values())
            self._arm(due, max(0.0, due - monotonic()))

    def pending(self) -> int:
        return len(self.deadlines)


class GenStatem(GenServer):
    """OTP's gen_statem.  Subclass it; ``init(*args, **kwargs)`` returns the
    first state, or ``NextState(state, *actions)``, or `actors.ignore` /
    `actors.Stop` as a GenServer's does.

    ``callback_mode = "state_functions"`` (the default): each state is a
    method name, called as ``self.<state>(event_type, content)``.
    ``callback_mode = "handle_event_function"``: one method,
    ``handle_event(event_type, content, state)``, and a state may be any
    value.  ``state_enter = True`` calls the state's callback with
    ``("enter", old_state)`` on every change of state (and on the first).

    Event types are OTP's: ``("call", from_)``, ``"cast"``, ``"info"``,
    ``"internal"``, ``"timeout"``, ``"state_timeout"``, ``("timeout", name)``,
    ``"enter"``.  A callback returns None (keep state and data),
    `NextState`, `KeepState`, `RepeatState`, `actors.Stop` or `StopAndReply`;
    actions are `Reply`, `postpone`, `NextEvent`, `EventTimeout`,
    `StateTimeout` and `GenericTimeout`.  The data is the object's attributes.
    ``terminate(reason)`` runs as a GenServer's does; ``self.state`` is the
    current state.  See docs/statem.md.
    """

    #: "state_functions" or "handle_event_function".
    callback_mode: ClassVar[str] = "state_functions"
    #: Call each state's callback with ("enter", old_state) when the state changes.
    state_enter: ClassVar[bool] = False

    _engine: Engine
    _alarm: _Alarm

    @property
    def state(self) -> Any:
        """The current state."""
        return self._engine.state

    # -- the GenServer callbacks: events to the engine -------------------------------------

    def _gen_init(self, *args: Any, **kwargs: Any) -> Any:
        self._alarm = _Alarm(self)
        self._engine = Engine(
            self,
            self._alarm,
            mode=self.callback_mode,
            state_enter=self.state_enter,
            reserved=_RESERVED,
            clock=monotonic,
        )
        result = self.init(*args, **kwargs)
        if result is ignore or isinstance(result, Stop):
            return result
        if type(result) is NextState:
            state, actions = result.state, result.actions
        elif result is None or isinstance(result, (KeepState, RepeatState, StopAndReply, Continue, Timeout)):
            raise StatemError(
                "bad_return_from_init",
                f"{type(self).__name__}.init returned {result!r}: return the first state, or NextState(state, *actions)",
            )
        else:
            state, actions = result, ()
        self._engine.check_state(state)
        self._engine.state = state
        self._first = actions
        # Casts go straight to the engine: no frame of ours on the path of every cast.
        self.handle_cast = partial(self._engine.handle, "cast")  # type: ignore[method-assign]
        # The first state's enter call and init's actions run once spawn has returned,
        # before any message (OTP acknowledges the start before entering its loop).
        return Continue(_ENTER)

    def handle_continue(self, arg: Any) -> Any:
        if arg is not _ENTER:
            return super().handle_continue(arg)
        actions, self._first = self._first, ()
        return self._engine.enter(self._engine.state, actions)

    def handle_call(self, request: Any, from_: From) -> Any:
        stop = self._engine.handle(("call", from_), request)
        return noreply if stop is None else stop

    def handle_cast(self, request: Any) -> Any:
        return self._engine.handle("cast", request)

    def handle_info(self, message: Any) -> Any:
        if type(message) is _Ring:
            return self._rang(message)
        return self._engine.handle("info", message)

    def _rang(self, ring: _Ring) -> Stop | None:
        tokens = self._alarm.rang(ring)
        if not tokens:
            return None
        engine = self._engine
        for token in tokens:
            stop = engine.timeout(token)
            if stop is not STALE and stop is not None:
                return stop
        return None

    # -- system messages --------------------------------------------------------------------

    def system_get_state(self) -> Any:
        """OTP's ``{State, Data}``: the current state and the public attributes."""
        data = super().system_get_state()
        data.pop("handle_cast", None)  # the shortcut to the engine set by `_gen_init`: not data
        return (self._engine.state, data)

    def system_replace_state(self, fun: Callable[[Any], Any]) -> Any:
        """``fun((state, data))`` returns the new ``(state, data)``; the state
        changes without an enter call and the timers run on, as in OTP."""
        current = self.system_get_state()
        new = fun(current)
        if not (isinstance(new, tuple) and len(new) == 2):
            raise SysError(f"replace_state: a state machine's function must return (state, data), got {new!r}")
        state, data = new
        try:
            self._engine.check_state(state)
        except StatemError as exc:
            raise SysError(f"replace_state: {exc}") from None
        shortcut = self.handle_cast
        super().system_replace_state(lambda _old: {**data, "handle_cast": shortcut})
        self._engine.state = state
        return self.system_get_state()

    def system_status(self) -> dict[str, Any]:
        engine = self._engine
        state, data = self.system_get_state()
        return {
            "state": state,
            "data": data,
            "postponed": list(engine.postponed),
            "queued": list(engine.queue),
            "timeouts": engine.running_timeouts(monotonic()),
        }

    def system_debug(self, sink: Callable[[tuple[Any, ...]], None] | None) -> None:
        self._engine.debug = sink

    def behaviour_name(self) -> str:
        return "gen_statem"


#: Method names that are not states: the behaviour's own.
_RESERVED = frozenset(name for cls in GenStatem.__mro__ for name in vars(cls))
