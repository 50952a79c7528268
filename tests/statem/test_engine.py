"""The gen_statem transition engine without processes: events in, effects out.

Each rule is OTP's, as ``gen_statem.erl`` and its user's guide state it;
time is a number the test passes in, timers are tokens the test fires.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from actors import Stop
from actors._core.cell.statem_engine import STALE, Engine
from actors._core.wire.ref import From
from actors.gen_statem import (
    EventTimeout,
    GenericTimeout,
    KeepState,
    NextEvent,
    NextState,
    RepeatState,
    Reply,
    StatemError,
    StateTimeout,
    StopAndReply,
    postpone,
)

pytestmark = pytest.mark.timeout(10)


class Effects:
    """Records what the engine asks for; timers are fired by the test."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.armed: dict[int, float] = {}

    def reply(self, from_: From, value: Any) -> None:
        self.log.append(("reply", from_.ref, value))

    def start_timer(self, token: int, seconds: float, deadline: float) -> None:
        self.armed[token] = seconds
        self.log.append(("start", token, seconds))

    def cancel_timer(self, token: int) -> None:
        del self.armed[token]
        self.log.append(("cancel", token))


class Machine:
    """handle_event_function: ``rules(event_type, content, state)``; every callback is logged."""

    def __init__(self, rules: Callable[[Any, Any, Any], Any]) -> None:
        self.rules = rules
        self.seen: list[tuple[Any, Any, Any]] = []

    def handle_event(self, event_type: Any, content: Any, state: Any) -> Any:
        self.seen.append((state, event_type, content))
        return self.rules(event_type, content, state)


def start(rules, state="a", actions=(), state_enter=False, now=0.0):
    machine = Machine(rules)
    effects = Effects()
    engine = Engine(machine, effects, mode="handle_event_function", state_enter=state_enter)
    assert engine.enter(state, actions, now) is None
    return engine, machine, effects


def call(n: int) -> tuple[str, From]:
    return ("call", From("p", n, None))


def events(machine: Machine) -> list[tuple[Any, Any, Any]]:
    got, machine.seen = machine.seen, []
    return got


# -- callback modes and results -------------------------------------------------------------


class Door:
    """state_functions: one method per state."""

    def locked(self, event_type, content):
        if event_type == "cast" and content == "open":
            return NextState("opened")
        if type(event_type) is tuple and event_type[0] == "call":
            return KeepState(Reply(event_type[1], "locked"))
        return None

    def opened(self, event_type, content):
        if type(event_type) is tuple:
            return NextState("locked", Reply(event_type[1], "was open"))
        return None

    def init(self):  # not a state: a reserved name
        return None


def test_state_functions_call_a_method_per_state():
    effects = Effects()
    engine = Engine(Door(), effects, reserved={"init"})
    engine.enter("locked", (), 0.0)
    assert engine.handle(call(1), "status", 0.0) is None
    assert engine.handle("cast", "open", 0.0) is None
    assert engine.state == "opened"
    assert engine.handle(call(2), "status", 0.0) is None
    assert engine.state == "locked"
    assert effects.log == [("reply", 1, "locked"), ("reply", 2, "was open")]


@pytest.mark.parametrize("bad", ["nosuch", "_private", "init", 3, ("a", 1)])
def test_state_functions_refuse_what_is_not_a_state_method(bad):
    engine = Engine(Door(), Effects(), reserved={"init"})
    engine.enter("locked", (), 0.0)
    with pytest.raises(StatemError) as info:
        engine.check_state(bad)
    assert info.value.tag in ("bad_state", "undef_state_function")


def test_handle_event_function_takes_any_value_as_state():
    def rules(et, c, s):
        return NextState((s[0] + 1, frozenset({c})))

    engine, machine, _ = start(rules, state=(0, frozenset()))
    engine.handle("cast", "x", 0.0)
    engine.handle("info", "y", 0.0)
    assert engine.state == (2, frozenset({"y"}))
    assert events(machine) == [((0, frozenset()), "cast", "x"), ((1, frozenset({"x"})), "info", "y")]


def test_unknown_callback_mode_is_an_error():
    with pytest.raises(StatemError) as info:
        Engine(Door(), Effects(), mode="state_function")
    assert info.value.tag == "bad_callback_mode"


@pytest.mark.parametrize("bad", ["next", 42, ("next_state", "b"), [NextState("b")]])
def test_a_bad_return_is_an_error(bad):
    engine, _, _ = start(lambda et, c, s: bad)
    with pytest.raises(StatemError) as info:
        engine.handle("cast", 1, 0.0)
    assert info.value.tag == "bad_return_from_state_function"


def test_a_bad_action_is_an_error():
    engine, _, _ = start(lambda et, c, s: KeepState("reply"))
    with pytest.raises(StatemError) as info:
        engine.handle("cast", 1, 0.0)
    assert info.value.tag == "bad_action_from_state_function"


def test_actions_may_come_in_lists():
    def rules(et, c, s):
        if et == "cast":
            return KeepState([NextEvent("internal", 1), [NextEvent("internal", 2)]], NextEvent("internal", 3))
        return None

    engine, machine, _ = start(rules)
    engine.handle("cast", 0, 0.0)
    assert [e[2] for e in events(machine)] == [0, 1, 2, 3]


# -- stop ----------------------------------------------------------------------------------


def test_stop_returns_the_stop():
    engine, _, _ = start(lambda et, c, s: Stop("bye"))
    stop = engine.handle("cast", 1, 0.0)
    assert isinstance(stop, Stop) and stop.reason == "bye"


def test_stop_and_reply_replies_first_then_stops():
    def rules(et, c, s):
        return StopAndReply("done", Reply(et[1], "a"), Reply(From("p", 9, None), "b"))

    engine, _, effects = start(rules)
    stop = engine.handle(call(1), "stop", 0.0)
    assert stop is not None and stop.reason == "done"
    assert effects.log == [("reply", 1, "a"), ("reply", 9, "b")]


def test_stop_and_reply_takes_only_replies():
    engine, _, _ = start(lambda et, c, s: StopAndReply("done", postpone))
    with pytest.raises(StatemError) as info:
        engine.handle("cast", 1, 0.0)
    assert info.value.tag == "bad_reply_action_from_state_function"


def test_stop_with_a_gen_server_reply_is_an_error():
    engine, _, _ = start(lambda et, c, s: Stop("x", reply=1))
    with pytest.raises(StatemError):
        engine.handle("cast", 1, 0.0)


def test_a_stop_ends_the_queue():
    def rules(et, c, s):
        if et == "cast":
            return KeepState(NextEvent("internal", "stop"), NextEvent("internal", "never"))
        return Stop("stopped") if c == "stop" else None

    engine, machine, _ = start(rules)
    assert engine.handle("cast", 0, 0.0).reason == "stopped"
    assert [e[2] for e in events(machine)] == [0, "stop"]


# -- state enter calls ------------------------------------------------------------------------


def enter_rules(et, c, s):
    if et == "enter":
        return None
    if c == "same":
        return NextState(s)
    if c == "keep":
        return KeepState()
    if c == "repeat":
        return RepeatState()
    return NextState(c)


def test_enter_call_on_the_first_state_with_itself_as_old_state():
    _, machine, _ = start(enter_rules, state_enter=True)
    assert events(machine) == [("a", "enter", "a")]


def test_enter_call_on_a_change_of_state_only():
    engine, machine, _ = start(enter_rules, state_enter=True)
    events(machine)
    for content in ("keep", "same", "b", "b"):
        engine.handle("cast", content, 0.0)
    assert events(machine) == [
        ("a", "cast", "keep"),
        ("a", "cast", "same"),
        ("a", "cast", "b"),
        ("b", "enter", "a"),
        ("b", "cast", "b"),
    ]


def test_repeat_state_runs_the_enter_call_again():
    engine, machine, _ = start(enter_rules, state_enter=True)
    events(machine)
    engine.handle("cast", "repeat", 0.0)
    assert events(machine) == [("a", "cast", "repeat"), ("a", "enter", "a")]
    assert engine.state == "a"


def test_no_enter_calls_unless_asked():
    engine, machine, _ = start(enter_rules)
    engine.handle("cast", "b", 0.0)
    engine.handle("cast", "repeat", 0.0)
    assert events(machine) == [("a", "cast", "b"), ("b", "cast", "repeat")]


def test_an_enter_call_may_not_change_the_state():
    def rules(et, c, s):
        return NextState("c") if et == "enter" else NextState(c)

    engine, _, _ = start(rules, state_enter=False)
    engine.state_enter = True
    with pytest.raises(StatemError) as info:
        engine.handle("cast", "b", 0.0)
    assert info.value.tag == "bad_state_enter_return_from_state_function"


def test_an_enter_call_may_return_next_state_of_its_own_state():
    def rules(et, c, s):
        return NextState(s, StateTimeout(5, "t")) if et == "enter" else NextState(c)

    engine, _, effects = start(rules, state_enter=True)
    engine.handle("cast", "b", 0.0)
    assert engine.state == "b" and "state_timeout" in engine.timers


@pytest.mark.parametrize("action", [postpone, NextEvent("internal", 1)])
def test_an_enter_call_may_not_postpone_or_insert_events(action):
    def rules(et, c, s):
        return KeepState(action) if et == "enter" else NextState(c)

    engine, _, _ = start(lambda et, c, s: None, state_enter=True)
    engine._handle_event = Machine(rules).handle_event
    with pytest.raises(StatemError) as info:
        engine.handle("cast", "b", 0.0)
    assert info.value.tag == "bad_state_enter_action_from_state_function"


def test_an_enter_call_may_reply_and_set_timeouts():
    def rules(et, c, s):
        if et == "enter" and s == "b":
            return KeepState(Reply(From("p", 7, None), "entered"), StateTimeout(1, "st"), GenericTimeout("g", 2))
        return NextState(c)

    engine, _, effects = start(rules, state_enter=True)
    engine.handle("cast", "b", 0.0)
    assert effects.log == [("reply", 7, "entered"), ("start", 1, 1), ("start", 2, 2)]


def test_init_actions_may_insert_events_not_postpone():
    engine, machine, _ = start(lambda et, c, s: None, actions=[NextEvent("internal", "go")])
    assert events(machine) == [("a", "internal", "go")]
    with pytest.raises(StatemError):
        start(lambda et, c, s: None, actions=[postpone])


# -- postpone ----------------------------------------------------------------------------------


def postponing(et, c, s):
    """In ``a`` every ``job`` is postponed; ``go`` moves to ``b``, where jobs are handled."""
    if c == "go":
        return NextState("b")
    if c == "back":
        return NextState("a")
    if c in ("keep", "same", "repeat"):
        return {"keep": KeepState(), "same": NextState(s), "repeat": RepeatState()}[c]
    if s == "a" and isinstance(c, tuple) and c[0] == "job":
        return KeepState(postpone)
    return None


def test_postponed_events_are_replayed_in_order_after_a_change_of_state():
    engine, machine, _ = start(postponing)
    for i in range(3):
        engine.handle("cast", ("job", i), 0.0)
    engine.handle("cast", "go", 0.0)
    assert [(s, c) for s, _, c in events(machine)] == [
        ("a", ("job", 0)),
        ("a", ("job", 1)),
        ("a", ("job", 2)),
        ("a", "go"),
        ("b", ("job", 0)),
        ("b", ("job", 1)),
        ("b", ("job", 2)),
    ]
    assert engine.postponed == []


@pytest.mark.parametrize("how", ["keep", "same", "repeat"])
def test_postponed_events_are_not_replayed_without_a_change_of_state(how):
    engine, machine, _ = start(postponing, state_enter=True)
    engine.handle("cast", ("job", 0), 0.0)
    events(machine)
    engine.handle("cast", how, 0.0)
    engine.handle("cast", None, 0.0)
    assert ("a", "cast", ("job", 0)) not in events(machine)
    assert engine.postponed == [("cast", ("job", 0))]


def test_an_event_postponed_by_a_change_of_state_is_retried_at_once_in_the_new_state():
    def rules(et, c, s):
        if s == "a":
            return NextState("b", postpone)
        return None

    engine, machine, _ = start(rules)
    engine.handle("cast", "x", 0.0)
    assert events(machine) == [("a", "cast", "x"), ("b", "cast", "x")]


def test_a_replayed_event_may_be_postponed_again():
    engine, machine, _ = start(postponing)
    engine.handle("cast", ("job", 0), 0.0)
    engine.handle("cast", "go", 0.0)
    engine.handle("cast", "back", 0.0)
    engine.handle("info", ("job", 1), 0.0)
    assert engine.postponed == [("info", ("job", 1))]
    engine.handle("cast", "go", 0.0)
    assert events(machine)[-1] == ("b", "info", ("job", 1))


def test_postponed_calls_are_answered_after_the_change():
    def rules(et, c, s):
        if c == "go":
            return NextState("b")
        if s == "a":
            return KeepState(postpone)
        return KeepState(Reply(et[1], ("done", c)))

    engine, _, effects = start(rules)
    engine.handle(call(1), "q1", 0.0)
    engine.handle(call(2), "q2", 0.0)
    assert effects.log == []
    engine.handle("cast", "go", 0.0)
    assert effects.log == [("reply", 1, ("done", "q1")), ("reply", 2, ("done", "q2"))]


# -- next_event ----------------------------------------------------------------------------------


def test_next_events_come_first_in_the_order_given():
    def rules(et, c, s):
        if c == "start":
            return KeepState(NextEvent("internal", 1), NextEvent("cast", 2), NextEvent("info", 3))
        if c == 1:
            return KeepState(NextEvent("internal", "1a"))
        return None

    engine, machine, _ = start(rules)
    engine.handle("cast", "start", 0.0)
    # 1's own inserted event goes before 2 and 3, which were queued already.
    assert [(e[1], e[2]) for e in events(machine)] == [
        ("cast", "start"),
        ("internal", 1),
        ("internal", "1a"),
        ("cast", 2),
        ("info", 3),
    ]


def test_next_events_go_before_replayed_postponed_events():
    def rules(et, c, s):
        if s == "a" and c == "job":
            return KeepState(postpone)
        if c == "go":
            return NextState("b", NextEvent("internal", "first"))
        return None

    engine, machine, _ = start(rules)
    engine.handle("cast", "job", 0.0)
    engine.handle("cast", "go", 0.0)
    assert [e[2] for e in events(machine)] == ["job", "go", "first", "job"]


def test_next_event_of_every_type():
    got = []

    def rules(et, c, s):
        if c == "start":
            return KeepState(
                NextEvent(("call", From("p", 5, None)), "c"),
                NextEvent("timeout", "t"),
                NextEvent("state_timeout", "st"),
                NextEvent(("timeout", "g"), "gt"),
            )
        got.append(et)
        return None

    engine, _, _ = start(rules)
    engine.handle("cast", "start", 0.0)
    assert got == [("call", From("p", 5, None)), "timeout", "state_timeout", ("timeout", "g")]


@pytest.mark.parametrize("bad", ["enter", "external", ("call", "nobody"), ("other", 1), 3])
def test_next_event_checks_its_type(bad):
    with pytest.raises(ValueError):
        NextEvent(bad, 1)


# -- event timeout --------------------------------------------------------------------------------


def timed(et, c, s):
    """``arm`` sets the given action; anything else just arrives."""
    if et == "cast" and isinstance(c, tuple) and c[0] == "arm":
        return KeepState(*c[1:])
    if et == "cast" and isinstance(c, tuple) and c[0] == "goto":
        return NextState(c[1], *c[2:])
    return None


def test_event_timeout_fires_when_nothing_comes():
    engine, machine, effects = start(timed)
    engine.handle("cast", ("arm", EventTimeout(2.5, "idle")), 10.0)
    assert effects.log == [("start", 1, 2.5)]
    assert engine.timeout(1, 12.5) is None
    assert events(machine)[-1] == ("a", "timeout", "idle")
    assert engine.timers == {}


def test_event_timeout_is_cancelled_by_any_event():
    engine, _, effects = start(timed)
    engine.handle("cast", ("arm", EventTimeout(5, "idle")), 0.0)
    engine.handle("info", "anything", 1.0)
    assert effects.log == [("start", 1, 5), ("cancel", 1)]
    assert engine.timeout(1, 5.0) is STALE  # a late ring of the cancelled timer


def test_event_timeout_is_cancelled_by_an_inserted_event():
    engine, machine, effects = start(timed)
    engine.handle("cast", ("arm", EventTimeout(5, "idle"), NextEvent("internal", "x")), 0.0)
    assert effects.log == [("start", 1, 5), ("cancel", 1)]


def test_event_timeout_of_zero_fires_unless_an_event_is_queued():
    engine, machine, effects = start(timed)
    engine.handle("cast", ("arm", EventTimeout(0, "now")), 0.0)
    assert events(machine)[-1] == ("a", "timeout", "now")
    engine.handle("cast", ("arm", EventTimeout(0, "never"), NextEvent("internal", "queued")), 0.0)
    assert [e[1] for e in events(machine)] == ["cast", "internal"]  # the queued event cancelled it
    assert effects.log == []  # zero timeouts arm no timer
    assert engine.timers == {}


def test_event_timeout_update_and_cancel():
    """Any event cancels the event timeout, so an update (from an event) never finds
    one running: as OTP's, it then fires at once; of two in one list the last wins."""
    engine, machine, effects = start(timed)
    engine.handle("cast", ("arm", EventTimeout(5, "old"), EventTimeout.update("new")), 0.0)
    assert effects.log == []
    assert events(machine)[-1] == ("a", "timeout", "new")
    engine.handle("cast", ("arm", EventTimeout.update("at once")), 6.0)
    assert events(machine)[-1] == ("a", "timeout", "at once")  # none running: fires at once
    engine.handle("cast", ("arm", EventTimeout(5, "x"), EventTimeout.cancel()), 7.0)
    assert engine.timers == {}


# -- state timeout ---------------------------------------------------------------------------------


def test_state_timeout_survives_events_and_is_cancelled_by_a_change_of_state():
    engine, machine, effects = start(timed)
    engine.handle("cast", ("arm", StateTimeout(3, "st")), 0.0)
    engine.handle("info", "x", 1.0)
    engine.handle("cast", ("goto", "a"), 1.0)  # the same state: no change
    assert effects.log == [("start", 1, 3)]
    engine.handle("cast", ("goto", "b"), 2.0)
    assert effects.log == [("start", 1, 3), ("cancel", 1)]
    assert engine.timeout(1, 3.0) is STALE


def test_state_timeout_survives_repeat_state():
    def rules(et, c, s):
        if c == "arm":
            return KeepState(StateTimeout(3, "st"))
        return RepeatState() if c == "repeat" else None

    engine, machine, effects = start(rules, state_enter=True)
    engine.handle("cast", "arm", 0.0)
    engine.handle("cast", "repeat", 1.0)
    assert effects.log == [("start", 1, 3)]
    engine.timeout(1, 3.0)
    assert events(machine)[-1] == ("a", "state_timeout", "st")


def test_state_timeout_set_in_the_transition_to_a_new_state_runs_there():
    engine, machine, effects = start(timed)
    engine.handle("cast", ("goto", "b", StateTimeout(3, "in b")), 0.0)
    assert effects.log == [("start", 1, 3)]
    engine.timeout(1, 3.0)
    assert events(machine)[-1] == ("b", "state_timeout", "in b")


def test_setting_a_state_timeout_again_restarts_it():
    engine, _, effects = start(timed)
    engine.handle("cast", ("arm", StateTimeout(3, "first")), 0.0)
    engine.handle("cast", ("arm", StateTimeout(4, "second")), 1.0)
    assert effects.log == [("start", 1, 3), ("cancel", 1), ("start", 2, 4)]
    assert engine.timeout(1, 3.0) is STALE
    assert engine.timers["state_timeout"][1] == "second"


@pytest.mark.parametrize("cancel", [StateTimeout(None), StateTimeout.cancel()])
def test_state_timeout_of_none_cancels_it(cancel):
    engine, _, effects = start(timed)
    engine.handle("cast", ("arm", StateTimeout(3, "st")), 0.0)
    engine.handle("cast", ("arm", cancel), 1.0)
    assert effects.log == [("start", 1, 3), ("cancel", 1)]
    assert engine.timers == {}


def test_state_timeout_of_zero_fires_after_queued_events_before_the_next_from_outside():
    engine, machine, effects = start(timed)
    engine.handle("cast", ("arm", StateTimeout(0, "zero"), NextEvent("internal", "queued")), 0.0)
    assert [e[1:] for e in events(machine)][1:] == [("internal", "queued"), ("state_timeout", "zero")]
    assert effects.log == []


def test_state_timeout_of_zero_in_an_enter_call():
    def rules(et, c, s):
        if et == "enter":
            return KeepState(StateTimeout(0, "settle")) if s == "b" else None
        if et == "state_timeout":
            return NextState("c")
        return NextState(c)

    engine, machine, _ = start(rules, state_enter=True)
    engine.handle("cast", "b", 0.0)
    assert engine.state == "c"
    assert ("b", "state_timeout", "settle") in events(machine)


def test_state_timeout_update_changes_the_content_only():
    engine, machine, effects = start(timed)
    engine.handle("cast", ("arm", StateTimeout(3, "old")), 0.0)
    engine.handle("cast", ("arm", StateTimeout.update("new")), 1.0)
    assert effects.log == [("start", 1, 3)]
    engine.timeout(1, 3.0)
    assert events(machine)[-1] == ("a", "state_timeout", "new")


# -- generic timeouts -------------------------------------------------------------------------------


def test_generic_timeouts_by_name_survive_events_and_changes_of_state():
    engine, machine, effects = start(timed)
    engine.handle("cast", ("arm", GenericTimeout("g1", 2, "one"), GenericTimeout("g2", 3, "two")), 0.0)
    engine.handle("info", "x", 0.5)
    engine.handle("cast", ("goto", "b"), 1.0)
    assert effects.log == [("start", 1, 2), ("start", 2, 3)]
    engine.timeout(1, 2.0)
    engine.timeout(2, 3.0)
    assert events(machine)[-2:] == [("b", ("timeout", "g1"), "one"), ("b", ("timeout", "g2"), "two")]


def test_generic_timeout_restart_update_and_cancel_by_name():
    engine, machine, effects = start(timed)
    engine.handle("cast", ("arm", GenericTimeout("g", 2, "v1"), GenericTimeout("h", 9)), 0.0)
    engine.handle("cast", ("arm", GenericTimeout("g", 4, "v2")), 1.0)
    engine.handle("cast", ("arm", GenericTimeout.update("g", "v3")), 1.5)
    engine.handle("cast", ("arm", GenericTimeout.cancel("h")), 1.5)
    assert effects.log == [("start", 1, 2), ("start", 2, 9), ("cancel", 1), ("start", 3, 4), ("cancel", 2)]
    assert engine.timeout(1, 2.0) is STALE
    engine.timeout(3, 5.0)
    assert events(machine)[-1] == ("a", ("timeout", "g"), "v3")
    engine.handle("cast", ("arm", GenericTimeout.update("z", "at once")), 6.0)
    assert events(machine)[-1] == ("a", ("timeout", "z"), "at once")


def test_the_last_timeout_action_of_a_kind_wins():
    engine, _, effects = start(timed)
    engine.handle("cast", ("arm", StateTimeout(1, "a"), GenericTimeout("g", 2), StateTimeout(3, "b")), 0.0)
    assert effects.log == [("start", 1, 2), ("start", 2, 3)]
    assert engine.timers["state_timeout"][1] == "b"


def test_zero_timeouts_fire_in_the_order_of_their_actions():
    engine, machine, _ = start(timed)
    engine.handle("cast", ("arm", GenericTimeout("g", 0, "g"), StateTimeout(0, "s"), GenericTimeout("h", 0, "h")), 0.0)
    assert [e[2] for e in events(machine)[1:]] == ["g", "s", "h"]


def test_absolute_timeouts_count_from_the_time_given():
    engine, _, effects = start(timed)
    engine.handle("cast", ("arm", StateTimeout(15.0, "abs", absolute=True)), 10.0)
    assert effects.log == [("start", 1, 5.0)]
    assert engine.running_timeouts() == [("state_timeout", "abs", 5.0)]


@pytest.mark.parametrize("bad", [-1, "1", [1]])
def test_timeout_seconds_are_checked(bad):
    with pytest.raises(ValueError):
        StateTimeout(bad)


def test_a_timeout_event_cancels_the_event_timeout_as_any_event():
    engine, _, effects = start(timed)
    engine.handle("cast", ("arm", EventTimeout(5, "e"), GenericTimeout("g", 1, "g")), 0.0)
    engine.timeout(2, 1.0)
    assert effects.log == [("start", 1, 5), ("start", 2, 1), ("cancel", 1)]


def test_debug_sees_consume_postpone_and_enter():
    seen = []
    engine, _, _ = start(postponing, state_enter=True)
    engine.debug = seen.append
    engine.handle("cast", ("job", 1), 0.0)
    engine.handle("cast", "go", 0.0)
    assert seen == [
        ("postpone", "cast", ("job", 1), "a", "a"),
        ("enter", "a", "b"),
        ("consume", "cast", "go", "a", "b"),
        ("consume", "cast", ("job", 1), "b", "b"),
    ]
