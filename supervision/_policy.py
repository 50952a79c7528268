"""What a supervisor decides when a child exits: pure functions over plain data.

Modelled on OTP ``supervisor.erl``: ``add_restart/3`` (restart intensity),
``do_restart/3`` (restart type x exit reason), ``restart/3`` per strategy,
``terminate_children/2`` (temporary bystanders are dropped) and
``do_auto_shutdown/2``.  Nothing here touches a process or a clock: the
supervisor passes ``now`` and a snapshot of its children, gets a decision
back, and only carries it out.  That keeps every rule testable without
starting anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Hashable, Iterable, Literal, Sequence

from supervision._spec import AUTO_SHUTDOWN_MODES, RESTART_TYPES, STRATEGIES, SupFlags

__all__ = [
    "RUNNING",
    "RESTARTING",
    "STOPPED",
    "ChildRecord",
    "RestartPlan",
    "ExitDecision",
    "RestartIntensity",
    "add_restart",
    "is_normal_exit",
    "should_restart",
    "plan_restart",
    "shutdown_order",
    "should_auto_shutdown",
    "decide_restart",
    "decide_exit",
]

RUNNING: Final = "running"
"""The child has a live process."""
RESTARTING: Final = "restarting"
"""A restart of the child failed and is being retried (OTP ``{restarting, Pid}``)."""
STOPPED: Final = "stopped"
"""The spec is kept but no process exists (OTP ``pid = undefined``)."""

ChildStatus = Literal["running", "restarting", "stopped"]
_STATUSES = (RUNNING, RESTARTING, STOPPED)


@dataclass(frozen=True)
class ChildRecord:
    """What the planner needs to know about one child.

    The supervisor builds these from its own state, in start order; the
    planner never sees refs or specs, only ids.
    """

    id: Hashable
    restart: str = "permanent"
    status: ChildStatus = RUNNING
    significant: bool = False

    def __post_init__(self) -> None:
        if self.restart not in RESTART_TYPES:
            raise ValueError(f"ChildRecord restart: {self.restart!r} is not one of " + ", ".join(RESTART_TYPES))
        if self.status not in _STATUSES:
            raise ValueError(f"ChildRecord status: {self.status!r} is not one of " + ", ".join(_STATUSES))

    @property
    def running(self) -> bool:
        """True when there is a process to stop."""
        return self.status == RUNNING


@dataclass(frozen=True)
class RestartPlan:
    """The steps of one restart decision, to be carried out in this order.

    1. stop ``terminate`` one by one, in the given (reverse start) order,
       each with its own shutdown spec;
    2. forget ``drop`` entirely: temporary children are never restarted,
       also when they were stopped as bystanders;
    3. start ``start`` one by one, in the given (start) order.  If one of
       them fails, the supervisor marks it restarting and retries through
       its own mailbox with ``decide_restart`` (OTP ``try_again_restart``).
    """

    terminate: tuple[Hashable, ...]
    drop: tuple[Hashable, ...]
    start: tuple[Hashable, ...]


@dataclass(frozen=True)
class ExitDecision:
    """What to do after a child exited (or after a failed restart is retried).

    - ``log_error``: report the exit as an error (OTP ``child_terminated``);
      ``normal``/``shutdown`` exits of non-permanent children are not errors.
    - ``drop_exited``: forget the exited child's spec (temporary children).
    - ``plan``: the restart to carry out, or None.
    - ``shutdown``: None, ``"reached_max_restart_intensity"`` or
      ``"auto_shutdown"``.  When set, the supervisor restarts nothing, stops
      its remaining children in ``shutdown_order`` and exits with reason
      ``shutdown``.
    - ``restarts``: the new restart history to keep (for ``add_restart``).
    """

    log_error: bool
    drop_exited: bool
    plan: RestartPlan | None
    shutdown: str | None
    restarts: tuple[float, ...]


def add_restart(restarts: Sequence[float], now: float, intensity: int, period: float) -> tuple[bool, tuple[float, ...]]:
    """Record one restart at ``now``; say whether it is within the intensity.

    Exactly OTP's ``add_restart``: drop the recorded restarts older than
    ``now - period`` (one exactly ``period`` old still counts), add ``now``,
    and allow the restart when at most ``intensity`` remain.  So intensity 1
    period 5 allows one restart and stops the supervisor at the second
    within 5 seconds; intensity 0 stops it at the first failure.

    ``restarts`` is oldest first; the caller calls this once per restart
    decision (a one_for_all restart of N children counts once) and once per
    retry of a failed restart.  Returns ``(ok, new_restarts)``.
    """
    threshold = now - period
    kept = tuple(t for t in restarts if t >= threshold)
    recorded = kept + (now,)
    return len(recorded) <= intensity, recorded


@dataclass(frozen=True)
class RestartIntensity:
    """Restart history with its limits: ``add_restart`` as a value.

    ``add(now)`` returns ``(ok, next_state)``; the supervisor keeps the
    returned state.
    """

    intensity: int = 1
    period: float = 5
    restarts: tuple[float, ...] = ()

    @classmethod
    def for_flags(cls, flags: SupFlags) -> "RestartIntensity":
        """An empty history with the limits of ``flags``."""
        return cls(flags.intensity, flags.period)

    def add(self, now: float) -> tuple[bool, "RestartIntensity"]:
        """Record a restart at ``now``; False when the intensity is exceeded."""
        ok, restarts = add_restart(self.restarts, now, self.intensity, self.period)
        return ok, RestartIntensity(self.intensity, self.period, restarts)


def is_normal_exit(reason: Any) -> bool:
    """True for the exit reasons OTP treats as normal for restart decisions.

    ``"normal"``, ``"shutdown"`` and ``("shutdown", term)``.  A list
    ``["shutdown", term]`` counts too, because a tuple reason that crossed
    the transport as orjson arrives as a list.
    """
    if isinstance(reason, str):
        return reason in ("normal", "shutdown")
    if isinstance(reason, (tuple, list)) and len(reason) == 2:
        return isinstance(reason[0], str) and reason[0] == "shutdown"
    return False


def should_restart(restart_type: str, reason: Any) -> bool:
    """OTP's restart table: permanent always, transient only on an abnormal exit,
    temporary never."""
    if restart_type == "permanent":
        return True
    if restart_type == "transient":
        return not is_normal_exit(reason)
    if restart_type == "temporary":
        return False
    raise ValueError(f"restart_type: {restart_type!r} is not one of " + ", ".join(RESTART_TYPES))


def _index_of(children: Sequence[ChildRecord], child_id: Hashable) -> int:
    for index, child in enumerate(children):
        if child.id == child_id:
            return index
    raise KeyError(f"failed child {child_id!r} is not among the children {[child.id for child in children]!r}")


def _restart_many(affected: Sequence[ChildRecord], failed_id: Hashable) -> RestartPlan:
    """OTP ``restart_multiple_children``: stop the affected children last-first,
    drop the temporary ones, start the rest in start order.

    The failed child is already dead; stopped or restarting siblings have no
    process to stop but are started again with the others, as OTP's
    ``start_children`` starts every child left in the list.
    """
    terminate = tuple(child.id for child in reversed(affected) if child.running and child.id != failed_id)
    drop = tuple(child.id for child in affected if child.restart == "temporary")
    start = tuple(child.id for child in affected if child.restart != "temporary")
    return RestartPlan(terminate=terminate, drop=drop, start=start)


def plan_restart(strategy: str, children: Sequence[ChildRecord], failed_id: Hashable) -> RestartPlan:
    """Which children to stop, forget and start when ``failed_id`` is restarted.

    ``children`` are in start order.  one_for_one and simple_one_for_one
    restart only the failed child; one_for_all stops all the others
    (reverse start order) and starts all; rest_for_one does the same for
    the failed child and those started after it, leaving earlier ones
    untouched.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy: {strategy!r} is not one of " + ", ".join(STRATEGIES))
    index = _index_of(children, failed_id)
    if strategy in ("one_for_one", "simple_one_for_one"):
        affected: Sequence[ChildRecord] = children[index : index + 1]
    elif strategy == "one_for_all":
        affected = children
    else:
        affected = children[index:]
    return _restart_many(affected, failed_id)


def shutdown_order(children: Iterable[ChildRecord]) -> tuple[Hashable, ...]:
    """Ids to stop when the supervisor terminates: running ones, reverse start order.

    Children that are stopped or restarting have no process to stop.  A
    simple_one_for_one supervisor instead stops all its children at once
    under one timeout, so the order does not matter there.
    """
    return tuple(child.id for child in reversed(list(children)) if child.running)


def should_auto_shutdown(auto_shutdown: str, exited: ChildRecord, siblings: Iterable[ChildRecord]) -> bool:
    """OTP ``do_auto_shutdown``: does this exit shut the supervisor down?

    Called only for exits that are not restarted (a transient or temporary
    child ending normally, or a temporary one ending abnormally).
    ``siblings`` are the other children, without the exited one.  Only a
    significant child's exit counts: with ``any_significant`` it is enough;
    with ``all_significant`` no other significant child may still be
    running or restarting (a restarting child is still active in OTP).
    """
    if auto_shutdown not in AUTO_SHUTDOWN_MODES:
        raise ValueError(f"auto_shutdown: {auto_shutdown!r} is not one of " + ", ".join(AUTO_SHUTDOWN_MODES))
    if auto_shutdown == "never" or not exited.significant:
        return False
    if auto_shutdown == "any_significant":
        return True
    return not any(child.significant and child.status != STOPPED for child in siblings)


def decide_restart(
    flags: SupFlags,
    children: Sequence[ChildRecord],
    child_id: Hashable,
    restarts: Sequence[float],
    now: float,
) -> ExitDecision:
    """OTP ``restart/2``: count one restart, then plan it or give up.

    Used for a child that must be restarted and for each retry of a
    restart that failed (each retry counts toward the intensity).  When
    the intensity is exceeded the exited child is dropped if temporary
    (OTP ``del_child``) and the supervisor shuts down.
    """
    ok, new_restarts = add_restart(restarts, now, flags.intensity, flags.period)
    if not ok:
        exited = children[_index_of(children, child_id)]
        return ExitDecision(
            log_error=True,
            drop_exited=exited.restart == "temporary",
            plan=None,
            shutdown="reached_max_restart_intensity",
            restarts=new_restarts,
        )
    plan = plan_restart(flags.strategy, children, child_id)
    return ExitDecision(log_error=False, drop_exited=False, plan=plan, shutdown=None, restarts=new_restarts)


def decide_exit(
    flags: SupFlags,
    children: Sequence[ChildRecord],
    child_id: Hashable,
    reason: Any,
    restarts: Sequence[float],
    now: float,
) -> ExitDecision:
    """OTP ``do_restart/3``: everything the supervisor does when a child exits.

    ``children`` is the snapshot in start order, including the exited
    child (its status is ignored: it is dead).  The restart table decides;
    a restarted child is logged as an error and planned by
    ``decide_restart``; an exit that is not restarted drops a temporary
    child, keeps a transient one's spec, and may trigger auto_shutdown.
    """
    exited = children[_index_of(children, child_id)]
    if should_restart(exited.restart, reason):
        decision = decide_restart(flags, children, child_id, restarts, now)
        return ExitDecision(
            log_error=True,
            drop_exited=decision.drop_exited,
            plan=decision.plan,
            shutdown=decision.shutdown,
            restarts=decision.restarts,
        )
    siblings = [child for child in children if child.id != child_id]
    auto = should_auto_shutdown(flags.auto_shutdown, exited, siblings)
    return ExitDecision(
        log_error=not is_normal_exit(reason),
        drop_exited=exited.restart == "temporary",
        plan=None,
        shutdown="auto_shutdown" if auto else None,
        restarts=tuple(restarts),
    )
