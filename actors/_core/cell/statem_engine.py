"""The gen_statem transition engine: OTP's event handling as a pure object.

`Engine` is what ``gen_statem.erl`` does between receiving an event and
receiving the next one, and nothing else: it calls the state callback,
reads what it returned (`NextState`, `KeepState`, `RepeatState`, `Stop`,
`StopAndReply`), carries out the transition actions (`Reply`, `postpone`,
`NextEvent`, the three kinds of timeout), runs state enter calls, replays
postponed events after a change of state and queues inserted events ahead
of everything else.  It owns no process, thread or clock: events come in
through `Engine.handle` and `Engine.timeout` with the time they arrive, and
what must happen outside (a reply, a timer to arm or to drop) goes out
through an `Effects` object.  `actors._core.cell.gen_statem` feeds it from a
GenServer's callbacks; the unit tests feed it by hand.

The rules are OTP's, read from ``gen_statem.erl``:

- after every event the event timeout is cancelled; after a change of state
  (the next state differs from the current one) the state timeout too, and
  every postponed event is queued again, oldest first;
- ``repeat_state`` and a transition to the current state keep the state: no
  replay, no cancelled state timeout (the enter call runs again on repeat);
- inserted events (`NextEvent`) go first, in the order given, then the
  replayed postponed events, then what was queued before;
- of several timeout actions of one kind (one name) the last one wins; a
  time of 0 does not arm a timer: the timeout event is queued after every
  queued event and before the next one from outside;
- a state enter call may neither change the state nor postpone nor insert
  events.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Iterable, Protocol

from actors._core.wire.reasons import Stop, noreply
from actors._core.wire.ref import From

__all__ = [
    "STALE",
    "Effects",
    "Engine",
    "EventTimeout",
    "GenericTimeout",
    "KeepState",
    "NextEvent",
    "NextState",
    "Postpone",
    "RepeatState",
    "Reply",
    "StateTimeout",
    "StatemError",
    "StopAndReply",
    "postpone",
]

_MODES = ("state_functions", "handle_event_function")
#: The event types a callback sees, besides ``("call", from_)`` and ``("timeout", name)``.
_PLAIN_TYPES = frozenset({"cast", "info", "internal", "timeout", "state_timeout"})


class StatemError(Exception):
    """A state machine broke one of OTP's rules; the machine stops with it.

    ``tag`` names the rule as OTP's error terms do
    (``bad_return_from_state_function``, ``bad_state_enter_return_from_state_function``,
    ``bad_state_enter_action_from_state_function``, ``bad_action_from_state_function``, ...),
    so a crash report says which rule, and ``detail`` says what was returned."""

    def __init__(self, tag: str, detail: str) -> None:
        self.tag = tag
        self.detail = detail
        super().__init__(f"{tag}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (StatemError, (self.tag, self.detail))


# -- what a state callback returns ------------------------------------------------------


class NextState:
    """Go to ``state`` (OTP's ``{next_state, State, Data, Actions}``), then carry out ``actions``.

    A state equal to the current one is a transition to the same state: the
    state is kept, as with `KeepState`."""

    __slots__ = ("state", "actions")

    def __init__(self, state: Any, *actions: Any) -> None:
        self.state = state
        self.actions = actions

    def __repr__(self) -> str:
        return f"NextState({', '.join(map(repr, (self.state, *self.actions)))})"


class KeepState:
    """Stay in the current state and carry out ``actions`` (``keep_state``).

    The data of a state machine is its object's attributes, so OTP's
    ``keep_state`` and ``keep_state_and_data`` are one here; a callback that
    returns None keeps state and data with no action."""

    __slots__ = ("actions",)

    def __init__(self, *actions: Any) -> None:
        self.actions = actions

    def __repr__(self) -> str:
        return f"KeepState({', '.join(map(repr, self.actions))})"


class RepeatState:
    """Stay in the current state, but run its enter call again (``repeat_state``)."""

    __slots__ = ("actions",)

    def __init__(self, *actions: Any) -> None:
        self.actions = actions

    def __repr__(self) -> str:
        return f"RepeatState({', '.join(map(repr, self.actions))})"


class StopAndReply:
    """Send ``replies`` (`Reply` actions), then stop with ``reason`` (``stop_and_reply``)."""

    __slots__ = ("reason", "replies")

    def __init__(self, reason: Any, *replies: "Reply") -> None:
        self.reason = reason
        self.replies = replies

    def __repr__(self) -> str:
        return f"StopAndReply({', '.join(map(repr, (self.reason, *self.replies)))})"


# -- transition actions -------------------------------------------------------------------


class Reply:
    """Answer the call ``from_`` with ``value`` (``{reply, From, Reply}``), at once."""

    __slots__ = ("from_", "value")

    def __init__(self, from_: From, value: Any) -> None:
        if not isinstance(from_, From):
            raise TypeError(f"Reply needs the From of a call event, got {from_!r}")
        self.from_ = from_
        self.value = value

    def __repr__(self) -> str:
        return f"Reply({self.from_!r}, {self.value!r})"


class Postpone:
    """Keep the current event and retry it after the next change of state (`postpone`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "postpone"


#: The ``postpone`` action.
postpone = Postpone()


def _check_event_type(event_type: Any) -> None:
    if type(event_type) is str:
        if event_type in _PLAIN_TYPES:
            return
    elif type(event_type) is tuple and len(event_type) == 2:
        if event_type[0] == "timeout" or (event_type[0] == "call" and isinstance(event_type[1], From)):
            return
    raise ValueError(
        f"not an event type: {event_type!r} (one of 'cast', 'info', 'internal', 'timeout', "
        "'state_timeout', ('timeout', name), ('call', from_))"
    )


class NextEvent:
    """Insert an event to handle next, before anything already queued (``next_event``).

    ``event_type`` is usually ``"internal"``; any event type may be inserted."""

    __slots__ = ("event_type", "content")

    def __init__(self, event_type: Any, content: Any = None) -> None:
        _check_event_type(event_type)
        self.event_type = event_type
        self.content = content

    def __repr__(self) -> str:
        return f"NextEvent({self.event_type!r}, {self.content!r})"


class _Update:
    __slots__ = ()

    def __repr__(self) -> str:
        return "update"


#: The time of a timeout action that changes the content of a running timer.
_UPDATE = _Update()


class _TimeoutAction:
    """A timeout action: the event it delivers (``event_type``) after ``seconds``.

    ``seconds`` is a number >= 0; ``None`` (OTP's ``infinity``) cancels the
    timer of that kind; `_UPDATE` changes a running timer's content."""

    __slots__ = ("event_type", "seconds", "content", "absolute")

    def __init__(self, event_type: Any, seconds: Any, content: Any, absolute: bool) -> None:
        if seconds is not None and seconds is not _UPDATE:
            if type(seconds) not in (int, float) or not (absolute or seconds >= 0):
                raise ValueError(f"a timeout's seconds must be a number >= 0 or None, got {seconds!r}")
        self.event_type = event_type
        self.seconds = seconds
        self.content = content
        self.absolute = absolute

    def __repr__(self) -> str:
        at = ", absolute=True" if self.absolute else ""
        return f"{type(self).__name__}({self.event_type!r}, {self.seconds!r}, {self.content!r}{at})"


class EventTimeout(_TimeoutAction):
    """Deliver ``("timeout", content)`` after ``seconds`` unless another event comes first.

    Any event cancels it, inserted and replayed ones too.  ``absolute=True``:
    ``seconds`` is a deadline on the clock the events' times are read from
    (``time.monotonic()`` in a running machine)."""

    __slots__ = ()

    def __init__(self, seconds: float | None, content: Any = None, *, absolute: bool = False) -> None:
        super().__init__("timeout", seconds, content, absolute)

    @staticmethod
    def update(content: Any) -> "EventTimeout":
        """Change the content of the running event timeout (none running: it fires at once)."""
        return EventTimeout(_UPDATE, content)  # type: ignore[arg-type]  # the marker travels as the time

    @staticmethod
    def cancel() -> "EventTimeout":
        return EventTimeout(None)


class StateTimeout(_TimeoutAction):
    """Deliver ``("state_timeout", content)`` after ``seconds`` unless the state changes first.

    Setting it again restarts it; ``None`` or `StateTimeout.cancel` stops it."""

    __slots__ = ()

    def __init__(self, seconds: float | None, content: Any = None, *, absolute: bool = False) -> None:
        super().__init__("state_timeout", seconds, content, absolute)

    @staticmethod
    def update(content: Any) -> "StateTimeout":
        """Change the content of the running state timeout (none running: it fires at once)."""
        return StateTimeout(_UPDATE, content)  # type: ignore[arg-type]

    @staticmethod
    def cancel() -> "StateTimeout":
        return StateTimeout(None)


class GenericTimeout(_TimeoutAction):
    """Deliver ``(("timeout", name), content)`` after ``seconds``; only its own
    cancel (or a new one of the same name) stops it, whatever the events and states."""

    __slots__ = ()

    def __init__(self, name: Any, seconds: float | None, content: Any = None, *, absolute: bool = False) -> None:
        super().__init__(("timeout", name), seconds, content, absolute)

    @staticmethod
    def update(name: Any, content: Any) -> "GenericTimeout":
        """Change the content of the running timeout ``name`` (none running: it fires at once)."""
        return GenericTimeout(name, _UPDATE, content)  # type: ignore[arg-type]

    @staticmethod
    def cancel(name: Any) -> "GenericTimeout":
        return GenericTimeout(name, None)


# -- the engine --------------------------------------------------------------------------


class Effects(Protocol):
    """What the engine asks of the world around it."""

    def reply(self, from_: From, value: Any) -> None:
        """Send a call's reply now."""

    def start_timer(self, token: int, seconds: float, deadline: float) -> None:
        """Arm a timer for ``seconds`` from now (``deadline`` on the engine's clock);
        when it runs out, call `Engine.timeout` with ``token``."""

    def cancel_timer(self, token: int) -> None:
        """Drop the timer armed with ``token`` (a late one is recognised as stale anyway)."""


class _StaleTimer:
    __slots__ = ()

    def __repr__(self) -> str:
        return "STALE"


#: What `Engine.timeout` returns for a token that is no longer armed (cancelled, restarted).
STALE: Any = _StaleTimer()


class Engine:
    """One state machine's state, postponed events, event queue and timers.

    ``callbacks`` is the object whose methods are the state callbacks: one
    method per state (``state_functions``: ``callbacks.<state>(event_type,
    content)``) or ``callbacks.handle_event(event_type, content, state)``
    (``handle_event_function``, where a state may be any value).  ``reserved``
    names methods that are not states (the behaviour's own).

    Every entry point returns None while the machine runs, or the `Stop` it
    ended with; a callback's exception goes through untouched.
    """

    __slots__ = (
        "_callbacks",
        "_effects",
        "_handle_event",
        "_functions",
        "_reserved",
        "state_enter",
        "state",
        "postponed",
        "queue",
        "timers",
        "_t0q",
        "_tokens",
        "now",
        "_clock",
        "debug",
    )

    def __init__(
        self,
        callbacks: Any,
        effects: Effects,
        *,
        mode: str = "state_functions",
        state_enter: bool = False,
        reserved: Iterable[str] = (),
        clock: Callable[[], float] | None = None,
    ) -> None:
        if mode not in _MODES:
            raise StatemError("bad_callback_mode", f"{mode!r}: expected 'state_functions' or 'handle_event_function'")
        self._callbacks = callbacks
        self._effects = effects
        self._handle_event: Callable[[Any, Any, Any], Any] | None = (
            callbacks.handle_event if mode == "handle_event_function" else None
        )
        self._functions: dict[str, Callable[[Any, Any], Any]] = {}
        self._reserved = frozenset(reserved)
        self.state_enter = bool(state_enter)
        self.state: Any = None
        #: Postponed events, oldest first: ``(event_type, content)``.
        self.postponed: list[tuple[Any, Any]] = []
        #: Events to handle before the next one from outside: inserted, replayed, ...
        self.queue: deque[tuple[Any, Any]] = deque()
        #: Running timeouts by event type: ``[token, content, deadline]`` (token 0: a zero timeout).
        self.timers: dict[Any, list[Any]] = {}
        self._t0q: list[Any] = []  # the event types of zero timeouts, in the order they fire
        self._tokens = 0
        #: The time of the event in hand, when its caller gave one.
        self.now: float | None = None
        #: Read only when a timeout is armed without a time given (the caller's clock).
        self._clock = clock
        #: Called with each transition, for tracing (``("consume", type, content, state, next)``,
        #: ``("postpone", ...)``, ``("enter", old, new)``); None: not traced.
        self.debug: Callable[[tuple[Any, ...]], None] | None = None

    # -- entry points ----------------------------------------------------------------

    def check_state(self, state: Any) -> None:
        """Raise `StatemError` when ``state`` has no callback (``state_functions``)."""
        if self._handle_event is None:
            self._function(state)

    def enter(self, state: Any, actions: Iterable[Any], now: float | None = None) -> Stop | None:
        """Start in ``state`` with init's ``actions`` (its enter call first, when configured)."""
        self.now = now
        self.state = state
        stop = self._transition(None, state, state, True, tuple(actions))
        if stop is None and (self.queue or self._t0q):
            stop = self._drain()
        return stop

    def handle(self, event_type: Any, content: Any, now: float | None = None) -> Stop | None:
        """One event from outside, then every event it queued.

        ``now`` is when it came; left out, the clock given to the engine is
        read, and only if a timeout must be armed.  The body is `_event`'s,
        written out: this is the path every message of a machine takes."""
        self.now = now
        state = self.state
        handle_event = self._handle_event
        if handle_event is not None:
            result = handle_event(event_type, content, state)
        else:
            try:
                function = self._functions[state]
            except (KeyError, TypeError):
                function = self._function(state)
            result = function(event_type, content)
        kind = type(result)
        if result is None:
            if self.debug is not None:
                self.debug(("consume", event_type, content, state, state))
            if "timeout" in self.timers:
                self._cancel("timeout")
            stop = None
        elif kind is NextState:
            next_state = result.state
            if result.actions or self.state_enter or self.timers or self.postponed or self.debug is not None:
                stop = self._transition((event_type, content), state, next_state, next_state != state, result.actions)
            else:  # a bare change of state: nothing to cancel, replay or enter
                self.state = next_state
                stop = None
        elif kind is KeepState:
            stop = self._transition((event_type, content), state, state, False, result.actions)
        else:
            stop = self._result(event_type, content, state, result)
        if stop is None and (self.queue or self._t0q):
            stop = self._drain()
        return stop

    def timeout(self, token: int, now: float | None = None) -> Any:
        """The timer armed with ``token`` ran out: its timeout event, or `STALE`
        when that timer was cancelled or restarted meanwhile (nothing happens)."""
        for event_type, entry in self.timers.items():
            if entry[0] == token:
                del self.timers[event_type]
                return self.handle(event_type, entry[1], now)
        return STALE

    def running_timeouts(self, now: float | None = None) -> list[tuple[Any, Any, float]]:
        """``(event_type, content, seconds left)`` of every running timeout, at ``now``
        (left out: the time of the last event)."""
        if now is not None:
            self.now = now
        now = self._time()
        return [(t, e[1], max(0.0, e[2] - now)) for t, e in self.timers.items()]

    def _time(self) -> float:
        if self.now is not None:
            return self.now
        if self._clock is None:
            raise StatemError("no_clock", "a timeout needs the time: pass now, or give the engine a clock")
        self.now = self._clock()
        return self.now

    # -- the loop ----------------------------------------------------------------------

    def _drain(self) -> Stop | None:
        queue = self.queue
        t0q = self._t0q
        while True:
            if queue:
                event_type, content = queue.popleft()
            elif t0q:
                event_type = t0q.pop(0)
                content = self.timers.pop(event_type)[1]
            else:
                return None
            stop = self._event(event_type, content)
            if stop is not None:
                return stop

    def _function(self, state: Any) -> Callable[[Any, Any], Any]:
        try:
            return self._functions[state]
        except (KeyError, TypeError):
            pass
        if type(state) is not str or not state.isidentifier() or state.startswith("_") or state in self._reserved:
            raise StatemError(
                "bad_state",
                f"{state!r}: in state_functions mode a state is the name of a method of the machine "
                "(an identifier, no leading underscore, not one of the behaviour's own methods)",
            )
        function = getattr(self._callbacks, state, None)
        if not callable(function):
            raise StatemError("undef_state_function", f"{type(self._callbacks).__name__} has no method {state!r}")
        self._functions[state] = function
        return function

    def _call(self, state: Any, event_type: Any, content: Any) -> Any:
        handle_event = self._handle_event
        if handle_event is not None:
            return handle_event(event_type, content, state)
        try:
            function = self._functions[state]
        except (KeyError, TypeError):
            function = self._function(state)
        return function(event_type, content)

    def _event(self, event_type: Any, content: Any) -> Stop | None:
        state = self.state
        result = self._call(state, event_type, content)
        if result is None:  # keep state and data, no action: the common case, kept short
            if self.debug is not None:
                self.debug(("consume", event_type, content, state, state))
            if "timeout" in self.timers:
                self._cancel("timeout")
            return None
        return self._result(event_type, content, state, result)

    def _result(self, event_type: Any, content: Any, state: Any, result: Any) -> Stop | None:
        kind = type(result)
        if kind is NextState:
            next_state = result.state
            return self._transition((event_type, content), state, next_state, next_state != state, result.actions)
        if kind is KeepState:
            return self._transition((event_type, content), state, state, False, result.actions)
        if kind is RepeatState:
            return self._transition((event_type, content), state, state, True, result.actions)
        if kind is Stop or kind is StopAndReply:
            return self._stop(result)
        raise StatemError("bad_return_from_state_function", f"state {state!r} returned {result!r}")

    def _transition(
        self,
        event: tuple[Any, Any] | None,
        state: Any,
        next_state: Any,
        call_enter: bool,
        actions: tuple[Any, ...],
    ) -> Stop | None:
        """Carry out a callback's result: actions, enter calls, then the change of state.

        ``event`` is the event in hand (None for init's actions, which may not postpone)."""
        acc = _Collected() if actions or (call_enter and self.state_enter) else None
        if actions:
            self._actions(actions, True, acc)  # type: ignore[arg-type]
            if event is None and acc.postpone:  # type: ignore[union-attr]
                raise StatemError("bad_action_from_state_function", "postpone from init: there is no event to postpone")
        self.state = next_state
        while call_enter and self.state_enter:
            if self.debug is not None:
                self.debug(("enter", state, next_state))
            result = self._call(next_state, "enter", state)
            call_enter = False
            if result is None:
                continue
            kind = type(result)
            if kind is NextState:
                if result.state != next_state:
                    raise StatemError(
                        "bad_state_enter_return_from_state_function",
                        f"the enter call of state {next_state!r} returned {result!r}: an enter call may not "
                        "change the state",
                    )
                actions = result.actions
            elif kind is KeepState:
                actions = result.actions
            elif kind is RepeatState:
                actions = result.actions
                call_enter = True
            elif kind is Stop or kind is StopAndReply:
                return self._stop(result)
            else:
                raise StatemError(
                    "bad_return_from_state_function", f"the enter call of state {next_state!r} returned {result!r}"
                )
            if actions:
                self._actions(actions, False, acc)  # type: ignore[arg-type]
        postponing = acc is not None and acc.postpone
        if event is not None:
            if self.debug is not None:
                self.debug(("postpone" if postponing else "consume", event[0], event[1], state, next_state))
            if postponing:
                self.postponed.append(event)
        timers = self.timers
        if next_state == state:
            if "timeout" in timers:
                self._cancel("timeout")
        else:
            postponed = self.postponed
            if postponed:
                self.queue.extendleft(reversed(postponed))
                self.postponed = []
            if "state_timeout" in timers:
                self._cancel("state_timeout")
            if "timeout" in timers:
                self._cancel("timeout")
        if acc is not None:
            if acc.timeouts:
                self._start(acc.timeouts)
            if acc.next_events:
                self.queue.extendleft(reversed(acc.next_events))
        return None

    def _actions(self, actions: Iterable[Any], state_call: bool, acc: "_Collected") -> None:
        for action in actions:
            kind = type(action)
            if kind is Reply:
                self._effects.reply(action.from_, action.value)
            elif isinstance(action, _TimeoutAction):
                if acc.timeouts is None:
                    acc.timeouts = [action]
                else:
                    acc.timeouts.append(action)
            elif kind is Postpone:
                if not state_call:
                    raise StatemError(
                        "bad_state_enter_action_from_state_function", "postpone: an enter call has no event to postpone"
                    )
                acc.postpone = True
            elif kind is NextEvent:
                if not state_call:
                    raise StatemError(
                        "bad_state_enter_action_from_state_function", f"{action!r}: an enter call may not insert events"
                    )
                if acc.next_events is None:
                    acc.next_events = []
                acc.next_events.append((action.event_type, action.content))
            elif kind is list or kind is tuple:
                self._actions(action, state_call, acc)
            else:
                raise StatemError("bad_action_from_state_function", f"not a transition action: {action!r}")

    def _start(self, timeouts: list[_TimeoutAction]) -> None:
        """Start, restart, update or cancel timers: the last action of each kind wins."""
        if len(timeouts) > 1:
            last: dict[Any, _TimeoutAction] = {}
            for action in timeouts:
                last.pop(action.event_type, None)  # kept in the order of the last ones
                last[action.event_type] = action
            timeouts = list(last.values())
        timers = self.timers
        now = self._time()
        for action in timeouts:
            event_type = action.event_type
            seconds = action.seconds
            if seconds is None:
                self._cancel(event_type)
                continue
            if seconds is _UPDATE:
                entry = timers.get(event_type)
                if entry is not None:
                    entry[1] = action.content
                else:
                    timers[event_type] = [0, action.content, now]
                    self._t0q.append(event_type)
                continue
            self._cancel(event_type)
            if action.absolute:
                seconds = max(0.0, seconds - now)
            elif seconds == 0:
                timers[event_type] = [0, action.content, now]
                self._t0q.append(event_type)
                continue
            self._tokens += 1
            token = self._tokens
            timers[event_type] = [token, action.content, now + seconds]
            self._effects.start_timer(token, seconds, now + seconds)

    def _cancel(self, event_type: Any) -> None:
        entry = self.timers.pop(event_type, None)
        if entry is None:
            return
        if entry[0]:
            self._effects.cancel_timer(entry[0])
        else:
            self._t0q.remove(event_type)

    def _stop(self, result: Stop | StopAndReply) -> Stop:
        if isinstance(result, StopAndReply):
            for reply in result.replies:
                if type(reply) is not Reply:
                    raise StatemError("bad_reply_action_from_state_function", f"{reply!r} in {result!r}")
                self._effects.reply(reply.from_, reply.value)
            return Stop(result.reason)
        if result.reply is not noreply:
            raise StatemError(
                "bad_return_from_state_function",
                f"{result!r}: a state machine replies with StopAndReply(reason, Reply(from_, value))",
            )
        return result


class _Collected:
    """What the actions of one transition (its state call and enter calls) add up to."""

    __slots__ = ("postpone", "next_events", "timeouts")

    def __init__(self) -> None:
        self.postpone = False
        self.next_events: list[tuple[Any, Any]] | None = None  # made when there is one
        self.timeouts: list[_TimeoutAction] | None = None
