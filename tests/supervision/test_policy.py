"""Restart intensity, the restart table, strategy plans and auto_shutdown.

Cases are named after OTP supervisor_SUITE where one matches; they run the
decisions on plain data, with ``now`` passed in, so no process is started.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervision._policy import (
    RESTARTING,
    RUNNING,
    STOPPED,
    ChildRecord,
    ExitDecision,
    RestartIntensity,
    RestartPlan,
    add_restart,
    decide_exit,
    decide_restart,
    is_normal_exit,
    plan_restart,
    should_auto_shutdown,
    should_restart,
    shutdown_order,
)
from supervision._spec import SupFlags

pytestmark = pytest.mark.timeout(20)


def kids(*specs: str) -> list[ChildRecord]:
    """Children from "id:restart[:status]" strings, in start order."""
    records = []
    for text in specs:
        parts = text.split(":")
        restart = parts[1] if len(parts) > 1 and parts[1] else "permanent"
        status = parts[2] if len(parts) > 2 else RUNNING
        records.append(ChildRecord(parts[0], restart, status))  # type: ignore[arg-type]
    return records


# --- add_restart ----------------------------------------------------------------


def test_restart_intensity_two_restarts_within_period_exceed() -> None:
    ok, restarts = add_restart((), 0.0, 1, 5)
    assert ok and restarts == (0.0,)
    ok, restarts = add_restart(restarts, 4.9, 1, 5)
    assert not ok
    assert restarts == (0.0, 4.9)


def test_restart_exactly_period_old_still_counts() -> None:
    # OTP keeps restarts R with R >= Now - Period.
    ok, _ = add_restart((0.0,), 5.0, 1, 5)
    assert not ok
    ok, restarts = add_restart((0.0,), 5.001, 1, 5)
    assert ok and restarts == (5.001,)


def test_restarts_outside_window_forgotten() -> None:
    ok, restarts = add_restart((0.0, 1.0, 2.0), 10.0, 3, 5)
    assert ok
    assert restarts == (10.0,)


def test_intensity_zero_first_failure_escalates() -> None:
    ok, restarts = add_restart((), 100.0, 0, 5)
    assert not ok and restarts == (100.0,)


def test_intensity_three_allows_three_then_fourth_exceeds() -> None:
    restarts: tuple[float, ...] = ()
    for now in (1.0, 2.0, 3.0):
        ok, restarts = add_restart(restarts, now, 3, 10)
        assert ok
    ok, _ = add_restart(restarts, 4.0, 3, 10)
    assert not ok


def test_restart_intensity_value_wraps_add_restart() -> None:
    state = RestartIntensity.for_flags(SupFlags(intensity=1, period=5))
    ok, state = state.add(0.0)
    assert ok and state.restarts == (0.0,)
    ok, later = state.add(6.0)
    assert ok and later.restarts == (6.0,)
    ok, _ = state.add(1.0)
    assert not ok


@settings(max_examples=200, deadline=None)
@given(
    intensity=st.integers(min_value=0, max_value=5),
    period=st.integers(min_value=1, max_value=20),
    gaps=st.lists(st.integers(min_value=0, max_value=15), min_size=1, max_size=40),
)
def test_add_restart_never_allows_more_than_intensity_in_any_window(
    intensity: int, period: int, gaps: list[int]
) -> None:
    """Allowed restarts never exceed ``intensity`` in any closed window of
    length ``period``, and a restart is refused only when the window ending
    at it really holds more than ``intensity``: OTP's rule exactly."""
    restarts: tuple[float, ...] = ()
    allowed: list[float] = []
    now = 0.0
    for gap in gaps:
        now += gap
        in_window = sum(1 for t in allowed if t >= now - period) + 1
        ok, restarts = add_restart(restarts, now, intensity, period)
        assert ok == (in_window <= intensity)
        if not ok:
            break  # the supervisor shuts down at the first refusal
        allowed.append(now)
    for start in allowed:
        assert sum(1 for t in allowed if start <= t <= start + period) <= intensity
    assert all(t >= now - period for t in restarts)


# --- restart table ------------------------------------------------------------------

NORMAL_REASONS = ["normal", "shutdown", ("shutdown", "bye"), ["shutdown", {"x": 1}]]
ABNORMAL_REASONS = [
    "killed",
    "kill",
    "noproc",
    ("error", "boom"),
    ValueError("x"),
    ("shutdown",),
    ("shutdown", 1, 2),
    None,
]


@pytest.mark.parametrize("reason", NORMAL_REASONS)
def test_is_normal_exit(reason: object) -> None:
    assert is_normal_exit(reason)


@pytest.mark.parametrize("reason", ABNORMAL_REASONS)
def test_is_abnormal_exit(reason: object) -> None:
    assert not is_normal_exit(reason)


@pytest.mark.parametrize("reason", NORMAL_REASONS + ABNORMAL_REASONS)
def test_permanent_always_restarted(reason: object) -> None:
    assert should_restart("permanent", reason)


@pytest.mark.parametrize("reason", NORMAL_REASONS)
def test_transient_normal_not_restarted(reason: object) -> None:
    assert not should_restart("transient", reason)


@pytest.mark.parametrize("reason", ABNORMAL_REASONS)
def test_transient_abnormal_restarted(reason: object) -> None:
    assert should_restart("transient", reason)


@pytest.mark.parametrize("reason", NORMAL_REASONS + ABNORMAL_REASONS)
def test_temporary_never_restarted(reason: object) -> None:
    assert not should_restart("temporary", reason)


def test_should_restart_rejects_unknown_type() -> None:
    with pytest.raises(ValueError, match="'sometimes'"):
        should_restart("sometimes", "normal")


# --- strategy plans -----------------------------------------------------------------


def test_one_for_one_plan_restarts_only_failed() -> None:
    plan = plan_restart("one_for_one", kids("a", "b", "c"), "b")
    assert plan == RestartPlan(terminate=(), drop=(), start=("b",))


def test_one_for_all_plan() -> None:
    plan = plan_restart("one_for_all", kids("a", "b", "c", "d"), "b")
    assert plan.terminate == ("d", "c", "a")
    assert plan.drop == ()
    assert plan.start == ("a", "b", "c", "d")


def test_rest_for_one_plan() -> None:
    plan = plan_restart("rest_for_one", kids("a", "b", "c", "d"), "b")
    assert plan.terminate == ("d", "c")
    assert plan.drop == ()
    assert plan.start == ("b", "c", "d")


def test_rest_for_one_last_child_is_like_one_for_one() -> None:
    plan = plan_restart("rest_for_one", kids("a", "b", "c"), "c")
    assert plan == RestartPlan(terminate=(), drop=(), start=("c",))


def test_simple_one_for_one_plan_restarts_only_that_child() -> None:
    plan = plan_restart("simple_one_for_one", kids("r1", "r2"), "r2")
    assert plan == RestartPlan(terminate=(), drop=(), start=("r2",))


def test_temporary_bystander_one_for_all() -> None:
    plan = plan_restart("one_for_all", kids("a", "t:temporary", "b", "c:transient"), "b")
    assert plan.terminate == ("c", "t", "a")
    assert plan.drop == ("t",)
    assert plan.start == ("a", "b", "c")


def test_temporary_bystander_rest_for_one() -> None:
    plan = plan_restart("rest_for_one", kids("t0:temporary", "b", "t1:temporary", "c"), "b")
    assert plan.terminate == ("c", "t1")
    assert plan.drop == ("t1",)
    assert plan.start == ("b", "c")


def test_stopped_sibling_not_terminated_but_started_again() -> None:
    # OTP start_children starts every non-temporary child left in the list,
    # including a transient one that had ended normally; a stopped temporary
    # one is dropped.
    children = kids("a", "s:transient:stopped", "x:temporary:stopped", "r::restarting", "b")
    plan = plan_restart("one_for_all", children, "b")
    assert plan.terminate == ("a",)
    assert plan.drop == ("x",)
    assert plan.start == ("a", "s", "r", "b")


def test_plan_unknown_child_or_strategy() -> None:
    with pytest.raises(KeyError, match="'zz'"):
        plan_restart("one_for_one", kids("a"), "zz")
    with pytest.raises(ValueError, match="'one_for_some'"):
        plan_restart("one_for_some", kids("a"), "a")


def test_shutdown_order_reverse_start_running_only() -> None:
    children = kids("a", "b:transient:stopped", "c", "d::restarting", "e")
    assert shutdown_order(children) == ("e", "c", "a")
    assert shutdown_order([]) == ()


# --- decide_exit: OTP do_restart ---------------------------------------------------


def test_permanent_normal_restarted_and_logged() -> None:
    decision = decide_exit(SupFlags(), kids("a"), "a", "normal", (), 1.0)
    assert decision == ExitDecision(
        log_error=True, drop_exited=False, plan=RestartPlan((), (), ("a",)), shutdown=None, restarts=(1.0,)
    )


def test_transient_normal() -> None:
    for reason in ("normal", "shutdown", ("shutdown", "done")):
        decision = decide_exit(SupFlags(), kids("a:transient"), "a", reason, (0.5,), 1.0)
        assert decision == ExitDecision(log_error=False, drop_exited=False, plan=None, shutdown=None, restarts=(0.5,))


def test_transient_abnormal() -> None:
    decision = decide_exit(SupFlags(), kids("a:transient"), "a", "boom", (), 1.0)
    assert decision.log_error
    assert decision.plan == RestartPlan((), (), ("a",))
    assert decision.restarts == (1.0,)


def test_temporary_normal() -> None:
    decision = decide_exit(SupFlags(), kids("a:temporary"), "a", "normal", (), 1.0)
    assert decision == ExitDecision(log_error=False, drop_exited=True, plan=None, shutdown=None, restarts=())


def test_temporary_abnormal() -> None:
    decision = decide_exit(SupFlags(), kids("a:temporary"), "a", "boom", (), 1.0)
    assert decision == ExitDecision(log_error=True, drop_exited=True, plan=None, shutdown=None, restarts=())


def test_one_for_one_escalation() -> None:
    flags = SupFlags("one_for_one", intensity=1, period=5)
    first = decide_exit(flags, kids("a", "b"), "a", "boom", (), 0.0)
    assert first.shutdown is None
    second = decide_exit(flags, kids("a", "b"), "b", "boom", first.restarts, 1.0)
    assert second.shutdown == "reached_max_restart_intensity"
    assert second.plan is None
    assert second.log_error


def test_one_for_all_restart_of_n_children_counts_once() -> None:
    flags = SupFlags("one_for_all", intensity=1, period=5)
    decision = decide_exit(flags, kids("a", "b", "c", "d"), "c", "boom", (), 2.0)
    assert decision.shutdown is None
    assert decision.restarts == (2.0,)
    assert decision.plan is not None and decision.plan.start == ("a", "b", "c", "d")


def test_one_for_all_escalation() -> None:
    flags = SupFlags("one_for_all", intensity=1, period=5)
    first = decide_exit(flags, kids("a", "b"), "a", "boom", (), 0.0)
    second = decide_exit(flags, kids("a", "b"), "a", "boom", first.restarts, 3.0)
    assert second.shutdown == "reached_max_restart_intensity"


def test_rest_for_one_escalation() -> None:
    flags = SupFlags("rest_for_one", intensity=0, period=5)
    decision = decide_exit(flags, kids("a", "b"), "a", "boom", (), 0.0)
    assert decision.shutdown == "reached_max_restart_intensity"
    assert decision.plan is None


def test_escalation_drops_temporary_only_through_restart_types() -> None:
    flags = SupFlags(intensity=0)
    decision = decide_exit(flags, kids("a:transient"), "a", "boom", (), 0.0)
    assert decision.shutdown == "reached_max_restart_intensity"
    assert not decision.drop_exited


def test_restart_retry_counts_toward_intensity() -> None:
    # OTP try_again_restart calls restart/2 again: one more count per retry.
    flags = SupFlags("one_for_one", intensity=2, period=5)
    first = decide_exit(flags, kids("a"), "a", "boom", (), 0.0)
    retry = decide_restart(flags, kids("a::restarting"), "a", first.restarts, 0.1)
    assert retry.shutdown is None and retry.restarts == (0.0, 0.1)
    again = decide_restart(flags, kids("a::restarting"), "a", retry.restarts, 0.2)
    assert again.shutdown == "reached_max_restart_intensity"


def test_one_for_all_other_child_fails_restart() -> None:
    # The retry target is the sibling that failed to start; one_for_all
    # stops what did start and starts everyone again.
    flags = SupFlags("one_for_all", intensity=10, period=5)
    children = kids("a", "b::restarting", "c:permanent:stopped")
    retry = decide_restart(flags, children, "b", (0.0,), 0.5)
    assert retry.plan == RestartPlan(terminate=("a",), drop=(), start=("a", "b", "c"))


def test_rest_for_one_other_child_fails_restart() -> None:
    flags = SupFlags("rest_for_one", intensity=10, period=5)
    children = kids("a", "b", "c::restarting", "d:permanent:stopped")
    retry = decide_restart(flags, children, "c", (0.0,), 0.5)
    assert retry.plan == RestartPlan(terminate=(), drop=(), start=("c", "d"))


# --- auto_shutdown (significant children) -----------------------------------------


def sig(child_id: str, restart: str = "transient", status: str = RUNNING, significant: bool = True) -> ChildRecord:
    return ChildRecord(child_id, restart, status, significant)  # type: ignore[arg-type]


def test_auto_shutdown_never() -> None:
    assert not should_auto_shutdown("never", sig("a"), [])


def test_auto_shutdown_ignores_non_significant() -> None:
    assert not should_auto_shutdown("any_significant", sig("a", significant=False), [])


def test_any_significant() -> None:
    assert should_auto_shutdown("any_significant", sig("a"), [sig("b")])


def test_all_significant() -> None:
    assert not should_auto_shutdown("all_significant", sig("a"), [sig("b")])
    assert not should_auto_shutdown("all_significant", sig("a"), [sig("b", status=RESTARTING)])
    assert should_auto_shutdown("all_significant", sig("a"), [sig("b", status=STOPPED), sig("c", significant=False)])
    assert should_auto_shutdown("all_significant", sig("a"), [])


def test_auto_shutdown_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="'sometimes'"):
        should_auto_shutdown("sometimes", sig("a"), [])


def test_significant_temporary() -> None:
    flags = SupFlags(auto_shutdown="any_significant")
    for reason in ("normal", "boom"):
        decision = decide_exit(flags, [sig("a", "temporary"), ChildRecord("b")], "a", reason, (), 1.0)
        assert decision.shutdown == "auto_shutdown"
        assert decision.drop_exited
        assert decision.plan is None


def test_significant_transient() -> None:
    flags = SupFlags(auto_shutdown="any_significant")
    normal = decide_exit(flags, [sig("a")], "a", ("shutdown", "done"), (), 1.0)
    assert normal.shutdown == "auto_shutdown" and not normal.drop_exited
    crashed = decide_exit(flags, [sig("a")], "a", "boom", (), 1.0)
    assert crashed.shutdown is None
    assert crashed.plan == RestartPlan((), (), ("a",))


def test_significant_all_significant_waits_for_last() -> None:
    flags = SupFlags(auto_shutdown="all_significant")
    children = [sig("a"), sig("b"), ChildRecord("w")]
    first = decide_exit(flags, children, "a", "normal", (), 1.0)
    assert first.shutdown is None
    children = [sig("a", status=STOPPED), sig("b"), ChildRecord("w")]
    last = decide_exit(flags, children, "b", "normal", (), 2.0)
    assert last.shutdown == "auto_shutdown"


def test_significant_simple_one_for_one_all_significant() -> None:
    flags = SupFlags("simple_one_for_one", auto_shutdown="all_significant")
    dynamic = [sig("ref1", "temporary"), sig("ref2", "temporary")]
    assert decide_exit(flags, dynamic, "ref1", "normal", (), 1.0).shutdown is None
    assert decide_exit(flags, dynamic[1:], "ref2", "normal", (), 1.0).shutdown == "auto_shutdown"


def test_child_record_validation() -> None:
    with pytest.raises(ValueError, match="status: 'dead'"):
        ChildRecord("a", "permanent", "dead")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="restart: 'sometimes'"):
        ChildRecord("a", "sometimes")
    assert ChildRecord("a").running
    assert not ChildRecord("a", status=RESTARTING).running
