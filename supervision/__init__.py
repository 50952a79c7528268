"""OTP supervisors over the actors kernel.

Strategies ``one_for_one``, ``one_for_all``, ``rest_for_one`` and
``simple_one_for_one``; restart types, shutdown specs and restart intensity
exactly as OTP's ``supervisor`` module documents them.
"""

from __future__ import annotations

from typing import Any, Hashable

from actors import ActorRef, AlreadyRegistered, GenServer, Node, SpawnError
from supervision._children import ChildInfo
from supervision._policy import add_restart, is_normal_exit, plan_restart, should_restart
from supervision._spec import ChildSpec, SupFlags, check_childspecs
from supervision._supervisor import Supervisor, _StaticSupervisor, unwrap
from supervision.errors import (
    AlreadyPresent,
    AlreadyStarted,
    InvalidChildSpec,
    InvalidSupFlags,
    NotFound,
    Restarting,
    Running,
    SimpleOneForOne,
    StartError,
    SupervisorError,
)

__all__ = [
    "AlreadyPresent",
    "AlreadyStarted",
    "ChildInfo",
    "ChildSpec",
    "InvalidChildSpec",
    "InvalidSupFlags",
    "NotFound",
    "Restarting",
    "Running",
    "SimpleOneForOne",
    "StartError",
    "SupFlags",
    "Supervisor",
    "SupervisorError",
    "add_restart",
    "check_childspecs",
    "count_children",
    "delete_child",
    "get_childspec",
    "is_normal_exit",
    "plan_restart",
    "restart_child",
    "should_restart",
    "start_child",
    "start_supervisor",
    "terminate_child",
    "which_children",
]

_TIMEOUT = 60.0


def start_supervisor(
    node_or_actor: Node | GenServer,
    flags: SupFlags | Any,
    children: list[ChildSpec] | list[Any],
    name: str | None = None,
    host: str | None = None,
    cpus: Any = None,
    cls: type[Supervisor] | None = None,
) -> ActorRef | None:
    """Start a supervisor with ``flags`` and ``children`` and return its ref.

    From the host program pass the `Node`; from inside an actor pass the
    actor (``self``): the supervisor is then linked to it, as a child started
    by ``spawn_link``.  A child that fails to start makes this raise
    `StartError` naming the child and the reason; a ``name`` already held
    raises `AlreadyStarted` with the holder's ref.  A ``cls`` whose ``init``
    returns `actors.ignore` starts nothing and gives None (OTP's
    ``start_link`` returns ``ignore``), as `Node.spawn` does.
    """
    sup_cls = cls or _StaticSupervisor
    try:
        if isinstance(node_or_actor, Node):
            ref = node_or_actor.spawn(sup_cls, flags, children, name=name, host=host, cpus=cpus)
        elif isinstance(node_or_actor, GenServer):
            ref = node_or_actor.spawn_link(sup_cls, flags, children, name=name, host=host, cpus=cpus)
        else:
            raise TypeError(f"start_supervisor needs a Node or an actor, got {node_or_actor!r}")
    except SpawnError as exc:
        raise _start_error(exc) from None
    return ref


def _start_error(exc: SpawnError) -> Exception:
    reason = exc.reason
    if isinstance(exc, AlreadyRegistered):  # OTP start_link: {error, {already_started, Pid}}
        return AlreadyStarted(reason[1])
    if (
        isinstance(reason, tuple)
        and len(reason) == 2
        and reason[0] == "shutdown"
        and isinstance(reason[1], tuple)
        and reason[1][0] == "failed_to_start_child"
    ):
        _tag, child_id, why = reason[1]
        return StartError(child_id, why)
    if isinstance(reason, Exception):
        return reason
    return StartError(None, reason)


def start_child(sup: ActorRef, spec_or_args: Any, timeout: float | None = _TIMEOUT) -> ActorRef | None:
    """Add and start a child (a spec; for simple_one_for_one, extra arguments)."""
    return unwrap(sup.call(("start_child", spec_or_args), timeout=timeout))


def terminate_child(sup: ActorRef, id_or_ref: Hashable, timeout: float | None = _TIMEOUT) -> None:
    """Stop a child with its shutdown spec; its spec stays (unless temporary)."""
    unwrap(sup.call(("terminate_child", id_or_ref), timeout=timeout))


def restart_child(sup: ActorRef, child_id: Hashable, timeout: float | None = _TIMEOUT) -> ActorRef | None:
    return unwrap(sup.call(("restart_child", child_id), timeout=timeout))


def delete_child(sup: ActorRef, child_id: Hashable, timeout: float | None = _TIMEOUT) -> None:
    unwrap(sup.call(("delete_child", child_id), timeout=timeout))


def which_children(sup: ActorRef, timeout: float | None = _TIMEOUT) -> list[ChildInfo]:
    return unwrap(sup.call(("which_children",), timeout=timeout))


def count_children(sup: ActorRef, timeout: float | None = _TIMEOUT) -> dict[str, int]:
    return unwrap(sup.call(("count_children",), timeout=timeout))


def get_childspec(sup: ActorRef, child_id: Hashable, timeout: float | None = _TIMEOUT) -> ChildSpec:
    return unwrap(sup.call(("get_childspec", child_id), timeout=timeout))
